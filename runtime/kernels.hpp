// The dispatch table: every compiled kernel (from the generated kernel_table.inc), chosen by
// operation, rank, layout, element types and window, and called through Halide's uniform argv
// entry point.
#pragma once

#include "poolgen/poolgen.hpp"
#include "shapes.hpp"

#include <functional>
#include <string>
#include <vector>

namespace poolgen::detail {

enum class Op { pool, unpool_scatter, unpool_gather, unpool_winner };

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

const std::vector<Kernel>& kernel_table();

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

// The fastest kernel serving `query`: one whose fixed window matches, else the general one; on
// CUDA, of the largest capability the device meets. Null if the build has none.
const Kernel* find_kernel(const KernelQuery& query);

// find_kernel, or an `unsupported` error naming `argument` (the tensor whose dtype and layout
// decided) and the combination this build lacks.
Status choose_kernel(const KernelQuery& query, const char* argument, const Kernel** kernel);

// The internal error of a kernel that failed with Halide's message `error`.
Status kernel_failed(const Kernel& kernel, const std::string& error);

// The threads Halide's pool runs kernels on: set_num_threads's count, else Halide's default
// (HL_NUM_THREADS, else the host's cores). note_thread_count() rereads it after a change.
int thread_count();
void note_thread_count();

// Calls touching fewer bytes than min_parallel_bytes() run on the calling thread: below the
// default, waking a worker and sharing the work cost more than it saves (docs/kernels.md,
// "Threads"). set_min_parallel_bytes changes it.
constexpr int64_t kDefaultMinParallelBytes = int64_t{256} << 10;
int64_t min_parallel_bytes();

// Whether a call touching `bytes` (inputs and outputs) should use the thread pool.
bool worth_sharing(int64_t bytes);

// Runs `kernel` with args[1...] already filled (args[0] is set to the call's context). Returns
// Halide's error code; the message Halide reported goes to *error. Without `share`, the
// kernel's parallel loops run on the calling thread.
int run_kernel(const Kernel& kernel, std::vector<void*>& args, std::string* error,
               bool share = true);

// Calls f(user_context) with a user context that collects the first message Halide's runtime
// reports (kernels and runtime calls alike) and says whether parallel loops may use the thread
// pool. Returns f's result; the message goes to *error.
int with_error_capture(const std::function<int(void* user_context)>& f, std::string* error,
                       bool share = true);

// Runs body(task) for every task in [0, count) on Halide's thread pool (the kernels' own), or on
// the calling thread without `share` or with one task; returns the first non-zero result.
int parallel_for(int count, const std::function<int(int)>& body, bool share = true);

const char* layout_name(Layout layout);

}  // namespace poolgen::detail
