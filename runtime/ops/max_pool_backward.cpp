// max_pool_backward: validate, then unpool the gradients into the input's planes, adding: a
// window gather where one is built for the call and every index lies in its own window, else
// the accumulating scatter. On the CPU the gathers are the fixed windows'; on CUDA (and on the
// CPU with Path::winner, where the twin is built) it is any window's, with a thread per input
// position, and the scatter behind it has a thread per plane.
#include <algorithm>
#include <memory>

#include "conventions/index_formats.hpp"
#include "dispatch/cuda.hpp"
#include "dispatch/kernel_table.hpp"
#include "dispatch/launch.hpp"
#include "execute/gather.hpp"
#include "execute/gpu_algorithms.hpp"
#include "execute/scatter.hpp"
#include "execute/staging.hpp"
#include "ops/op.hpp"
#include "validate/views.hpp"
#include "validate/window.hpp"

namespace poolgen {

using namespace detail;

namespace {

struct PoolBackwardPlan : OpPlan {  // views: grad_output, indices, grad_input
  Window window;
  Ints output_shape;  // grad_output's and the indices'
  int64_t bytes = 0;  // grad_output's, the indices' and grad_input's
  const Kernel* gather = nullptr;  // the fast path, when one is built for and pays on this call
  const Kernel* window_gather = nullptr;  // CUDA's, or its CPU twin with Path::winner
  const Kernel* scatter = nullptr;
};

// Everything about a call but the data and the kernels: the window, the shapes, the gradient
// dtype, the index dtype for the input's planes, grad_output's strides.
[[gnu::cold]]
Status prepare(int nd, const TensorView& grad_output, DType index_dtype, const Ints& input_shape,
               const PoolOptions& options, PoolBackwardPlan* plan) {
  POOLGEN_RETURN_IF_ERROR(pool_window(nd, options, &plan->window));
  POOLGEN_RETURN_IF_ERROR(check_input_shape("max_pool_backward", nd, "grad_input", input_shape));
  POOLGEN_RETURN_IF_ERROR(
      pool_output_shape(&plan->window, input_shape, &plan->output_shape, "grad_input"));
  POOLGEN_RETURN_IF_ERROR(check_gradient_dtype("grad_output", grad_output.dtype));
  const int64_t input_plane = spatial_elements(nd, input_shape);
  POOLGEN_RETURN_IF_ERROR(check_leading_view("grad_output", grad_output, plan->output_shape, nd,
                                             index_dtype, input_plane, &plan->views[0]));
  plan->bytes = by_index_bytes(plan->views[0], index_dtype,
                               spatial_elements(nd, plan->output_shape), input_plane);
  return {};
}

// The kernels for grad_output's device, layout and dtype (after the arguments are known valid):
// the gather where it takes the call's views.
[[gnu::cold]]
Status choose(const TensorView& grad_output, DType index_dtype, const PoolOptions& options,
              PoolBackwardPlan* plan) {
  const int nd = plan->window.nd;
  const Layout layout = layout_of(plan->views[0]);
  plan->device = call_device(options.device, grad_output);
  int capability = 0;
  if (plan->device == Device::cuda) POOLGEN_RETURN_IF_ERROR(cuda_capability(&capability));
  // ONNX Runtime's negative SAME padding: the gathers walk windows from their padding, which
  // they take as at least 0; the scatter goes by the indices alone.
  const Window& w = plan->window;
  const bool by_index_only = std::any_of(w.padding, w.padding + nd, [](int64_t p) { return p < 0; });
  if (plan->device == Device::cpu && options.path == Path::automatic && !by_index_only) {
    plan->gather = find_kernel(backward_kernels(), {Op::pool_backward_gather, nd, layout,
                                                    grad_output.dtype, index_dtype,
                                                    &plan->window, Device::cpu, 0});
    bool takes = plan->gather &&
                 gather_pays(*plan->gather, plan->bytes, plan->views[0], plan->views[2]);
    if (takes) {  // on the indices it will read: other formats' go through a packed copy
      const View& g = plan->views[0];
      const View i = options.index_format == IndexFormat::plane
                         ? plan->views[1]
                         : packed_like(g, index_dtype, plan->output_shape, nd, layout);
      POOLGEN_RETURN_IF_ERROR(gather_takes(*plan->gather, {g, i, plan->views[2]}, &takes));
    }
    if (!takes) plan->gather = nullptr;
  }
  if ((plan->device == Device::cuda || options.path == Path::winner) && !by_index_only) {
    plan->window_gather = find_kernel(backward_kernels(),
                                      {Op::pool_backward_window_gather, nd, layout,
                                       grad_output.dtype, index_dtype, &plan->window,
                                       plan->device, capability});
  }
  return choose_kernel(backward_kernels(),
                       {Op::pool_backward_scatter, nd, layout, grad_output.dtype, index_dtype,
                        nullptr, plan->device, capability},
                       "grad_output", &plan->scatter);
}

struct MaxPoolBackward {
  using Options = PoolOptions;
  using Plan = PoolBackwardPlan;
  static constexpr const char* kNames[3] = {"grad_output", "indices", "grad_input"};
  static constexpr int kOutputs = 1;

  [[gnu::cold]] static Status describe(int nd, const TensorView& grad_output, DType index_dtype,
                         const Ints& input_shape, const PoolOptions& options,
                         PoolBackwardPlan* plan) {
    POOLGEN_RETURN_IF_ERROR(prepare(nd, grad_output, index_dtype, input_shape, options, plan));
    const View& g = plan->views[0];
    const Layout layout = layout_of(g);
    plan->views[1] = packed_like(g, index_dtype, plan->output_shape, nd, layout);
    plan->views[2] = packed_like(g, grad_output.dtype, input_shape, nd, layout);
    return choose(grad_output, index_dtype, options, plan);
  }
  static const Kernel& first_kernel(const PoolBackwardPlan& plan) {
    const Kernel* first = plan.window_gather ? plan.window_gather : plan.gather;
    return *(first ? first : plan.scatter);
  }

  [[gnu::cold]] static Status check(int nd, Tensors tensors, const PoolOptions& options,
                      PoolBackwardPlan* plan) {
    const TensorView &grad_output = *tensors[0], &indices = *tensors[1],
                     &grad_input = *tensors[2];
    POOLGEN_RETURN_IF_ERROR(
        prepare(nd, grad_output, indices.dtype, grad_input.shape, options, plan));
    const View& g = plan->views[0];
    View &i = plan->views[1], &o = plan->views[2];
    POOLGEN_RETURN_IF_ERROR(
        check_views(nd, grad_output, {"grad_output", &g},
                    {"indices", indices, indices.dtype, plan->output_shape},
                    {"grad_input", grad_input, grad_output.dtype, grad_input.shape}, &i, &o));
    POOLGEN_RETURN_IF_ERROR(choose(grad_output, indices.dtype, options, plan));
    // The gathers and other index formats run before the scatter, or instead of it.
    if (plan->device == Device::cpu && !plan->gather && !plan->window_gather &&
        options.index_format == IndexFormat::plane) {
      plan->direct = DirectScatter::make(*plan->scatter, ScatterMode::accumulate, {g, i, o},
                                         slab_stride(plan->window));
    }
    return {};
  }

  static Status run(int nd, Tensors tensors, const PoolOptions& options,
                    const PoolBackwardPlan& plan, const View (&views)[3]) {
    const View &g = views[0], &i = views[1], &o = views[2];
    if (o.elements() == 0) return {};
    if (options.index_format == IndexFormat::plane) return run_planes(options, plan, g, i, o);
    if (plan.device != Device::cpu) {
      return fail(Code::unsupported, "index_format", ": expected plane on CUDA, got ",
                  index_format_name(options.index_format));
    }
    // Indices in another framework's format become plane offsets in a packed copy, in
    // grad_output's layout (a copy in another would send the kernel's views through copies of
    // their own: TensorFlow's NHWC gradient at 8x64x112x112 took 25.7 ms, now 5.7), a block of
    // planes at a time on the kernels' threads, each block's gradient run while its offsets are
    // in cache (8x64x112x112 k2s2, one / two threads: 3.27 / 2.36 ms with one whole rewrite on
    // one thread before the gradient, 2.65 / 1.19 by blocks; by plane offsets 1.74 / 0.71).
    const Ints& input_shape = tensors[2]->shape;
    const bool batchless = input_shape.size() == static_cast<size_t>(nd) + 1;
    return for_index_blocks(i, plan.bytes, [&](const IndexBlock& b) -> Status {
      const View block = b.of(i);
      const std::unique_ptr<char[]> buffer(new char[static_cast<size_t>(block.bytes())]);
      const View offsets = packed(block, layout_of(g), buffer.get());
      POOLGEN_RETURN_IF_ERROR(rewrite_indices(nd, input_shape, &plan.window, block,
                                              options.index_format, offsets, IndexFormat::plane,
                                              batchless, b.n0, b.c0));
      return run_planes(options, plan, b.of(g), offsets, b.of(o));
    });
  }

  // The gradient by plane offsets.
  static Status run_planes(const PoolOptions& options, const PoolBackwardPlan& plan,
                           const View& g, const View& i, const View& o) {
    const Kernel& scatter_kernel = *plan.scatter;
    if (plan.device == Device::cuda) {
      // The window gather, and the scatter behind it gated on the device by its count.
      POOLGEN_RETURN_IF_ERROR(check_device_views(kNames, {g, i, o}, scatter_kernel.layout, true));
      const CudaStreamScope stream(options.cuda_stream);
      return run_gpu_algorithm(plan.window_gather, &plan.window, scatter_kernel, Device::cuda,
                               {g, i, o}, o.plane(), "grad_input");
    }
    if (plan.window_gather) {  // the CPU twin, with Path::winner
      bool done = false;
      POOLGEN_RETURN_IF_ERROR(window_gather(*plan.window_gather, plan.window, g, i, o, &done));
      if (done) return {};
    }
    if (plan.gather) {
      bool served = false;
      POOLGEN_RETURN_IF_ERROR(gather_if_served(*plan.gather, {g, i, o}, plan.bytes, &served));
      if (served) return {};
    }
    return scatter(scatter_kernel, ScatterMode::accumulate, g, i, o, plan.bytes, nullptr, false,
                   slab_stride(plan.window));
  }
};

}  // namespace

Status max_pool_backward(int nd, const TensorView& grad_output, const TensorView& indices,
                         const TensorView& grad_input, const PoolOptions& options) {
  return run_op<MaxPoolBackward>(nd, grad_output, indices, grad_input, options);
}

Status prepare_max_pool_backward(int nd, const TensorView& grad_output, const TensorView& indices,
                                 const TensorView& grad_input, const PoolOptions& options,
                                 PreparedCall* call) {
  return prepare_op<MaxPoolBackward>(nd, grad_output, indices, grad_input, options, call);
}

Status max_pool_backward_kernel_name(int nd, const TensorView& grad_output, DType index_dtype,
                                     const Ints& input_shape, const PoolOptions& options,
                                     std::string* name) {
  return op_kernel_name<MaxPoolBackward>(name, nd, grad_output, index_dtype, input_shape,
                                         options);
}

}  // namespace poolgen
