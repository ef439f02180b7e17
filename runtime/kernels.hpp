// The dispatch table: every compiled kernel (from the generated kernel_table.inc), chosen by
// operation, rank, layout, element types and window, and called through Halide's uniform argv
// entry point.
#pragma once

#include "poolgen/poolgen.hpp"
#include "inline_vector.hpp"
#include "shapes.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace poolgen::detail {

struct View;  // tensors.hpp

enum class Op {
  pool,
  unpool_scatter,
  unpool_gather,
  unpool_winner,
  // The backward ops: max pooling's is unpooling that adds (the scatter and the window gather
  // with accumulate), max unpooling's a gather by index (stopping at an invalid index on the
  // CPU, reporting it on CUDA).
  pool_backward_scatter,
  pool_backward_gather,
  unpool_backward,
  unpool_backward_reporting,  // CUDA's: reports the first invalid index instead of stopping
  // CUDA's max pooling backward: the gather over the windows covering each input position, any
  // window; it counts indices outside their windows (the scatter then runs instead).
  pool_backward_window_gather,
  // CUDA's max unpooling where every index lies in its own window: the same gather taking the
  // last covering output's value (the winner runs instead when one does not).
  unpool_window_gather,
};
const char* op_name(Op op);   // "pool", "pool_backward_scatter", ... (KernelInfo::op)
const char* op_title(Op op);  // the API function whose calls run it: "max_pool", ...

struct Kernel {
  Op op;
  int nd;                       // 0: any rank
  int kernel, stride, padding;  // the fixed window (dilation 1) in every dimension; 0: any
  Layout layout;
  DType value, index;  // unpooling kernels serve every value dtype of their width
  Device device;
  int capability;             // CUDA kernels: the compute capability (70: sm_70); CPU: 0
  int (*entry)(void** args);  // Halide's <name>_argv
  const char* name;
};

// A generated table of kernels, grouped once by what a query must match exactly.
class KernelTable {
 public:
  explicit KernelTable(std::vector<Kernel> kernels);
  const std::vector<Kernel>& kernels() const { return kernels_; }
  // The kernels a query's op, layout, value class, index dtype and device allow.
  const std::vector<const Kernel*>& candidates(Op op, Layout layout, DType value, DType index,
                                               Device device) const;

 private:
  std::vector<Kernel> kernels_;
  struct Buckets;
  std::shared_ptr<const Buckets> buckets_;
};

// The forward ops' kernels (kernel_table.inc), and the backward ops' (backward_kernel_table.inc,
// runtime/backward_kernels.cpp): separate so that a program calling only forward ops links no
// backward kernel. A table registers itself for compiled_kernels() when its translation unit is
// linked.
const KernelTable& forward_kernels();
const KernelTable& backward_kernels();
void register_kernel_table(const KernelTable& table);
const std::vector<const KernelTable*>& registered_kernel_tables();

// A generated table's rows (POOLGEN_KERNEL(op, nd, k, s, p, layout, value, index, device,
// capability, name)) as declarations of the kernels' argv entry points, or as Kernel entries.
#define POOLGEN_KERNEL_DECLARATION(op, nd, k, s, p, layout, value, index, device, capability, \
                                   name)                                                      \
  int name##_argv(void** args);
#define POOLGEN_KERNEL_ENTRY(op, nd, k, s, p, layout, value, index, device, capability, name) \
  {::poolgen::detail::Op::op, nd, k, s, p, ::poolgen::Layout::layout,                          \
   ::poolgen::DType::value, ::poolgen::DType::index, ::poolgen::Device::device, capability,    \
   name##_argv, #name},

// What a call needs of a kernel.
struct KernelQuery {
  Op op;
  int nd;
  Layout layout;
  DType value, index;
  const Window* window;  // null: the general kernel only
  Device device;
  int capability;  // CUDA: the device's compute capability (86: sm_86); CPU: 0
};

// The fastest kernel of `table` serving `query`: one whose fixed window matches, else the
// general one; on CUDA, of the largest capability the device meets. Null if the build has none.
const Kernel* find_kernel(const KernelTable& table, const KernelQuery& query);

// find_kernel, or an `unsupported` error naming `argument` (the tensor whose dtype and layout
// decided) and the combination this build lacks.
Status choose_kernel(const KernelTable& table, const KernelQuery& query, const char* argument,
                     const Kernel** kernel);

// The internal error of a kernel that failed with Halide's message `error`.
Status kernel_failed(const Kernel& kernel, const std::string& error);

// The threads a shared call runs on (runtime/workers.hpp): set_num_threads's count, kept by
// Halide's runtime, else Halide's default (HL_NUM_THREADS, else the host's cores).
// note_thread_count() rereads it after a change.
int thread_count();
void note_thread_count();

// Calls touching fewer bytes than min_parallel_bytes() run on the calling thread: below the
// default, sharing the work costs more than it saves, even with the workers awake
// (docs/kernels.md, "Threads"). set_min_parallel_bytes changes it.
constexpr int64_t kDefaultMinParallelBytes = int64_t{128} << 10;
int64_t min_parallel_bytes();

// The threads a call touching `bytes` (inputs and outputs) runs on: one below
// min_parallel_bytes(), else one for each half of it, up to thread_count() (a smaller share
// costs more to hand out than it saves). worth_sharing: more than one.
int sharing_threads(int64_t bytes);
bool worth_sharing(int64_t bytes);

// Outputs of at least streaming_bytes() go to memory by copy_streaming (set_streaming_bytes;
// default_streaming_bytes(), tensors.hpp): an ordinary store reads each line before writing it
// (read-for-ownership, 1.5x a scatter's compulsory traffic), while an output larger than the
// caches leaves them before anything reads it.
int64_t streaming_bytes();

// How many times the settings that plans depend on (set_min_parallel_bytes, set_streaming_bytes,
// set_num_threads: threads, streaming, the gathers that pay) have changed; a call's remembered
// plan holds for the count it was made at (call_memo.hpp).
int64_t settings_changes();
void note_settings_change();

// The bytes a by-index call moves: `values` elements and as many indices, and the slots of
// their planes (each of `plane` values elements gives `slot_plane` slots).
int64_t by_index_bytes(const View& values, DType index, int64_t plane, int64_t slot_plane);

// Whether a CPU gather by fixed window (max_unpool's, max_pool_backward's) is tried before the
// scatter on a call moving `bytes`. The channels-last ones win at every size. The contiguous
// ones write each slot once: beyond the last-level cache that saves the scatter's zeroing pass,
// but on calls it holds they measured slower than the scatter (small planes, and 22 MB calls,
// where perf finds them waiting on their stores; docs/kernels.md). They are tried from
// streaming_bytes() on, where no cache holds the call.
bool gather_pays(const Kernel& gather, int64_t bytes);

// A kernel's argv: the user context, then its buffers and scalars (3-D pooling backward's CUDA
// window gather has the most: 35, with its magic pairs).
using KernelArgs = InlineVector<void*, 35>;

// The pair that divides every numerator in [0, 2^31) by d (1 <= d < 2^31) with a multiply and a
// shift, as GPU kernels divide by runtime values (generators/window.h, Divisor): with
// l = ceil(log2 d), multiplier = ceil(2^(31+l) / d) (below 2^32) and shift = 31 + l,
// n / d == (n * multiplier) >> shift.
struct MagicDivisor {
  uint32_t multiplier, shift;
  explicit MagicDivisor(int64_t d) {
    int l = 0;
    while ((int64_t{1} << l) < d) ++l;
    shift = static_cast<uint32_t>(31 + l);
    multiplier = static_cast<uint32_t>(((uint64_t{1} << shift) + d - 1) / d);
  }
  int64_t divide(int64_t n) const {
    return static_cast<int64_t>((static_cast<uint64_t>(n) * multiplier) >> shift);
  }
};

// The magic pairs of up to three divisors, for a kernel's arguments (MagicInputs: per
// dimension, multiplier then shift). The object holds the values while the kernel runs.
struct MagicArgs {
  uint32_t pairs[3][2];
  // Sets the pairs of divisors[0, count) and appends them to `args`.
  void append(const int64_t* divisors, int count, KernelArgs* args);
};

// A window's scalars appended to a kernel's arguments as max_pool's generator declares them:
// per spatial dimension, innermost first, kernel, stride, padding and dilation; for a GPU kernel
// then the strides' and the dilations' magic pairs. The object holds the values while the
// kernel runs.
struct WindowArgs {
  int32_t params[3][4];
  MagicArgs stride_magic, dilation_magic;
  WindowArgs(const Window& window, const Kernel& kernel, KernelArgs* args);
  WindowArgs(const WindowArgs&) = delete;
  WindowArgs& operator=(const WindowArgs&) = delete;
};

// Runs `kernel` with args[1...] already filled (args[0] is set to the call's context). Returns
// Halide's error code; the message Halide reported goes to *error. The call moves `call_bytes`
// (inputs and outputs): unless that is worth_sharing, the kernel's parallel loops run on the
// calling thread; otherwise on the workers (parallel_for), several small iterations to a task.
int run_kernel(const Kernel& kernel, KernelArgs& args, std::string* error,
               int64_t call_bytes);

// Calls f(user_context) with a user context that collects the first message Halide's runtime
// reports (kernels and runtime calls alike) and carries the call's bytes, which decide how
// parallel loops run (run_kernel). Returns f's result; the message goes to *error.
int with_error_capture(const std::function<int(void* user_context)>& f, std::string* error,
                       int64_t call_bytes = 0);

// Runs body(task) for every task in [0, count) for a call moving `call_bytes`: on
// sharing_threads(call_bytes) threads, each a contiguous range of the tasks (run_on_workers,
// which wakes sleeping workers for calls of 2 MiB or more). Returns the first non-zero result.
int parallel_for(int count, const std::function<int(int)>& body, int64_t call_bytes);

const char* layout_name(Layout layout);

}  // namespace poolgen::detail
