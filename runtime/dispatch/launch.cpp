#include "dispatch/launch.hpp"

#include "parallel/settings.hpp"

#include <algorithm>
#include <limits>
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

}  // namespace

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

Status kernel_failed(const Kernel& kernel, const std::string& error) {
  return fail(Code::internal, "internal: expected kernel ", kernel.name, " to succeed, got: ",
              error);
}

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

// The dimensions of `v` as a kernel of `layout` sees them, innermost first: (extent, stride).
int halide_dims(const View& v, Layout layout, bool flat, int64_t (*dims)[2]) {
  int count = 0;
  auto add = [&](int64_t extent, int64_t stride) {
    // An extent of 1 is never stepped along: a stride whose span Halide would refuse (over
    // 2 GiB at 8 bytes an element) is irrelevant.
    constexpr int64_t kLargest = std::numeric_limits<int32_t>::max() / 8;
    dims[count][0] = extent;
    dims[count++][1] = extent == 1 && stride > kLargest ? 0 : stride;
  };
  if (layout == Layout::channels_last) add(v.shape[1], v.strides[1]);
  if (flat) {
    add(v.plane(), v.plane_step(layout));
  } else {
    for (int i = v.rank - 1; i >= 2; --i) add(v.shape[i], v.strides[i]);
  }
  if (layout == Layout::contiguous) add(v.shape[1], v.strides[1]);
  add(v.shape[0], v.strides[0]);
  return count;
}

}  // namespace

bool fits_kernel(const View& v, Layout layout, bool flat) {
  // Nearly every call's views are far below the limits: with fewer than 2^30 bytes of elements
  // and of offsets, every extent is below 2^30 and every stride, and each dimension's span
  // (at most the last element's offset plus one stride), below 2^31 bytes. Extents of 1, whose
  // strides are free, reach Halide at most 2^31 / 8 (halide_dims).
  constexpr int64_t kSmall = int64_t{1} << 30;
  int64_t count = 1, last = 0;
  for (int i = 0; i < v.rank; ++i) {
    count *= v.shape[i];
    last += (v.shape[i] - 1) * v.strides[i];
  }
  const int64_t bytes = element_size(v.dtype);
  if (count > 0 && count * bytes < kSmall && (last + 1) * bytes < kSmall) return true;
  // Without Halide's large_buffers feature a buffer's extents, strides, the span of each
  // dimension and its element count must stay below 2^31 (bytes, for the last two); extents
  // stay below 2^30 so that coordinates plus a window's reach do too.
  // Extents and strides are tested against 2^30 and 2^31 before they multiply, so no product
  // overflows 64 bits: elements stays below 2^31 * 2^30, a span below 2^30 * 8 * 2^31.
  constexpr uint64_t kLimit = std::numeric_limits<int32_t>::max();
  const auto size = static_cast<uint64_t>(bytes);
  int64_t dims[5][2];
  uint64_t elements = size;
  const int dimensions = halide_dims(v, layout, flat, dims);
  for (int d = 0; d < dimensions; ++d) {
    const auto extent = static_cast<uint64_t>(dims[d][0]);
    const auto stride = static_cast<uint64_t>(dims[d][1]);
    if (extent > kMaxKernelExtent || stride > kLimit) return false;
    elements *= extent;
    if (elements > kLimit || extent * size * stride > kLimit) return false;
  }
  return true;
}

bool fits_kernel(const Views& views, Layout layout, bool flat) {
  for (const View& v : views) {
    if (!fits_kernel(v, layout, flat)) return false;
  }
  return true;
}

HalideView::HalideView(const View& v, Layout layout, DType type, bool flat) {
  static const halide_type_t kTypes[] = {
      {halide_type_float, 32}, {halide_type_int, 64},  {halide_type_float, 64},
      {halide_type_float, 16}, {halide_type_bfloat, 16}, {halide_type_int, 8},
      {halide_type_uint, 8},   {halide_type_int, 16},  {halide_type_int, 32}};
  buffer.host = static_cast<uint8_t*>(v.data);
  buffer.type = kTypes[static_cast<int>(type)];
  buffer.dim = dims;
  int64_t extents[5][2];
  buffer.dimensions = halide_dims(v, layout, flat, extents);
  for (int d = 0; d < buffer.dimensions; ++d) {
    dims[d] = {0, static_cast<int32_t>(extents[d][0]), static_cast<int32_t>(extents[d][1]), 0};
  }
}


}  // namespace poolgen::detail
