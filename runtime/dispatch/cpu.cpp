#include "dispatch/cpu.hpp"

#include "parallel/settings.hpp"

#include <algorithm>
#include <mutex>

namespace poolgen::detail {

namespace {

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
  // The loop in one place and a task body capturing only its address, which std::function
  // keeps without allocating: a worker reads one line of the caller's for it (each line of
  // the caller's that a worker reads is a transfer between cores on every call).
  struct Loop {
    void* user_context;
    halide_task_t task;
    uint8_t* closure;
    int min, size, per_task;
  } loop{user_context, task, closure, min, size, iterations_per_task(context->bytes, size)};
  return parallel_for(
      (size - 1) / loop.per_task + 1,
      [&loop](int t) {
        const int first = t * loop.per_task;
        return run_tasks_inline(loop.user_context, loop.task, loop.min + first,
                                std::min(loop.per_task, loop.size - first), loop.closure);
      },
      context->bytes);
}

// The handlers, installed once (thread-safe; later calls test a flag), and a call's context.
KernelContext& begin_capture(KernelContext& context, int64_t call_bytes) {
  static const bool installed = [] {
    halide_set_error_handler(capture_error);
    halide_set_custom_do_par_for(do_par_for);
    return true;
  }();
  (void)installed;
  context.share = worth_sharing(call_bytes);
  context.bytes = call_bytes;
  return context;
}

}  // namespace

int with_error_capture(const std::function<int(void* user_context)>& f, std::string* error,
                       int64_t call_bytes) {
  KernelContext context;
  const int result = f(&begin_capture(context, call_bytes));
  *error = std::move(context.message);
  return result;
}

// As with_error_capture, without the std::function: this is every CPU call's path.
int run_on_cpu(KernelEntry entry, KernelArgs& args, std::string* error, int64_t call_bytes) {
  KernelContext context;
  void* user_context = &begin_capture(context, call_bytes);
  args[0] = &user_context;
  const int result = entry(args.data());
  if (result != 0 || !context.message.empty()) *error = std::move(context.message);
  return result;
}

}  // namespace poolgen::detail
