#include "kernels.hpp"

#include <HalideRuntime.h>

#include <mutex>

extern "C" {
#define POOLGEN_KERNEL(op, nd, k, s, p, name) int name##_argv(void** args);
#include "kernel_table.inc"
#undef POOLGEN_KERNEL
}

namespace poolgen::detail {

const std::vector<Kernel>& kernel_table() {
  static const std::vector<Kernel> table = {
#define POOLGEN_KERNEL(op, nd, k, s, p, name) {Op::op, nd, k, s, p, name##_argv, #name},
#include "kernel_table.inc"
#undef POOLGEN_KERNEL
  };
  return table;
}

namespace {

bool window_matches(const Kernel& k, const Window& w) {
  if (k.kernel == 0) return true;
  for (int i = 0; i < w.nd; ++i) {
    if (w.kernel[i] != k.kernel || w.stride[i] != k.stride || w.padding[i] != k.padding ||
        w.dilation[i] != 1) {
      return false;
    }
  }
  return true;
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

const Kernel* find_kernel(Op op, int nd, const Window& window, Path path) {
  const Kernel* general = nullptr;
  for (const Kernel& k : kernel_table()) {
    if (k.op != op || (k.nd != 0 && k.nd != nd)) continue;
    if (k.kernel == 0) {
      general = &k;
    } else if (path == Path::automatic && window_matches(k, window)) {
      return &k;
    }
  }
  return general;
}

int run_kernel(const Kernel& kernel, std::vector<void*>& args, std::string* error) {
  static std::once_flag installed;
  std::call_once(installed, [] { halide_set_error_handler(capture_error); });
  ErrorSink sink;
  void* user_context = &sink;
  args[0] = &user_context;
  const int result = kernel.entry(args.data());
  *error = std::move(sink.message);
  return result;
}

}  // namespace poolgen::detail
