// The dispatch table: every compiled kernel (from the generated kernel_table.inc), chosen by
// operation, rank, layout, element types and window; compiled_kernels() lists them.
#pragma once

#include "core/status.hpp"
#include "core/view.hpp"
#include "validate/window.hpp"

#include <memory>
#include <vector>

namespace poolgen::detail {

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
  // CPU max pooling of small NCHW planes over every plane at once (the planes' sides it serves:
  // flat_planes_served), its outputs flat: one dimension over every element.
  pool_flat,
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
  bool cell_vectors;          // a gather scheduled by vectors of cells (its `cell_vectors` knob)
  // A kernel whose schedule prefetches on some calls only (pooling's `prefetch_rows`, the
  // scatter's `prefetch_pixels` and `prefetch_elements` knobs): it takes a flag (pooling's
  // out_of_cache after its window, set where prefetch_pays; the scatter's prefetch before its
  // output, set where scatter_prefetches).
  bool prefetches;
  int (*entry)(void** args);  // Halide's <name>_argv
  const char* name;
  // Where the AVX-512 variant loses on narrow vectors (POOLGEN_AVX512_NARROW) or out of cache
  // (POOLGEN_AVX512_IN_CACHE): the next variant's own entry, for calls of fewer than
  // narrow_lanes lanes, and where in_cache_only, for calls out of cache on CPUs whose masked
  // loads miss slowly (variant_for).
  int (*narrow_entry)(void** args) = nullptr;
  int narrow_lanes = 0;
  bool in_cache_only = false;
  // Of POOLGEN_AVX512_ONLY_FAMILIES: its variants are AVX-512 and the floor's, and it pays only
  // where the CPU runs the first (gather_pays).
  bool avx512_only = false;
};

// The entry that runs a CPU kernel on a call whose vectors run along `lanes` elements
// (contiguous: the output rows; channels-last: the channels) and which moves `call_bytes`: the
// kernel's next variant below its narrow lanes, or where it pays in cache only on a call out
// of cache and the CPU's masked loads miss slowly (masked_loads_miss_slowly), where this CPU
// runs that variant (the multitarget wrapper would otherwise pick the AVX-512 one); else the
// wrapper, which picks the richest variant the CPU runs.
using KernelEntry = int (*)(void** args);
KernelEntry variant_for(const Kernel& kernel, int64_t lanes, int64_t call_bytes);
// `kernels` with the narrow variants of those the build gives one (POOLGEN_AVX512_NARROW), each
// found where its archive is linked (a weak symbol), and avx512_only set, for either table.
std::vector<Kernel> with_variants(std::vector<Kernel> kernels);

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
// dispatch/backward_kernel_table.cpp): separate so that a program calling only forward ops links no
// backward kernel. A table registers itself for compiled_kernels() when its translation unit is
// linked.
const KernelTable& forward_kernels();
const KernelTable& backward_kernels();
void register_kernel_table(const KernelTable& table);
const std::vector<const KernelTable*>& registered_kernel_tables();

// A generated table's rows (POOLGEN_KERNEL(op, nd, k, s, p, layout, value, index, device,
// capability, cell_vectors, prefetches, name)) as declarations of the kernels' argv entry
// points, or as Kernel entries.
#define POOLGEN_KERNEL_DECLARATION(op, nd, k, s, p, layout, value, index, device, capability, \
                                   cell_vectors, prefetches, name)                            \
  int name##_argv(void** args);
#define POOLGEN_KERNEL_ENTRY(op, nd, k, s, p, layout, value, index, device, capability,       \
                             cell_vectors, prefetches, name)                                  \
  {::poolgen::detail::Op::op, nd, k, s, p, ::poolgen::Layout::layout,                          \
   ::poolgen::DType::value, ::poolgen::DType::index, ::poolgen::Device::device, capability,    \
   cell_vectors != 0, prefetches != 0, name##_argv, #name},

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

// Whether the build's Op::pool_flat kernel for `index` and the fixed window of `kernel` (2:
// k2s2p0, 3: k3s2p1 under PyTorch's floor rule) serves `planes` square input planes of `side`: a
// side listed in POOLGEN_FLAT_PLANES (_I32 for i32 indices; POOLGEN_FLAT_PLANES_K3S2P1 for
// k3s2p1) whose outputs are whole runs of the schedule's (schedules/cpu_schedules.cpp,
// CpuFlatPoolSchedule).
bool flat_planes_served(int64_t side, int64_t planes, DType index, int64_t kernel);

// The fastest kernel of `table` serving `query`: one whose fixed window matches, else the
// general one; on CUDA, of the largest capability the device meets. Null if the build has none.
const Kernel* find_kernel(const KernelTable& table, const KernelQuery& query);

// find_kernel, or an `unsupported` error naming `argument` (the tensor whose dtype and layout
// decided) and the combination this build lacks.
Status choose_kernel(const KernelTable& table, const KernelQuery& query, const char* argument,
                     const Kernel** kernel);

// Whether a CPU gather by fixed window (max_unpool's, max_pool_backward's) is tried before the
// scatter on a call moving `bytes` from `cells` (the pooled extent: values, or the pooling
// gradient) to `slots` (the unpooled one). The channels-last ones of windows that do not overlap
// win from a few dozen cells a plane and 32 channels (of 32-bit values; at every size where
// threads share the call); on one thread the scatter, with its fixed cost prepared once
// (DirectScatter), serves calls of 16 such channels under 256 KiB and planes of fewer than 32
// windows that leave a border (odd sides), where the gather's launch and its cells' bounds cost
// more than it saves (small_scatter_wins). Those of overlapping
// windows (a slot reads up to four cells) are tried from 1 MiB on calls shared by threads (the
// scatter keeps an image to one task), from 4 MiB on one thread (where the scatter's unrolled
// scalar loop wins below), and those built for AVX-512 alone (Kernel::avx512_only) only where
// the CPU has it: k3s2p1 f32 i64 on an Intel Xeon, gather / scatter, us, one thread: 1x64x56x56
// (1.4 MB) 69 / 51-58, 1x64x80x80 (2.9 MB) 153 / 140, 1x64x112x112 (5.6 MB) 303 / 348; two
// threads: 1x64x56x56 42-44 / 58-82 (decided by the thread count at plan time, which changing
// it redoes). The contiguous ones whose windows tile the output (kernel = stride, no padding:
// vectors of cells) write each slot once, which beyond the L2 saves the scatter's zeroing
// pass; but each row of cells pays its marks and its check: in cache they lost on the Intel
// Xeon VM, and on rows of fewer than 64 slots (32 cells, four vectors) up to 22 MB, winning by
// 5-15% at 45 MB (docs/kernels.md). They are tried on calls of at least 4 MiB with rows of at
// least 64 slots; pooling's 2-D gradient from 512 KiB, where on the Zen 4 VM it won in cache.
// The other contiguous ones (opt-in) and unpooling's gradient by windows are tried from
// out_of_cache_bytes() on, where no cache holds the call. With streaming_bytes() 0 (every call
// as if out of cache; the tests run small tensors so) every gather is tried.
bool gather_pays(const Kernel& gather, int64_t bytes, const View& cells, const View& slots);

const char* layout_name(Layout layout);

}  // namespace poolgen::detail
