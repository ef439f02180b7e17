#include "kernels.hpp"

#include <HalideRuntime.h>

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
#include <set>
#include <utility>

extern "C" {
#define POOLGEN_KERNEL(op, nd, k, s, p, layout, value, index, device, capability, name) \
  int name##_argv(void** args);
#include "kernel_table.inc"
#undef POOLGEN_KERNEL
}

namespace poolgen::detail {

const std::vector<Kernel>& kernel_table() {
  static const std::vector<Kernel> table = {
#define POOLGEN_KERNEL(op, nd, k, s, p, layout, value, index, device, capability, name) \
  {Op::op, nd, k, s, p, Layout::layout, DType::value, DType::index, Device::device, capability, \
   name##_argv, #name},
#include "kernel_table.inc"
#undef POOLGEN_KERNEL
  };
  return table;
}

const char* layout_name(Layout layout) {
  return layout == Layout::channels_last ? "channels_last" : "contiguous";
}

namespace {

bool window_matches(const Kernel& k, const Window* w) {
  if (k.kernel == 0) return true;
  if (w == nullptr) return false;
  for (int i = 0; i < w->nd; ++i) {
    if (w->kernel[i] != k.kernel || w->stride[i] != k.stride || w->padding[i] != k.padding ||
        w->dilation[i] != 1) {
      return false;
    }
  }
  return true;
}

// Pooling compares values, so its kernels are per dtype; unpooling only moves them.
bool serves(const Kernel& k, const KernelQuery& q) {
  const bool value_ok =
      q.op == Op::pool ? k.value == q.value : dtype_size(k.value) == dtype_size(q.value);
  return k.op == q.op && (k.nd == 0 || k.nd == q.nd) && k.layout == q.layout && value_ok &&
         k.index == q.index && k.device == q.device && k.capability <= q.capability;
}

// Kernels are built with the user_context feature: the context is the call's ErrorSink. Parallel
// tasks of one kernel may fail at once; the first message is kept.
struct ErrorSink {
  std::mutex mutex;
  std::string message;
};

void capture_error(void* user_context, const char* message) {
  if (!user_context) return;
  auto* sink = static_cast<ErrorSink*>(user_context);
  std::lock_guard<std::mutex> lock(sink->mutex);
  if (sink->message.empty()) sink->message = message;
}

}  // namespace

const Kernel* find_kernel(const KernelQuery& query) {
  // A fixed window beats the general kernel; then the larger capability (CUDA).
  auto rank = [](const Kernel& k) { return std::make_pair(k.kernel != 0, k.capability); };
  const Kernel* best = nullptr;
  for (const Kernel& k : kernel_table()) {
    if (serves(k, query) && window_matches(k, query.window) && (!best || rank(k) > rank(*best))) {
      best = &k;
    }
  }
  return best;
}

Status choose_kernel(const KernelQuery& query, const char* argument, const Kernel** kernel) {
  *kernel = find_kernel(query);
  if (*kernel) return {};
  std::set<std::string> values, indices;
  for (const Kernel& k : kernel_table()) {
    if (k.op == Op::pool) values.insert(dtype_name(k.value));
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
              layout_name(query.layout), " layout), for which this build has no", device,
              query.op == Op::pool ? " max_pool" : " max_unpool", " kernel");
}

Status kernel_failed(const Kernel& kernel, const std::string& error) {
  return fail(Code::internal, "internal: expected kernel ", kernel.name, " to succeed, got: ",
              error);
}

int with_error_capture(const std::function<int(void* user_context)>& f, std::string* error) {
  static std::once_flag installed;
  std::call_once(installed, [] { halide_set_error_handler(capture_error); });
  ErrorSink sink;
  const int result = f(&sink);
  *error = std::move(sink.message);
  return result;
}

int run_kernel(const Kernel& kernel, std::vector<void*>& args, std::string* error) {
  return with_error_capture(
      [&](void* user_context) {
        args[0] = &user_context;
        return kernel.entry(args.data());
      },
      error);
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

int run_task(void*, int task, uint8_t* closure) {
  acquire(closure);  // the caller's writes before parallel_for
  const int result = (*reinterpret_cast<const std::function<int(int)>*>(closure))(task);
  release(closure);  // this task's writes, for the caller after parallel_for
  return result;
}

}  // namespace

int parallel_for(int count, const std::function<int(int)>& body) {
  auto* closure = reinterpret_cast<uint8_t*>(const_cast<std::function<int(int)>*>(&body));
  release(closure);
  const int result = halide_do_par_for(nullptr, run_task, 0, count, closure);
  acquire(closure);
  return result;
}

}  // namespace poolgen::detail
