#include "kernels.hpp"
#include "tensors.hpp"
#include "workers.hpp"

#include <HalideRuntime.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

extern "C" {
#define POOLGEN_KERNEL POOLGEN_KERNEL_DECLARATION
#include "kernel_table.inc"
#undef POOLGEN_KERNEL
}

namespace poolgen::detail {

const KernelTable& forward_kernels() {
  static const KernelTable table({
#define POOLGEN_KERNEL POOLGEN_KERNEL_ENTRY
#include "kernel_table.inc"
#undef POOLGEN_KERNEL
  });
  return table;
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
                                       "unpool_window_gather"};
  return kNames[static_cast<int>(op)];
}

WindowArgs::WindowArgs(const Window& window, const Kernel& kernel, KernelArgs* args) {
  int64_t strides[3], dilations[3];  // innermost first
  for (int i = 0; i < window.nd; ++i) {
    const int d = window.nd - 1 - i;
    params[i][0] = static_cast<int32_t>(window.kernel[d]);
    params[i][1] = static_cast<int32_t>(window.stride[d]);
    params[i][2] = static_cast<int32_t>(window.padding[d]);
    params[i][3] = static_cast<int32_t>(window.dilation[d]);
    for (int32_t& p : params[i]) args->push_back(&p);
    strides[i] = window.stride[d];
    dilations[i] = window.dilation[d];
  }
  if (kernel.device == Device::cuda) {
    stride_magic.append(strides, window.nd, args);
    dilation_magic.append(dilations, window.nd, args);
  }
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
  static const bool meets = [] {
    constexpr int kWords = (halide_target_feature_end + 63) / 64;
    uint64_t wanted[kWords] = {};
    bool any = false;
    for (int feature : {POOLGEN_CPU_FLOOR_FEATURES halide_target_feature_end}) {
      if (feature == halide_target_feature_end) break;
      wanted[feature >> 6] |= uint64_t{1} << (feature & 63);
      any = true;
    }
    return !any || halide_can_use_target_features(kWords, wanted) != 0;
  }();
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

// Kernels are built with the user_context feature: the context is the call's KernelContext.
// Parallel tasks of one kernel may fail at once; the first message is kept.
struct KernelContext {
  std::mutex mutex;
  std::string message;
  // Decided once, before the kernel runs and not per loop (the first thread_count asks Halide for
  // its default): false keeps the kernel's parallel loops on the calling thread.
  bool share = true;
  int64_t bytes = 0;  // what the call moves, inputs and outputs: sets the iterations per task
};

void capture_error(void* user_context, const char* message) {
  if (!user_context) return;
  auto* context = static_cast<KernelContext*>(user_context);
  std::lock_guard<std::mutex> lock(context->mutex);
  if (context->message.empty()) context->message = message;
}

// Halide's parallel loops, kept on the calling thread for work too small to share: waking a
// worker costs more than such work (docs/kernels.md, "Threads").
int run_tasks_inline(void* user_context, halide_task_t task, int min, int size, uint8_t* closure) {
  for (int i = min; i < min + size; ++i) {
    if (const int result = task(user_context, i, closure)) return result;
  }
  return 0;
}

// Consecutive iterations of a loop of `size` over a call moving `bytes` that one task runs: at
// least a quarter of min_parallel_bytes (counted as spread evenly over the iterations), so that
// small planes are not a task each (two threads alternating over 64 planes of 28x28 measured
// 1.5x slower than one; docs/kernels.md, "Threads").
int iterations_per_task(int64_t bytes, int size) {
  const int64_t task_bytes = min_parallel_bytes() / 4, per_iteration = bytes / size;
  if (per_iteration <= 0 || per_iteration >= task_bytes) return 1;
  return static_cast<int>(std::min<int64_t>(size, (task_bytes - 1) / per_iteration + 1));
}

int do_par_for(void* user_context, halide_task_t task, int min, int size, uint8_t* closure) {
  const auto* context = static_cast<const KernelContext*>(user_context);
  if (size <= 1 || !context || !context->share) {
    return run_tasks_inline(user_context, task, min, size, closure);
  }
  const int per_task = iterations_per_task(context->bytes, size);
  return parallel_for(
      (size - 1) / per_task + 1,
      [&](int t) {
        const int first = t * per_task;
        return run_tasks_inline(user_context, task, min + first,
                                std::min(per_task, size - first), closure);
      },
      context->bytes);
}

// The thread count, 0 until first read from Halide.
std::atomic<int> known_threads{0};
std::atomic<int64_t> min_parallel{kDefaultMinParallelBytes};
std::atomic<int64_t> streaming{-1};  // -1: default_streaming_bytes()
std::atomic<int64_t> settings_changed{0};

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

Status choose_kernel(const KernelTable& table, const KernelQuery& query, const char* argument,
                     const Kernel** kernel) {
  *kernel = find_kernel(table, query);
  if (*kernel) return {};
  if (!cpu_meets_floor()) {  // find_kernel found none for that reason
    return fail(Code::unsupported, "CPU: expected the instruction sets of this build's least ",
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
  return fail(Code::unsupported, argument, ": expected a combination this build compiled ",
              "(value types {", join(values), "}, index types {", join(indices),
              "}: CMake options POOLGEN_VALUE_TYPES, POOLGEN_INDEX_TYPES), got dtype ",
              dtype_name(query.value), " with ", dtype_name(query.index), " indices (",
              layout_name(query.layout), " layout), for which this build has no", device, " ",
              op_title(query.op), " kernel");
}

const char* op_title(Op op) {
  switch (op) {
    case Op::pool: return "max_pool";
    case Op::pool_backward_scatter:
    case Op::pool_backward_gather:
    case Op::pool_backward_window_gather: return "max_pool_backward";
    case Op::unpool_backward:
    case Op::unpool_backward_reporting: return "max_unpool_backward";
    default: return "max_unpool";
  }
}

Status kernel_failed(const Kernel& kernel, const std::string& error) {
  return fail(Code::internal, "internal: expected kernel ", kernel.name, " to succeed, got: ",
              error);
}

void note_thread_count() { known_threads = halide_get_num_threads(); }

int thread_count() {
  // Read from Halide once, not per call: its default (HL_NUM_THREADS, else the host's cores)
  // costs system calls. Halide fills it in when its pool starts; asking for the default with 0
  // fills it in now, as the pool would.
  int threads = known_threads;
  if (threads == 0) {
    if (halide_get_num_threads() == 0) halide_set_num_threads(0);
    note_thread_count();
    threads = known_threads;
  }
  return std::max(1, threads);
}

int64_t min_parallel_bytes() { return min_parallel; }

int64_t streaming_bytes() {
  const int64_t bytes = streaming;
  return bytes >= 0 ? bytes : default_streaming_bytes();
}

int64_t settings_changes() { return settings_changed.load(std::memory_order_relaxed); }

void note_settings_change() { settings_changed.fetch_add(1, std::memory_order_relaxed); }

int64_t by_index_bytes(const View& values, DType index, int64_t plane, int64_t slot_plane) {
  const int64_t elements = values.elements();
  const int64_t slots = plane > 0 ? elements / plane * slot_plane : 0;
  return elements * element_size(index) + (elements + slots) * element_size(values.dtype);
}

bool gather_pays(const Kernel& gather, int64_t bytes) {
  return gather.layout == Layout::channels_last || bytes >= streaming_bytes();
}

int sharing_threads(int64_t bytes) {
  const int64_t least = min_parallel_bytes();
  if (in_child_of_workers() || bytes < least) return 1;
  const int64_t per_thread = std::max<int64_t>(1, least / 2);
  return static_cast<int>(std::min<int64_t>(thread_count(), bytes / per_thread));
}

bool worth_sharing(int64_t bytes) { return sharing_threads(bytes) > 1; }

int with_error_capture(const std::function<int(void* user_context)>& f, std::string* error,
                       int64_t call_bytes) {
  static const bool installed = [] {  // once, thread-safe; later calls test a flag
    halide_set_error_handler(capture_error);
    halide_set_custom_do_par_for(do_par_for);
    return true;
  }();
  (void)installed;
  KernelContext context;
  context.share = worth_sharing(call_bytes);
  context.bytes = call_bytes;
  const int result = f(&context);
  *error = std::move(context.message);
  return result;
}

int run_kernel(const Kernel& kernel, KernelArgs& args, std::string* error,
               int64_t call_bytes) {
  return with_error_capture(
      [&](void* user_context) {
        args[0] = &user_context;
        return kernel.entry(args.data());
      },
      error, call_bytes);
}

int parallel_for(int count, const std::function<int(int)>& body, int64_t call_bytes) {
  const int threads = sharing_threads(call_bytes);
  if (count <= 1 || threads <= 1) return run_in_order(count, body);
  // Waking a sleeping worker repays itself from about 2 MiB (docs/kernels.md, "Threads").
  constexpr int64_t kWakeBytes = 2 << 20;
  return run_on_workers(count, threads, thread_count(), call_bytes >= kWakeBytes, body);
}

}  // namespace poolgen::detail

namespace poolgen {

void set_min_parallel_bytes(int64_t bytes) {
  detail::min_parallel = bytes < 0 ? detail::kDefaultMinParallelBytes : bytes;
  detail::note_settings_change();
}

void set_streaming_bytes(int64_t bytes) {
  detail::streaming = bytes < 0 ? -1 : bytes;
  detail::note_settings_change();
}

}  // namespace poolgen
