#include "kernels.hpp"
#include "tensors.hpp"

#include <HalideRuntime.h>
#ifndef _WIN32
#include <pthread.h>  // pthread_atfork
#endif

#include <algorithm>
#include <atomic>
#include <mutex>

// ThreadSanitizer does not see the synchronisation inside Halide's thread pool (Halide compiles
// it, uninstrumented): parallel_for tells it what the pool orders.
#if defined(__SANITIZE_THREAD__)
#define POOLGEN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define POOLGEN_TSAN 1
#endif
#endif
#ifdef POOLGEN_TSAN
extern "C" void __tsan_acquire(void* address);
extern "C" void __tsan_release(void* address);
#endif
#include <map>
#include <memory>
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

// A process forked after Halide's pool started has none of its threads (fork copies the calling
// thread only), while the pool's state says they run: using it there would wait for them
// forever, and resizing it would join them. Such a child runs every loop on the calling thread,
// as PyTorch's own pools do after a fork.
std::atomic<bool> pool_started{false}, forked_from_pool{false};

void note_pool_start() {
#ifndef _WIN32
  static std::once_flag registered;
  std::call_once(registered, [] {
    pthread_atfork(nullptr, nullptr, [] { forked_from_pool = pool_started.load(); });
  });
#endif
  pool_started = true;
}

int do_par_for(void* user_context, halide_task_t task, int min, int size, uint8_t* closure) {
  const auto* context = static_cast<const KernelContext*>(user_context);
  if (size <= 1 || (context && !context->share) || forked_from_pool) {
    return run_tasks_inline(user_context, task, min, size, closure);
  }
  note_pool_start();
  // No context: parallel_for's own loop over its ranges (a kernel's loop comes through it).
  if (!context) return halide_default_do_par_for(user_context, task, min, size, closure);
  const int per_task = iterations_per_task(context->bytes, size);
  return parallel_for((size - 1) / per_task + 1, [&](int t) {
    const int first = t * per_task;
    return run_tasks_inline(user_context, task, min + first, std::min(per_task, size - first),
                            closure);
  });
}

// Halide's pool's thread count, 0 until first read.
std::atomic<int> known_threads{0};
std::atomic<int64_t> min_parallel{kDefaultMinParallelBytes};
std::atomic<int64_t> streaming{-1};  // -1: default_streaming_bytes()

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

bool worth_sharing(int64_t bytes) {
  return !forked_from_pool && thread_count() > 1 && bytes >= min_parallel_bytes();
}

bool in_child_of_pool() { return forked_from_pool; }

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

namespace {

void release(void* address) {
#ifdef POOLGEN_TSAN
  __tsan_release(address);
#endif
  (void)address;
}

void acquire(void* address) {
#ifdef POOLGEN_TSAN
  __tsan_acquire(address);
#endif
  (void)address;
}

// A loop's tasks as one contiguous range per thread: each thread runs its own range from the
// front, then takes what is left of the others' from their backs, one task at a time
// (pthreadpool's scheme). `left` counts a range's untaken tasks; a task is taken by whoever
// decrements it from above zero, the owner at `next`, a thief at `end`.
class Ranges {
 public:
  Ranges(int count, int ranges, const std::function<int(int)>& body)
      : body_(body), size_(ranges), ranges_(new Range[ranges]) {
    for (int r = 0; r < ranges; ++r) {
      const int first = static_cast<int>(int64_t{count} * r / ranges);
      const int last = static_cast<int>(int64_t{count} * (r + 1) / ranges);
      ranges_[r].next = first;
      ranges_[r].end = last;
      ranges_[r].left = last - first;
    }
  }
  int size() const { return size_; }
  // The owner of range `own`: its range, then the others'.
  int run(int own) {
    for (int k = 0; k < size() && failure_ == 0; ++k) {
      Range& range = ranges_[(own + k) % size()];
      while (failure_ == 0 && range.left.fetch_sub(1, std::memory_order_relaxed) > 0) {
        const int task =
            k == 0 ? range.next++ : range.end.fetch_sub(1, std::memory_order_relaxed) - 1;
        if (const int result = body_(task)) {
          int none = 0;
          failure_.compare_exchange_strong(none, result);
          return result;
        }
      }
    }
    return 0;
  }

 private:
  struct alignas(64) Range {  // a line each: owners and thieves write them
    std::atomic<int> left{0};
    int next = 0;  // the owner's alone
    std::atomic<int> end{0};
  };
  const std::function<int(int)>& body_;
  const int size_;
  std::unique_ptr<Range[]> ranges_;
  std::atomic<int> failure_{0};
};

int run_task(void*, int task, uint8_t* closure) {
  acquire(closure);  // the caller's writes before parallel_for
  const int result = reinterpret_cast<Ranges*>(closure)->run(task);
  release(closure);  // this task's writes, for the caller after parallel_for
  return result;
}

}  // namespace

int parallel_for(int count, const std::function<int(int)>& body, bool share) {
  if (count <= 1 || !share || forked_from_pool) {
    for (int task = 0; task < count; ++task) {
      if (const int result = body(task)) return result;
    }
    return 0;
  }
  Ranges ranges(count, std::min(count, thread_count()), body);
  auto* closure = reinterpret_cast<uint8_t*>(&ranges);
  release(closure);
  const int result = halide_do_par_for(nullptr, run_task, 0, ranges.size(), closure);
  acquire(closure);
  return result;
}

}  // namespace poolgen::detail

namespace poolgen {

void set_min_parallel_bytes(int64_t bytes) {
  detail::min_parallel = bytes < 0 ? detail::kDefaultMinParallelBytes : bytes;
}

void set_streaming_bytes(int64_t bytes) {
  detail::streaming = bytes < 0 ? -1 : bytes;
}

}  // namespace poolgen
