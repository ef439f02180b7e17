// max_unpool_backward: validate, then gather every value's gradient from the slot its index
// names (max_unpool_backward kernels, per element width); name the first invalid index.
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

struct UnpoolBackwardCall {
  Window window;
  Ints output_shape;  // grad_output's
  View grad_output;
  Device device = Device::cpu;
  const Kernel* kernel = nullptr;
};

// Everything about a call but the data and the kernel: the window, the shapes, the gradient
// dtype, the index dtype for the output's planes, grad_output's strides.
Status prepare(int nd, const TensorView& grad_output, DType index_dtype, const Ints& values_shape,
               const UnpoolOptions& options, UnpoolBackwardCall* call) {
  POOLGEN_RETURN_IF_ERROR(unpool_window(nd, options, &call->window));
  // ONNX and TensorFlow train no unpooling: their formats and ONNX's frame have no gradient here.
  if (options.index_format != IndexFormat::plane ||
      (options.output_size_rule == OutputSizeRule::onnx && !options.output_size.empty())) {
    return fail(Code::unsupported, "index_format: expected plane offsets in the output's frame ",
                "for max_unpool_backward, got index_format ",
                index_format_name(options.index_format), " with output_size_rule ",
                static_cast<int>(options.output_size_rule));
  }
  POOLGEN_RETURN_IF_ERROR(
      check_input_shape("max_unpool_backward", nd, "grad_values", values_shape));
  POOLGEN_RETURN_IF_ERROR(
      unpool_output_shape(call->window, values_shape, options.output_size, &call->output_shape,
                          "grad_output"));
  POOLGEN_RETURN_IF_ERROR(check_gradient_dtype("grad_output", grad_output.dtype));
  return check_leading_view("grad_output", grad_output, call->output_shape, nd, index_dtype,
                            spatial_elements(nd, call->output_shape), &call->grad_output);
}

// The kernel: on CUDA (and on the CPU with Path::winner, a check of the GPU algorithm where the
// build has its CPU twin) one that reports the first invalid index, else one that stops there.
Status choose(const TensorView& grad_output, DType index_dtype, const UnpoolOptions& options,
              UnpoolBackwardCall* call) {
  call->device = call_device(options.device, grad_output);
  int capability = 0;
  if (call->device == Device::cuda) POOLGEN_RETURN_IF_ERROR(cuda_capability(&capability));
  const bool reporting = call->device == Device::cuda || options.path == Path::winner;
  return choose_kernel(
      backward_kernels(),
      {reporting ? Op::unpool_backward_reporting : Op::unpool_backward, call->window.nd,
       layout_of(call->grad_output), grad_output.dtype, index_dtype, nullptr, call->device,
       capability},
      "grad_output", &call->kernel);
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
        const Status status = run_flat(kernel, Device::cpu, piece);
        if (status.ok()) return status;
        const Status invalid = invalid_index_error(indices, grad_output.plane());
        return invalid.ok() ? status : invalid;
      },
      [&](const Views& plane, int64_t first_plane) {
        return gather_large(plane[0], plane[1], plane[2], kernel.layout, first_plane);
      }));
  o.finish();
  return {};
}

// What a call's checks leave for its runs: the call, and its indices' and grad_values' views
// (grad_output's is call.grad_output).
struct UnpoolBackwardPlan {
  UnpoolBackwardCall call;
  View indices, grad_values;
};
constexpr const char* kNames[3] = {"grad_output", "indices", "grad_values"};

// Runs a checked call on views of its data.
Status run_checked(const UnpoolBackwardCall& call, const UnpoolOptions& options, const View& g,
                   const View& i, const View& o) {
  if (o.elements() == 0) return {};
  const Kernel& kernel = *call.kernel;
  if (kernel.op == Op::unpool_backward) return gather(kernel, g, i, o);
  POOLGEN_RETURN_IF_ERROR(check_device_view("grad_output", g, kernel.layout, true));
  POOLGEN_RETURN_IF_ERROR(check_device_view("indices", i, kernel.layout, true));
  POOLGEN_RETURN_IF_ERROR(check_device_view("grad_values", o, kernel.layout, true));
  const CudaStreamScope stream(call.device == Device::cuda ? options.cuda_stream : nullptr);
  return run_gpu_algorithm(nullptr, nullptr, kernel, call.device, {g, i, o}, g.plane(),
                           "grad_output");
}

Status unpool_backward(int nd, const TensorView& grad_output, const TensorView& indices,
                       const TensorView& grad_values, const UnpoolOptions& options) {
  thread_local CallMemo<UnpoolBackwardPlan> memo;
  const CallKey key(nd, {&grad_output, &indices, &grad_values}, options);
  if (const UnpoolBackwardPlan* plan = memo.find(key)) {  // the last call's checks hold
    View views[3] = {plan->call.grad_output, plan->indices, plan->grad_values};
    POOLGEN_RETURN_IF_ERROR(
        check_views_data(kNames, {&grad_output, &indices, &grad_values}, views));
    return run_checked(plan->call, options, views[0], views[1], views[2]);
  }

  UnpoolBackwardPlan& plan = memo.start();
  UnpoolBackwardCall& call = plan.call;
  POOLGEN_RETURN_IF_ERROR(
      prepare(nd, grad_output, indices.dtype, grad_values.shape, options, &call));
  const View& g = call.grad_output;
  View &i = plan.indices, &o = plan.grad_values;
  POOLGEN_RETURN_IF_ERROR(
      check_views(nd, grad_output, {"grad_output", &g},
                  {"indices", indices, indices.dtype, grad_values.shape},
                  {"grad_values", grad_values, grad_output.dtype, grad_values.shape}, &i, &o));
  POOLGEN_RETURN_IF_ERROR(choose(grad_output, indices.dtype, options, &call));
  if (call.device == Device::cpu) memo.keep(key);
  return run_checked(call, options, g, i, o);
}

}  // namespace

Status max_unpool_backward(int nd, const TensorView& grad_output, const TensorView& indices,
                           const TensorView& grad_values, const UnpoolOptions& options) {
  return without_exceptions(
      [&] { return unpool_backward(nd, grad_output, indices, grad_values, options); });
}

Status max_unpool_backward_kernel_name(int nd, const TensorView& grad_output, DType index_dtype,
                                       const Ints& values_shape, const UnpoolOptions& options,
                                       std::string* name) {
  return without_exceptions([&]() -> Status {
    UnpoolBackwardCall call;
    POOLGEN_RETURN_IF_ERROR(prepare(nd, grad_output, index_dtype, values_shape, options, &call));
    POOLGEN_RETURN_IF_ERROR(choose(grad_output, index_dtype, options, &call));
    *name = call.kernel->name;
    return Status();
  });
}

}  // namespace poolgen
