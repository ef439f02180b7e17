// max_pool_backward: validate, then unpool the gradients into the input's planes, adding: a
// window gather where one is built for the call and every index lies in its own window, else
// the accumulating scatter. On the CPU the gathers are the fixed windows'; on CUDA (and on the
// CPU with Path::winner, where the twin is built) it is any window's, with a thread per input
// position, and the scatter behind it has a thread per plane.
#include "conventions/index_formats.hpp"
#include "dispatch/cuda.hpp"
#include "dispatch/kernel_table.hpp"
#include "dispatch/launch.hpp"
#include "execute/gpu_algorithms.hpp"
#include "execute/scatter.hpp"
#include "execute/staging.hpp"
#include "ops/call_memo.hpp"
#include "validate/views.hpp"
#include "validate/window.hpp"

namespace poolgen {

using namespace detail;

namespace {

struct PoolBackwardCall {
  Window window;
  Ints output_shape;  // grad_output's and the indices'
  View grad_output;
  Device device = Device::cpu;
  int64_t bytes = 0;  // grad_output's, the indices' and grad_input's
  const Kernel* gather = nullptr;  // the fast path, when one is built for and pays on this call
  const Kernel* window_gather = nullptr;  // CUDA's, or its CPU twin with Path::winner
  const Kernel* scatter = nullptr;
};

// Everything about a call but the data and the kernels: the window, the shapes, the gradient
// dtype, the index dtype for the input's planes, grad_output's strides.
Status prepare(int nd, const TensorView& grad_output, DType index_dtype, const Ints& input_shape,
               const PoolOptions& options, PoolBackwardCall* call) {
  POOLGEN_RETURN_IF_ERROR(pool_window(nd, options, &call->window));
  POOLGEN_RETURN_IF_ERROR(check_input_shape("max_pool_backward", nd, "grad_input", input_shape));
  POOLGEN_RETURN_IF_ERROR(
      pool_output_shape(&call->window, input_shape, &call->output_shape, "grad_input"));
  POOLGEN_RETURN_IF_ERROR(check_gradient_dtype("grad_output", grad_output.dtype));
  const int64_t input_plane = spatial_elements(nd, input_shape);
  POOLGEN_RETURN_IF_ERROR(check_leading_view("grad_output", grad_output, call->output_shape, nd,
                                             index_dtype, input_plane, &call->grad_output));
  call->bytes = by_index_bytes(call->grad_output, index_dtype,
                               spatial_elements(nd, call->output_shape), input_plane);
  return {};
}

// The kernels for grad_output's device, layout and dtype (after the arguments are known valid).
Status choose(const TensorView& grad_output, DType index_dtype, const PoolOptions& options,
              PoolBackwardCall* call) {
  const int nd = call->window.nd;
  const Layout layout = layout_of(call->grad_output);
  call->device = call_device(options.device, grad_output);
  int capability = 0;
  if (call->device == Device::cuda) POOLGEN_RETURN_IF_ERROR(cuda_capability(&capability));
  if (call->device == Device::cpu && options.path == Path::automatic) {
    call->gather = find_kernel(backward_kernels(), {Op::pool_backward_gather, nd, layout,
                                                    grad_output.dtype, index_dtype,
                                                    &call->window, Device::cpu, 0});
    if (call->gather && !gather_pays(*call->gather, call->bytes)) call->gather = nullptr;
  }
  if (call->device == Device::cuda || options.path == Path::winner) {
    call->window_gather = find_kernel(backward_kernels(),
                                      {Op::pool_backward_window_gather, nd, layout,
                                       grad_output.dtype, index_dtype, &call->window,
                                       call->device, capability});
  }
  return choose_kernel(backward_kernels(),
                       {Op::pool_backward_scatter, nd, layout, grad_output.dtype, index_dtype,
                        nullptr, call->device, capability},
                       "grad_output", &call->scatter);
}

// The window gather over views (grad_output, indices, grad_input) as they are; false when it
// cannot take them or found an index outside its window (the scatter then decides).
bool gather(const Kernel& kernel, const View& grad_output, const View& indices,
            const View& grad_input, int64_t call_bytes) {
  if (!takes_whole({&grad_output, &indices, &grad_input}, kernel.layout)) return false;
  HalideView values_buffer(grad_output, kernel.layout, kernel.value),
      indices_buffer(indices, kernel.layout, kernel.index),
      output_buffer(grad_input, kernel.layout, kernel.value);
  KernelArgs args{nullptr, &values_buffer.buffer, &indices_buffer.buffer,
                  &output_buffer.buffer};
  std::string error;
  return run_kernel(kernel, args, &error, call_bytes) == 0;
}

// What a call's checks leave for its runs: the call, its indices' and grad_input's views
// (grad_output's is call.grad_output), and its direct run where it has one.
struct PoolBackwardPlan {
  PoolBackwardCall call;
  View indices, grad_input;
  std::unique_ptr<DirectScatter> direct;  // where the scatter alone serves the call in one run
};
constexpr const char* kNames[3] = {"grad_output", "indices", "grad_input"};

// Runs a checked call on views of its data.
Status run_checked(int nd, const TensorView& grad_input, const PoolOptions& options,
                   const PoolBackwardCall& call, const View& g, View i, const View& o) {
  if (o.elements() == 0) return {};
  // Indices in another framework's format become plane offsets in a packed copy first, in
  // grad_output's layout (a copy in another would send the kernel's views through copies of
  // their own: TensorFlow's NHWC gradient at 8x64x112x112 took 25.7 ms, now 5.7).
  std::vector<char> plane_offsets;
  if (options.index_format != IndexFormat::plane) {
    if (call.device != Device::cpu) {
      return fail(Code::unsupported, "index_format: expected plane on CUDA, got ",
                  index_format_name(options.index_format));
    }
    plane_offsets.resize(static_cast<size_t>(i.bytes()));
    const View packed_indices = packed(i, layout_of(g), plane_offsets.data());
    POOLGEN_RETURN_IF_ERROR(rewrite_indices(nd, grad_input.shape, &call.window, i,
                                            options.index_format, packed_indices,
                                            IndexFormat::plane,
                                            grad_input.shape.size() == static_cast<size_t>(nd) + 1));
    i = packed_indices;
  }

  const Kernel& scatter_kernel = *call.scatter;
  if (call.device == Device::cuda) {
    // The window gather, and the scatter behind it gated on the device by its count.
    POOLGEN_RETURN_IF_ERROR(check_device_view("grad_output", g, scatter_kernel.layout, true));
    POOLGEN_RETURN_IF_ERROR(check_device_view("indices", i, scatter_kernel.layout, true));
    POOLGEN_RETURN_IF_ERROR(check_device_view("grad_input", o, scatter_kernel.layout, true));
    const CudaStreamScope stream(options.cuda_stream);
    return run_gpu_algorithm(call.window_gather, &call.window, scatter_kernel, Device::cuda,
                             {g, i, o}, o.plane(), "grad_input");
  }
  if (call.window_gather) {  // the CPU twin, with Path::winner
    bool done = false;
    POOLGEN_RETURN_IF_ERROR(
        window_gather(*call.window_gather, call.window, g, i, o, &done));
    if (done) return {};
  }
  if (call.gather && gather(*call.gather, g, i, o, call.bytes)) return {};
  return scatter(scatter_kernel, ScatterMode::accumulate, g, i, o, call.bytes, nullptr, false,
                 slab_stride(call.window));
}

Status pool_backward(int nd, const TensorView& grad_output, const TensorView& indices,
                     const TensorView& grad_input, const PoolOptions& options) {
  thread_local CallMemo<PoolBackwardPlan> memo;
  const CallKey key(nd, {&grad_output, &indices, &grad_input}, options);
  if (const PoolBackwardPlan* plan = memo.find(key)) {  // the last call's checks hold
    View views[3] = {plan->call.grad_output, plan->indices, plan->grad_input};
    DirectScatter* direct = plan->direct.get();
    POOLGEN_RETURN_IF_ERROR(check_views_data(kNames, {&grad_output, &indices, &grad_input}, views,
                                             direct ? &direct->spans : nullptr));
    if (direct) return direct->run(grad_output.data, indices.data, grad_input.data);
    return run_checked(nd, grad_input, options, plan->call, views[0], views[1], views[2]);
  }

  PoolBackwardPlan& plan = memo.start();
  PoolBackwardCall& call = plan.call;
  POOLGEN_RETURN_IF_ERROR(
      prepare(nd, grad_output, indices.dtype, grad_input.shape, options, &call));
  const View& g = call.grad_output;
  View &i = plan.indices, &o = plan.grad_input;
  POOLGEN_RETURN_IF_ERROR(
      check_views(nd, grad_output, {"grad_output", &g},
                  {"indices", indices, indices.dtype, call.output_shape},
                  {"grad_input", grad_input, grad_output.dtype, grad_input.shape}, &i, &o));
  POOLGEN_RETURN_IF_ERROR(choose(grad_output, indices.dtype, options, &call));
  if (call.device == Device::cpu) {
    // The gathers and other index formats run before the scatter, or instead of it.
    if (!call.gather && !call.window_gather && options.index_format == IndexFormat::plane) {
      plan.direct = DirectScatter::make(*call.scatter, ScatterMode::accumulate, {g, i, o},
                                        slab_stride(call.window));
    }
    memo.keep(key);
  }
  return run_checked(nd, grad_input, options, call, g, i, o);
}

}  // namespace

Status max_pool_backward(int nd, const TensorView& grad_output, const TensorView& indices,
                         const TensorView& grad_input, const PoolOptions& options) {
  return without_exceptions(
      [&] { return pool_backward(nd, grad_output, indices, grad_input, options); });
}

Status max_pool_backward_kernel_name(int nd, const TensorView& grad_output, DType index_dtype,
                                     const Ints& input_shape, const PoolOptions& options,
                                     std::string* name) {
  return without_exceptions([&]() -> Status {
    PoolBackwardCall call;
    POOLGEN_RETURN_IF_ERROR(prepare(nd, grad_output, index_dtype, input_shape, options, &call));
    POOLGEN_RETURN_IF_ERROR(choose(grad_output, index_dtype, options, &call));
    const Kernel* first = call.window_gather ? call.window_gather : call.gather;
    *name = (first ? first : call.scatter)->name;
    return Status();
  });
}

}  // namespace poolgen
