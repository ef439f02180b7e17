// max_unpool_backward: validate, then gather every value's gradient from the slot its index
// names (max_unpool_backward kernels, per element width; for a fixed window whose cells hold
// their own window's index, dense reads of each window first); name the first invalid index.
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

struct UnpoolBackwardPlan : OpPlan {  // views: grad_output, indices, grad_values
  Window window;
  Ints output_shape;  // grad_output's
  const Kernel* kernel = nullptr;
  // The fixed window's kernel, where one is built for the call's window (given, or implied by
  // the shapes) and takes its views: it declines cells whose index leaves their window, and
  // `kernel` then serves the call.
  const Kernel* window_kernel = nullptr;
  int64_t bytes = 0;  // the three views' (choose)
};

// Everything about a call but the data and the kernel: the window, the shapes, the gradient
// dtype, the index dtype for the output's planes, grad_output's strides.
[[gnu::cold]]
Status prepare(int nd, const TensorView& grad_output, DType index_dtype, const Ints& values_shape,
               const UnpoolOptions& options, UnpoolBackwardPlan* plan) {
  POOLGEN_RETURN_IF_ERROR(unpool_window(nd, options, &plan->window));
  // ONNX and TensorFlow train no unpooling: their formats and ONNX's frame have no gradient here.
  if (options.index_format != IndexFormat::plane ||
      (options.output_size_rule == OutputSizeRule::onnx && !options.output_size.empty())) {
    return fail(Code::unsupported, "index_format",
                ": expected plane offsets in the output's frame ",
                "for max_unpool_backward, got index_format ",
                index_format_name(options.index_format), " with output_size_rule ",
                static_cast<int>(options.output_size_rule));
  }
  POOLGEN_RETURN_IF_ERROR(
      check_input_shape("max_unpool_backward", nd, "grad_values", values_shape));
  POOLGEN_RETURN_IF_ERROR(unpool_output_shape(plan->window, values_shape, options.output_size,
                                              &plan->output_shape, "grad_output"));
  POOLGEN_RETURN_IF_ERROR(check_gradient_dtype("grad_output", grad_output.dtype));
  return check_leading_view("grad_output", grad_output, plan->output_shape, nd, index_dtype,
                            spatial_elements(nd, plan->output_shape), &plan->views[0]);
}

// The kernel: on CUDA (and on the CPU with Path::winner, a check of the GPU algorithm where the
// build has its CPU twin) one that reports the first invalid index, else one that stops there;
// on the CPU, in front of it, the window's kernel where one is built and takes the views.
[[gnu::cold]]
Status choose(const TensorView& grad_output, DType index_dtype, const Ints& values_shape,
              const UnpoolOptions& options, UnpoolBackwardPlan* plan) {
  plan->device = call_device(options.device, grad_output);
  int capability = 0;
  if (plan->device == Device::cuda) POOLGEN_RETURN_IF_ERROR(cuda_capability(&capability));
  const bool reporting = plan->device == Device::cuda || options.path == Path::winner;
  Window implied;
  const Window* window = &plan->window;
  if (plan->window.by_indices) {
    window = implied_window(plan->window.nd, values_shape, plan->output_shape, &implied) ? &implied
                                                                                        : nullptr;
  }
  const Views views{plan->views[0], plan->views[1], plan->views[2]};
  plan->bytes = total_bytes(views);
  // The window's kernel takes only a grad_output its windows tile (a constraint): it would
  // decline any other call on every run, after Halide formats its message (1x64x7x7 NHWC, whose
  // unpooled planes are 7x7: 0.4 of 1.1 us). The bounds query cannot tell: it fills in the
  // constrained extent, and an input needed in part is no fault (an output is: within_views).
  if (!reporting && options.path == Path::automatic && window &&
      windows_tile(*window, values_shape, plan->output_shape)) {
    const Kernel* k = find_kernel(backward_kernels(),
                                  {Op::unpool_backward, plan->window.nd, layout_of(views[0]),
                                   grad_output.dtype, index_dtype, window, Device::cpu, 0});
    bool takes = k && k->kernel != 0 && gather_pays(*k, plan->bytes, views[2], views[0]);
    if (takes) {
      // A grad_values of the other layout is written to a packed copy of the kernel's (run), as
      // the gather by index stages it: PyTorch's gradient of channels-last indices is contiguous.
      Views taken = views;
      if (!fits(views[2], k->layout)) taken[2] = packed(views[2], k->layout, views[2].data);
      POOLGEN_RETURN_IF_ERROR(gather_takes(*k, taken, &takes));
    }
    if (takes) plan->window_kernel = k;
  }
  return choose_kernel(
      backward_kernels(),
      {reporting ? Op::unpool_backward_reporting : Op::unpool_backward, plan->window.nd,
       layout_of(plan->views[0]), grad_output.dtype, index_dtype, nullptr, plan->device,
       capability},
      "grad_output", &plan->kernel);
}

// The CPU kernel stops at an invalid index; the first one in input order is then named.
Status gather(const Kernel& kernel, const View& grad_output, const View& indices,
              const View& grad_values) {
  const Staged g(grad_output, kernel.layout, true, Staged::input),
      i(indices, kernel.layout, true, Staged::input),
      o(grad_values, kernel.layout, true, Staged::output);
  POOLGEN_RETURN_IF_ERROR(for_each_piece(
      {g.view(), i.view(), o.view()},
      [&](const Views& piece) { return fits_kernel(piece, kernel.layout, true); },
      [&](const Views& piece, int64_t) {
        bool declined = false;  // at an invalid index
        POOLGEN_RETURN_IF_ERROR(run_flat(kernel, piece, &declined));
        return declined ? declined_at_index(kernel, indices, grad_output.plane()) : Status();
      },
      [&](const Views& plane, int64_t first_plane) {
        return gather_large(plane[0], plane[1], plane[2], kernel.layout, first_plane);
      }));
  o.finish();
  return {};
}

// A CPU call the kernel takes flat as its views are: the launch, built once, so that a call
// repeating it sets the three data pointers and runs it, without the copies and pieces gather()
// decides each time.
class DirectGather : public DirectRun {
 public:
  DirectGather(const Kernel& kernel, const Views& views)
      : DirectRun(KeptSpans(views, 1)),
        launch_(kernel, true),
        indices_(views[1]),
        plane_(views[0].plane()),
        call_bytes_(total_bytes(views)) {
    launch_.add_view(views[0], kernel.value, Access::read);
    launch_.add_view(views[1], kernel.index, Access::read);
    launch_.add_view(views[2], kernel.value, Access::write);
  }

  Status run(void* const (&data)[3]) override {
    for (int k = 0; k < 3; ++k) launch_.set_data(k, data[k]);
    bool declined = false;  // at an invalid index
    POOLGEN_RETURN_IF_ERROR(launch_.run(call_bytes_, &declined));
    if (!declined) return {};
    View indices = indices_;
    indices.data = data[1];
    return declined_at_index(launch_.kernel(), indices, plane_);
  }

 private:
  Launch launch_;
  View indices_;
  int64_t plane_, call_bytes_;
};

struct MaxUnpoolBackward {
  using Options = UnpoolOptions;
  using Plan = UnpoolBackwardPlan;
  static constexpr const char* kNames[3] = {"grad_output", "indices", "grad_values"};
  static constexpr int kOutputs = 1;

  [[gnu::cold]] static Status describe(int nd, const TensorView& grad_output, DType index_dtype,
                         const Ints& values_shape, const UnpoolOptions& options,
                         UnpoolBackwardPlan* plan) {
    POOLGEN_RETURN_IF_ERROR(prepare(nd, grad_output, index_dtype, values_shape, options, plan));
    const View& g = plan->views[0];
    plan->views[1] = packed_like(g, index_dtype, values_shape, nd, layout_of(g));
    plan->views[2] = packed_like(g, grad_output.dtype, values_shape, nd, layout_of(g));
    return choose(grad_output, index_dtype, values_shape, options, plan);
  }
  static const Kernel& first_kernel(const UnpoolBackwardPlan& plan) {
    return *(plan.window_kernel ? plan.window_kernel : plan.kernel);
  }

  [[gnu::cold]] static Status check(int nd, Tensors tensors, const UnpoolOptions& options,
                      UnpoolBackwardPlan* plan) {
    const TensorView &grad_output = *tensors[0], &indices = *tensors[1],
                     &grad_values = *tensors[2];
    POOLGEN_RETURN_IF_ERROR(
        prepare(nd, grad_output, indices.dtype, grad_values.shape, options, plan));
    POOLGEN_RETURN_IF_ERROR(check_views(
        nd, grad_output, {"grad_output", &plan->views[0]},
        {"indices", indices, indices.dtype, grad_values.shape},
        {"grad_values", grad_values, grad_output.dtype, grad_values.shape}, &plan->views[1],
        &plan->views[2]));
    POOLGEN_RETURN_IF_ERROR(choose(grad_output, indices.dtype, grad_values.shape, options, plan));
    const Kernel& kernel = *plan->kernel;
    const Views views{plan->views[0], plan->views[1], plan->views[2]};
    if (!plan->window_kernel && kernel.op == Op::unpool_backward && views[2].elements() != 0 &&
        takes_flat(views, kernel.layout)) {
      plan->direct = std::make_unique<DirectGather>(kernel, views);
    }
    return {};
  }

  static Status run(int, Tensors, const UnpoolOptions& options, const UnpoolBackwardPlan& plan,
                    const View (&views)[3]) {
    const View &g = views[0], &i = views[1], &o = views[2];
    if (o.elements() == 0) return {};
    const Kernel& kernel = *plan.kernel;
    if (plan.window_kernel) {
      const Staged out(o, plan.window_kernel->layout, false, Staged::output);
      bool served = false;
      POOLGEN_RETURN_IF_ERROR(
          gather_if_served(*plan.window_kernel, {g, i, out.view()}, plan.bytes, &served));
      if (served) {
        out.finish();
        return {};
      }
    }
    if (kernel.op == Op::unpool_backward) return gather(kernel, g, i, o);
    POOLGEN_RETURN_IF_ERROR(check_device_views(kNames, views, kernel.layout, true));
    const CudaStreamScope stream(plan.device == Device::cuda ? options.cuda_stream : nullptr);
    return run_gpu_algorithm(nullptr, nullptr, kernel, plan.device, {g, i, o}, g.plane(),
                             "grad_output");
  }
};

}  // namespace

Status max_unpool_backward(int nd, const TensorView& grad_output, const TensorView& indices,
                           const TensorView& grad_values, const UnpoolOptions& options) {
  return run_op<MaxUnpoolBackward>(nd, grad_output, indices, grad_values, options);
}

Status prepare_max_unpool_backward(int nd, const TensorView& grad_output,
                                   const TensorView& indices, const TensorView& grad_values,
                                   const UnpoolOptions& options,
                                   PreparedCall* call) {
  return prepare_op<MaxUnpoolBackward>(nd, grad_output, indices, grad_values, options, call);
}

Status max_unpool_backward_kernel_name(int nd, const TensorView& grad_output, DType index_dtype,
                                       const Ints& values_shape, const UnpoolOptions& options,
                                       std::string* name) {
  return op_kernel_name<MaxUnpoolBackward>(name, nd, grad_output, index_dtype, values_shape,
                                           options);
}

}  // namespace poolgen
