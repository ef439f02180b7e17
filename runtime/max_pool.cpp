// max_pool: validate, choose a kernel, call it.
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

}  // namespace

Status max_pool_output_shape(int nd, const Ints& input_shape, const PoolOptions& options,
                             Ints* output_shape) {
  Window window;
  return plan(nd, input_shape, options, &window, output_shape);
}

Status max_pool_kernel_name(int nd, const Ints& input_shape, const PoolOptions& options,
                            std::string* name) {
  Window window;
  Ints output_shape;
  POOLGEN_RETURN_IF_ERROR(plan(nd, input_shape, options, &window, &output_shape));
  *name = find_kernel(Op::pool, nd, window, options.path)->name;
  return {};
}

Status max_pool(int nd, const TensorView& input, const TensorView& values,
                const TensorView& indices, const PoolOptions& options) {
  Window window;
  Ints output_shape;
  POOLGEN_RETURN_IF_ERROR(plan(nd, input.shape, options, &window, &output_shape));
  POOLGEN_RETURN_IF_ERROR(check_value_dtype("input", input.dtype));
  View in, out_values, out_indices;
  POOLGEN_RETURN_IF_ERROR(check_view("input", input, input.dtype, input.shape, nd, &in));
  POOLGEN_RETURN_IF_ERROR(
      check_view("values", values, input.dtype, output_shape, nd, &out_values));
  POOLGEN_RETURN_IF_ERROR(
      check_view("indices", indices, DType::i64, output_shape, nd, &out_indices));
  POOLGEN_RETURN_IF_ERROR(check_no_overlap("values", out_values));
  POOLGEN_RETURN_IF_ERROR(check_no_overlap("indices", out_indices));
  if (out_values.elements() == 0) return {};
  POOLGEN_RETURN_IF_ERROR(check_plane("input", in));

  const Kernel* kernel = find_kernel(Op::pool, nd, window, options.path);
  HalideView in_buffer(in), values_buffer(out_values), indices_buffer(out_indices);
  // Halide orders spatial dimensions innermost first; the generator's scalar inputs follow.
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
  if (run_kernel(*kernel, args, &error) != 0) {
    return fail(Code::internal, kernel->name, " failed: ", error);
  }
  return {};
}

}  // namespace poolgen
