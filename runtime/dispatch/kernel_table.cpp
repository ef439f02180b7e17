#include "dispatch/kernel_table.hpp"

#include "parallel/settings.hpp"

#include <HalideRuntime.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <utility>

extern "C" {
#define POOLGEN_KERNEL POOLGEN_KERNEL_DECLARATION
#include "kernel_table.inc"
#undef POOLGEN_KERNEL
// The narrow variants' entries, which a kernel's multitarget archive defines beside its wrapper
// (weak: a build whose variants Halide names otherwise runs the wrapper; tests check the
// default build's). Their names hold '-', which the assembler takes quoted.
#if defined(__GNUC__)
#define POOLGEN_NARROW_VARIANT(name, symbol, lanes, in_cache) \
  __attribute__((weak)) int name##_narrow_argv(void** args) __asm__("\"" symbol "\"");
POOLGEN_NARROW_VARIANTS
#undef POOLGEN_NARROW_VARIANT
#endif
}

namespace poolgen::detail {

namespace {

// Whether the CPU has `features` (Halide's enum, up to halide_target_feature_end), asked through
// Halide's hook, which tests use to force a variant.
bool cpu_runs(std::initializer_list<int> features) {
  constexpr int kWords = (halide_target_feature_end + 63) / 64;
  uint64_t wanted[kWords] = {};
  bool any = false;
  for (int feature : features) {
    if (feature == halide_target_feature_end) break;
    wanted[feature >> 6] |= uint64_t{1} << (feature & 63);
    any = true;
  }
  return !any || halide_can_use_target_features(kWords, wanted) != 0;
}

// Whether the CPU runs the first CPU target's variant (AVX2 by default), above the floor: the
// narrow calls' variant (variant_for) and the wider sides over flat planes need it. Asked once,
// as the multitarget wrapper asks on its first call.
bool runs_first_target() {
  static const bool runs = cpu_runs({POOLGEN_NARROW_FEATURES halide_target_feature_end});
  return runs;
}

}  // namespace

std::vector<Kernel> with_variants(std::vector<Kernel> kernels) {
  struct Narrow {
    const char* name;
    KernelEntry entry;
    int lanes;
    bool in_cache;
  };
#if defined(__GNUC__)
#define POOLGEN_NARROW_VARIANT(name, symbol, lanes, in_cache) \
  {#name, name##_narrow_argv, lanes, in_cache},
#else  // no weak symbols: the wrappers serve every call
#define POOLGEN_NARROW_VARIANT(name, symbol, lanes, in_cache)
#endif
  static const Narrow narrow[] = {POOLGEN_NARROW_VARIANTS{nullptr, nullptr, 0, false}};
#undef POOLGEN_NARROW_VARIANT
  for (Kernel& k : kernels) {
    for (const Narrow* n = narrow; n->name; ++n) {
      if (n->entry && std::strcmp(n->name, k.name) == 0) {
        k.narrow_entry = n->entry;
        k.narrow_lanes = n->lanes;
        k.in_cache_only = n->in_cache;
      }
    }
    for (const char* name : {POOLGEN_AVX512_ONLY_KERNEL_NAMES}) {
      if (std::strcmp(name, k.name) == 0) k.avx512_only = true;
    }
  }
  return kernels;
}

const KernelTable& forward_kernels() {
  static const KernelTable table(with_variants({
#define POOLGEN_KERNEL POOLGEN_KERNEL_ENTRY
#include "kernel_table.inc"
#undef POOLGEN_KERNEL
  }));
  return table;
}

KernelEntry variant_for(const Kernel& kernel, int64_t lanes, int64_t call_bytes) {
  const bool out_of_cache = kernel.in_cache_only && call_bytes >= out_of_cache_bytes() &&
                            masked_loads_miss_slowly();
  if (lanes >= kernel.narrow_lanes && !out_of_cache) return kernel.entry;
  return runs_first_target() ? kernel.narrow_entry : kernel.entry;
}

namespace {

std::vector<const KernelTable*>& tables() {
  static std::vector<const KernelTable*> registered{&forward_kernels()};
  return registered;
}

}  // namespace

// Tables register from static initializers, before main and before any thread could ask.
void register_kernel_table(const KernelTable& table) { tables().push_back(&table); }

const std::vector<const KernelTable*>& registered_kernel_tables() { return tables(); }

const char* op_name(Op op) {
  static const char* const kNames[] = {"pool",
                                       "unpool_scatter",
                                       "unpool_gather",
                                       "unpool_winner",
                                       "pool_backward_scatter",
                                       "pool_backward_gather",
                                       "unpool_backward",
                                       "unpool_backward_reporting",
                                       "pool_backward_window_gather",
                                       "unpool_window_gather",
                                       "pool_flat"};
  return kNames[static_cast<int>(op)];
}

bool flat_planes_served(int64_t side, int64_t planes, DType index, int64_t kernel) {
  // The outputs go by whole runs of the schedule's: k2s2p0 on an even side, and k3s2p1, of whole
  // rows and vectors (lcm(out_side, lanes) outputs), k2s2p0 on an odd side of whole planes and
  // vectors (lcm(plane, lanes)), whose multiples for 16 lanes are for any target's (16, 8, 4).
  constexpr int64_t kWidestLanes = 16;
  const auto listed = [side](std::initializer_list<int> sides) {
    return side > 0 && std::find(sides.begin(), sides.end(), side) != sides.end();
  };
  const bool padded = kernel == 3;  // k3s2p1, else k2s2p0
  const bool built = index == DType::i32
                         ? listed(padded ? std::initializer_list<int>{POOLGEN_FLAT_PLANES_K3S2P1_I32 0}
                                         : std::initializer_list<int>{POOLGEN_FLAT_PLANES_I32 0})
                         : listed(padded ? std::initializer_list<int>{POOLGEN_FLAT_PLANES_K3S2P1 0}
                                         : std::initializer_list<int>{POOLGEN_FLAT_PLANES 0});
  // k3s2p1 on an odd side reads a column past each row but the last plane's last one, which
  // the plane before stands in for until the kernel redoes it: two planes at least.
  if (!built || (padded && side % 2 && planes < 2)) return false;
  // The floor variant builds the sides up to its widest alone (POOLGEN_FLAT_PLANES_FLOOR_WIDEST,
  // cmake/PoolgenKernels.cmake): wider ones need a CPU that runs the variant above it.
  const int64_t floor_widest =
      padded ? POOLGEN_FLAT_PLANES_K3S2P1_FLOOR_WIDEST : POOLGEN_FLAT_PLANES_FLOOR_WIDEST;
  if (floor_widest > 0 && side > floor_widest && !runs_first_target()) return false;
  const int64_t out_side = padded ? (side + 1) / 2 : side / 2;  // a side built is 2 or more
  const int64_t plane = out_side * out_side;
  const bool by_planes = side % 2 && !padded;
  return planes * plane % std::lcm(by_planes ? plane : out_side, kWidestLanes) == 0;
}

const char* layout_name(Layout layout) {
  return layout == Layout::channels_last ? "channels_last" : "contiguous";
}

namespace {

// Every kernel's code (a CUDA kernel's host side too) assumes the instruction sets of the
// build's last CPU target, which Halide's multitarget wrapper runs without asking the CPU
// (cmake/PoolgenKernels.cmake: SSE4.1 by default on x86). Asked once, through Halide's hook,
// which tests use to force a variant.
bool cpu_meets_floor() {
  static const bool meets = cpu_runs({POOLGEN_CPU_FLOOR_FEATURES halide_target_feature_end});
  return meets;
}

bool window_matches(const Kernel& k, const Window* w) {
  if (k.kernel == 0) return true;
  if (w == nullptr) return false;
  // A fixed window without padding is compiled without bounds tests.
  if (k.padding == 0 && w->overhangs) return false;
  for (int i = 0; i < w->nd; ++i) {
    if (w->kernel[i] != k.kernel || w->stride[i] != k.stride || w->padding[i] != k.padding ||
        w->padding_end[i] != k.padding || w->dilation[i] != 1) {
      return false;
    }
  }
  return true;
}

// What a kernel and a query must share exactly. Pooling compares values and its backward adds
// them, so their kernels are per dtype; the others only move values, so their kernels serve
// every dtype of their width.
// A bucket's key, its fields packed into one integer: a lookup is a binary search of integers.
using Bucket = uint32_t;

bool per_dtype(Op op) {
  return op == Op::pool || op == Op::pool_backward_scatter || op == Op::pool_backward_gather ||
         op == Op::pool_backward_window_gather;
}

Bucket bucket_of(Op op, Layout layout, DType value, DType index, Device device) {
  const int value_class = per_dtype(op) ? 100 + static_cast<int>(value)
                                        : static_cast<int>(element_size(value));
  auto field = [](auto v) { return static_cast<uint32_t>(v); };
  // Op < 16, value_class < 128, DType < 16: each field keeps its own bits.
  return (((field(op) * 2 + field(layout)) * 128 + field(value_class)) * 16 + field(index)) * 2 +
         field(device);
}

}  // namespace

// The table grouped by bucket: a call scans the few kernels of its own.
struct KernelTable::Buckets {
  std::vector<Bucket> keys;                          // sorted
  std::vector<std::vector<const Kernel*>> kernels;  // kernels[i]: bucket keys[i]'s
};

KernelTable::KernelTable(std::vector<Kernel> kernels) : kernels_(std::move(kernels)) {
  std::map<Bucket, std::vector<const Kernel*>> grouped;
  for (const Kernel& k : kernels_) {
    grouped[bucket_of(k.op, k.layout, k.value, k.index, k.device)].push_back(&k);
  }
  auto buckets = std::make_shared<Buckets>();
  for (auto& [key, members] : grouped) {
    buckets->keys.push_back(key);
    buckets->kernels.push_back(std::move(members));
  }
  buckets_ = std::move(buckets);
}

const std::vector<const Kernel*>& KernelTable::candidates(Op op, Layout layout, DType value,
                                                          DType index, Device device) const {
  static const std::vector<const Kernel*> none;
  const std::vector<Bucket>& keys = buckets_->keys;
  const Bucket key = bucket_of(op, layout, value, index, device);
  const auto found = std::lower_bound(keys.begin(), keys.end(), key);
  return found == keys.end() || *found != key ? none : buckets_->kernels[found - keys.begin()];
}

const Kernel* find_kernel(const KernelTable& table, const KernelQuery& query) {
  // A fixed window beats the general kernel; then the larger capability (CUDA).
  auto rank = [](const Kernel& k) { return std::make_pair(k.kernel != 0, k.capability); };
  const Kernel* best = nullptr;
  if (!cpu_meets_floor()) return best;
  for (const Kernel* k :
       table.candidates(query.op, query.layout, query.value, query.index, query.device)) {
    if ((k->nd == 0 || k->nd == query.nd) && k->capability <= query.capability &&
        window_matches(*k, query.window) && (!best || rank(*k) > rank(*best))) {
      best = k;
    }
  }
  return best;
}

namespace {

// Why no kernel of `table` serves `query`. Cold: only a call the build cannot serve gets here.
[[gnu::cold]] Status no_kernel(const KernelTable& table, const KernelQuery& query,
                               const char* argument) {
  if (!cpu_meets_floor()) {  // find_kernel found none for that reason
    return fail_as(ErrorKind::no_kernel, Code::unsupported, "CPU",
                   ": expected the instruction sets of this build's least ",
                "CPU target, " POOLGEN_CPU_FLOOR_TARGET ", got a CPU without them (a build whose ",
                "POOLGEN_CPU_TARGETS end in the architecture's baseline, such as x86-64-linux, ",
                "runs on every CPU)");
  }
  std::set<std::string> values, indices;
  for (const Kernel& k : table.kernels()) {
    if (per_dtype(k.op)) values.insert(dtype_name(k.value));
    indices.insert(dtype_name(k.index));
  }
  auto join = [](const std::set<std::string>& names) {
    std::string list;
    for (const std::string& name : names) list += (list.empty() ? "" : " ") + name;
    return list;
  };
  std::string device;
  if (query.device == Device::cuda) {
    device = " CUDA (capability " + std::to_string(query.capability) + " or below)";
  }
  return fail_as(ErrorKind::no_kernel, Code::unsupported, argument,
                 ": expected a combination this build compiled (value types {", join(values),
                 "}, index types {", join(indices),
                 "}: CMake options POOLGEN_VALUE_TYPES, POOLGEN_INDEX_TYPES), got dtype ",
                 dtype_name(query.value), " with ", dtype_name(query.index), " indices (",
                 layout_name(query.layout), " layout), for which this build has no", device, " ",
                 op_title(query.op), " kernel");
}

}  // namespace

Status choose_kernel(const KernelTable& table, const KernelQuery& query, const char* argument,
                     const Kernel** kernel) {
  *kernel = find_kernel(table, query);
  return *kernel ? Status() : no_kernel(table, query, argument);
}

const char* op_title(Op op) {
  switch (op) {
    case Op::pool:
    case Op::pool_flat: return "max_pool";
    case Op::pool_backward_scatter:
    case Op::pool_backward_gather:
    case Op::pool_backward_window_gather: return "max_pool_backward";
    case Op::unpool_backward:
    case Op::unpool_backward_reporting: return "max_unpool_backward";
    default: return "max_unpool";
  }
}

namespace {

// A channels-last gather of windows that do not overlap against the scatter on one thread, f32
// i64, us (docs/kernels.md, "Small channels-last calls"): 7x7 planes (a border row and column
// outside every window) 1x16 0.73 / 0.33-0.36, 1x64 1.19-1.48 / 0.80-0.92, 1x512 6.3-7.1 /
// 5.5-6.5, 1x64x4x7x7 3.1 / 1.9; 16 channels 1x16x14x14 1.31-1.51 / 0.99-1.19, 1x16x8x16x16
// 7.5-8.3 / 5.5-6.3, even at 1x16x56x56 (343 KiB), gather ahead from 1x16x112x112. 16-bit
// values of 16 and 32 channels keep the gather (bf16 1x32x28x28 unpooling 5.9-6.2 / 8.0-8.2).
// Shared by threads, the gather splits an image where the scatter does not (1x512x7x7, two
// threads: 4.1-4.4 / 5.8-6.1).
bool small_scatter_wins(const Kernel& gather, int64_t bytes, const View& cells,
                        const View& slots) {
  constexpr int64_t kNarrowChannels = 16, kNarrowMostBytes = 256 << 10, kBorderedMostCells = 32;
  // Unpooling's gradient by windows falls back on the gather by index, not on a scatter.
  if (gather.op == Op::unpool_backward || sharing_threads(bytes) > 1) return false;
  const bool narrow = slots.shape[1] <= kNarrowChannels && element_size(slots.dtype) == 4;
  if (narrow && bytes < kNarrowMostBytes) return true;
  bool tiled = true;
  for (int d = 2; d < slots.rank; ++d) {
    tiled = tiled && slots.shape[d] == cells.shape[d] * gather.stride;
  }
  return !tiled && cells.plane() < kBorderedMostCells;
}

}  // namespace

bool gather_pays(const Kernel& gather, int64_t bytes, const View& cells, const View& slots) {
  constexpr int64_t kMinBytes = int64_t{4} << 20, kMinRow = 64, kOverlapMinBytes = 1 << 20;
  // Pooling's 2-D gradient by vectors of cells, in cache too (Zen 4 VM, f32 i64, one / two
  // threads, time against the scatter's: 1x16x128x128 0.82 / 0.83, 1x64x64x64 0.95 / 0.96,
  // 1x32x64x64 0.96 / 0.93; below, its fixed cost: 1x16x64x64 1.02 / 0.91, 1x1x64x64 1.23 / 1.21).
  constexpr int64_t kAddingMinBytes = 512 << 10;
  if (streaming_bytes() == 0) return true;
  if (gather.layout == Layout::channels_last) {
    if (gather.kernel <= gather.stride) return !small_scatter_wins(gather, bytes, cells, slots);
    // Asked once, as the multitarget wrapper asks on its first call.
    static const bool avx512 = cpu_runs({POOLGEN_AVX512_FEATURES halide_target_feature_end});
    if (!avx512 && gather.avx512_only) return false;
    const bool shared = sharing_threads(bytes) > 1;
    // Where masked loads miss slowly (AMD: Zen 4 and 5), the AVX-512-only gather (its taps'
    // masked loads) lost to the scatter on one thread and out of cache, and won only where one
    // image's scatter kept to one thread (docs/kernels.md, "Rows outside the plane"), or where one
    // image's output reaches half the cache: the scatter zeroes an image, then adds into it,
    // and the cache no longer holds it in between (Zen 4 VM, 32 MiB, 1x64xSxS, one thread,
    // gather / scatter: S = 160 (6.6 MB) 0.99-1.13, 224 (12.8 MB) 0.91-1.15, 256 0.74-0.87,
    // 320 0.84-0.87; two threads 320 0.47; docs/kernels.md, "Large images").
    // Shared by threads, it also splits an image whose scatter keeps to one thread: it pays
    // from images of 128 KiB with two vectors of channels and 24 rows (Zen 4 VM, f32 i64, two
    // threads, time against the scatter's: 1x64x24x24 0.86, 1x64x32x32 0.65, 1x64x48x48 0.67,
    // 1x32x32x32 0.76, 1x128x28x28 0.61; below: 1x48x24x24 1.0, 1x32x24x24 1.4, 1x16x48x48
    // 1.35, 1x64x16x16 1.2, 1x256x14x14 and 1x512x14x14 1.11; docs/kernels.md, "Large images").
    constexpr int64_t kSharedImageBytes = 128 << 10, kSharedMinChannels = 32, kSharedMinRows = 24;
    if (gather.avx512_only && masked_loads_miss_slowly()) {
      const int64_t image = slots.bytes() / std::max<int64_t>(1, slots.shape[0]);
      const bool splits_image = image >= kSharedImageBytes &&
                                slots.shape[1] >= kSharedMinChannels &&
                                slots.shape[2] >= kSharedMinRows;
      return image >= out_of_cache_bytes() / 2 ||
             (shared && (bytes >= kOverlapMinBytes || splits_image) &&
              bytes < out_of_cache_bytes());
    }
    return bytes >= (shared ? kOverlapMinBytes : kMinBytes);
  }
  // The contiguous gradient of unpooling by windows: 2-3.5x slower than the gather by index on
  // the Intel Xeon VM at 45-400 MB (docs/kernels.md); faster on the AMD EPYC ones past their L3,
  // on rows of fewer than 512 slots (Zen 5, one thread, ms, windows / by index: rows of 448
  // 11.2 / 11.5, of 640 12.3 / 9.97, of 1024 35.8 / 21.6; Zen 4 with every line prefetched:
  // 640 20.3-21.9 / 22.8-25.3, 768 16.0-16.8 / 15.4-16.2, 1024 even).
  constexpr int64_t kMaxWindowRow = 512;
  const int64_t row = slots.row();
  if (!gather.cell_vectors) return bytes >= out_of_cache_bytes() && row < kMaxWindowRow;
  const bool adds_2d = gather.op == Op::pool_backward_gather && gather.nd == 2;
  return bytes >= (adds_2d ? kAddingMinBytes : kMinBytes) && row >= kMinRow;
}

}  // namespace poolgen::detail
