// max_pool: validate, choose a kernel for the input's device, layout and types, call it.
#include "cuda.hpp"
#include "kernels.hpp"
#include "shapes.hpp"
#include "tensors.hpp"

namespace poolgen {

using namespace detail;

namespace {

// Checks everything that depends only on shapes and options.
Status plan(int nd, const Ints& input_shape, const PoolOptions& options, Window* window,
            Ints* output_shape) {
  POOLGEN_RETURN_IF_ERROR(pool_window(nd, options, window));
  POOLGEN_RETURN_IF_ERROR(check_input_shape("max_pool", nd, "input", input_shape));
  return pool_output_shape(*window, input_shape, output_shape);
}

struct PoolCall {
  Window window;
  Ints output_shape;
  View input;
  Device device = Device::cpu;
  const Kernel* kernel = nullptr;
};

// Everything about a call but its outputs' views, the data and the kernel: shapes, types.
Status prepare(int nd, const TensorView& input, DType index_dtype, const PoolOptions& options,
               PoolCall* call) {
  POOLGEN_RETURN_IF_ERROR(plan(nd, input.shape, options, &call->window, &call->output_shape));
  return check_leading_view("input", input, nd, index_dtype, spatial_elements(nd, input.shape),
                            &call->input);
}

// The kernel for the input's device, layout and types (after the arguments are known valid, so
// that a malformed call is reported as such even when the build lacks its dtype).
Status choose(const TensorView& input, DType index_dtype, const PoolOptions& options,
              PoolCall* call) {
  const int nd = call->window.nd;
  call->device = call_device(options.device, input);
  int capability = 0;
  if (call->device == Device::cuda) POOLGEN_RETURN_IF_ERROR(cuda_capability(&capability));
  const KernelQuery query{Op::pool,
                          nd,
                          layout_of(call->input),
                          input.dtype,
                          index_dtype,
                          options.path == Path::automatic ? &call->window : nullptr,
                          call->device,
                          capability};
  return choose_kernel(query, "input", &call->kernel);
}

}  // namespace

Status max_pool_output_shape(int nd, const Ints& input_shape, const PoolOptions& options,
                             Ints* output_shape) {
  Window window;
  return plan(nd, input_shape, options, &window, output_shape);
}

Status max_pool_kernel_name(int nd, const TensorView& input, DType index_dtype,
                            const PoolOptions& options, std::string* name) {
  PoolCall call;
  POOLGEN_RETURN_IF_ERROR(prepare(nd, input, index_dtype, options, &call));
  POOLGEN_RETURN_IF_ERROR(choose(input, index_dtype, options, &call));
  *name = call.kernel->name;
  return {};
}

Status max_pool_kernel_name(int nd, const Ints& input_shape, const PoolOptions& options,
                            std::string* name) {
  return max_pool_kernel_name(nd, contiguous(nullptr, DType::f32, input_shape), DType::i64,
                              options, name);
}

Status max_pool(int nd, const TensorView& input, const TensorView& values,
                const TensorView& indices, const PoolOptions& options) {
  PoolCall call;
  POOLGEN_RETURN_IF_ERROR(prepare(nd, input, indices.dtype, options, &call));
  View in, out_values, out_indices;
  POOLGEN_RETURN_IF_ERROR(check_view("input", input, input.dtype, input.shape, nd, &in));
  POOLGEN_RETURN_IF_ERROR(
      check_view("values", values, input.dtype, call.output_shape, nd, &out_values));
  POOLGEN_RETURN_IF_ERROR(
      check_view("indices", indices, indices.dtype, call.output_shape, nd, &out_indices));
  POOLGEN_RETURN_IF_ERROR(check_no_overlap("values", out_values));
  POOLGEN_RETURN_IF_ERROR(check_no_overlap("indices", out_indices));
  POOLGEN_RETURN_IF_ERROR(
      check_same_device(in, "input", {{"values", &out_values}, {"indices", &out_indices}}));
  POOLGEN_RETURN_IF_ERROR(choose(input, indices.dtype, options, &call));
  if (out_values.elements() == 0) return {};
  POOLGEN_RETURN_IF_ERROR(check_plane("input", in));

  const Kernel& kernel = *call.kernel;
  POOLGEN_RETURN_IF_ERROR(check_device_view("input", in, kernel.layout, false));
  POOLGEN_RETURN_IF_ERROR(check_device_view("values", out_values, kernel.layout, false));
  POOLGEN_RETURN_IF_ERROR(check_device_view("indices", out_indices, kernel.layout, false));
  const Staged staged_in(in, kernel.layout, false, Staged::input);
  const Staged staged_values(out_values, kernel.layout, false, Staged::output);
  const Staged staged_indices(out_indices, kernel.layout, false, Staged::output);
  HalideView in_buffer(staged_in.view(), kernel.layout, kernel.value);
  HalideView values_buffer(staged_values.view(), kernel.layout, kernel.value);
  HalideView indices_buffer(staged_indices.view(), kernel.layout, kernel.index);
  // Halide orders spatial dimensions innermost first; the generator's scalar inputs follow.
  const Window& window = call.window;
  int32_t params[3][4];
  std::vector<void*> args{nullptr, &in_buffer.buffer};
  for (int i = 0; i < nd; ++i) {
    const int d = nd - 1 - i;
    params[i][0] = static_cast<int32_t>(window.kernel[d]);
    params[i][1] = static_cast<int32_t>(window.stride[d]);
    params[i][2] = static_cast<int32_t>(window.padding[d]);
    params[i][3] = static_cast<int32_t>(window.dilation[d]);
    for (int32_t& p : params[i]) args.push_back(&p);
  }
  args.push_back(&values_buffer.buffer);
  args.push_back(&indices_buffer.buffer);
  std::string error;
  const bool on_device = in.device == Device::cuda;
  const int result =
      call.device == Device::cuda
          ? run_cuda_kernel(kernel, args,
                            {{&in_buffer.buffer, on_device, false},
                             {&values_buffer.buffer, on_device, true},
                             {&indices_buffer.buffer, on_device, true}},
                            &error)
          : run_kernel(kernel, args, &error);
  if (result != 0) return fail(Code::internal, kernel.name, " failed: ", error);
  staged_values.finish();
  staged_indices.finish();
  return {};
}

}  // namespace poolgen
