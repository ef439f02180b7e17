// max_unpool: validate, try the gather fast path, else scatter; report invalid indices.
#include "kernels.hpp"
#include "shapes.hpp"
#include "tensors.hpp"

namespace poolgen {

using namespace detail;

namespace {

Status plan(int nd, const Ints& input_shape, const UnpoolOptions& options, Window* window,
            Ints* output_shape) {
  POOLGEN_RETURN_IF_ERROR(unpool_window(nd, options, window));
  POOLGEN_RETURN_IF_ERROR(check_input_shape("max_unpool", nd, "values", input_shape));
  return unpool_output_shape(*window, input_shape, options.output_size, output_shape);
}

// Names the first index, in input order, that lies outside its output plane.
Status invalid_index_error(const View& indices, int64_t plane) {
  Status status;
  const auto* data = static_cast<const int64_t*>(indices.data);
  for_each_element(indices, [&](int64_t position, int64_t offset) {
    const int64_t index = data[offset];
    if (status.ok() && (index < 0 || index >= plane)) {
      status = fail(Code::index_out_of_range, "indices: element ", position, " is ", index,
                    ", outside the output plane of ", plane, " elements (expected 0 to ",
                    plane - 1, ")");
    }
  });
  return status;
}

// Runs the scatter kernel over dense planes, packing strided views into scratch copies first.
Status scatter(const View& values, const View& indices, const View& output) {
  // Scratch copies, used only for views whose planes are not packed.
  std::vector<char> values_copy, indices_copy, output_copy;
  auto packed = [](const View& v, std::vector<char>* scratch, bool fill) {
    if (v.dense_planes()) return v;
    View p = v;
    scratch->resize(v.elements() * dtype_size(v.dtype));
    if (fill) pack(v, scratch->data());
    p.data = scratch->data();
    int64_t stride = 1;
    for (int d = p.rank - 1; d >= 0; stride *= p.shape[d--]) p.strides[d] = stride;
    return p;
  };
  const View v = packed(values, &values_copy, true), i = packed(indices, &indices_copy, true),
             o = packed(output, &output_copy, false);
  HalideView values_buffer(v, true), indices_buffer(i, true), output_buffer(o, true);
  std::vector<void*> args{nullptr, &values_buffer.buffer, &indices_buffer.buffer,
                          &output_buffer.buffer};
  std::string error;
  const Kernel* kernel = find_kernel(Op::unpool_scatter, values.rank - 2, Window{}, Path::general);
  if (run_kernel(*kernel, args, &error) != 0) {
    Status invalid = invalid_index_error(indices, output.plane());
    return invalid.ok() ? fail(Code::internal, kernel->name, " failed: ", error) : invalid;
  }
  if (o.data != output.data) unpack(o.data, output);
  return {};
}

}  // namespace

Status max_unpool_output_shape(int nd, const Ints& input_shape, const UnpoolOptions& options,
                               Ints* output_shape) {
  Window window;
  return plan(nd, input_shape, options, &window, output_shape);
}

Status max_unpool_kernel_name(int nd, const Ints& input_shape, const UnpoolOptions& options,
                              std::string* name) {
  Window window;
  Ints output_shape;
  POOLGEN_RETURN_IF_ERROR(plan(nd, input_shape, options, &window, &output_shape));
  const Kernel* gather = find_kernel(Op::unpool_gather, nd, window, options.path);
  *name = (gather ? gather : find_kernel(Op::unpool_scatter, nd, window, Path::general))->name;
  return {};
}

Status max_unpool(int nd, const TensorView& values, const TensorView& indices,
                  const TensorView& output, const UnpoolOptions& options) {
  Window window;
  Ints output_shape;
  POOLGEN_RETURN_IF_ERROR(plan(nd, values.shape, options, &window, &output_shape));
  POOLGEN_RETURN_IF_ERROR(check_value_dtype("values", values.dtype));
  View v, i, o;
  POOLGEN_RETURN_IF_ERROR(check_view("values", values, values.dtype, values.shape, nd, &v));
  POOLGEN_RETURN_IF_ERROR(check_view("indices", indices, DType::i64, values.shape, nd, &i));
  POOLGEN_RETURN_IF_ERROR(check_view("output", output, values.dtype, output_shape, nd, &o));
  POOLGEN_RETURN_IF_ERROR(check_no_overlap("output", o));
  if (o.elements() == 0) return {};
  POOLGEN_RETURN_IF_ERROR(check_plane("output", o));

  // The gather reports indices it cannot serve (outside their cell's window, or invalid);
  // the scatter then decides, and names any invalid one.
  if (const Kernel* gather = find_kernel(Op::unpool_gather, nd, window, options.path)) {
    HalideView values_buffer(v), indices_buffer(i), output_buffer(o);
    std::vector<void*> args{nullptr, &values_buffer.buffer, &indices_buffer.buffer,
                            &output_buffer.buffer};
    std::string error;
    if (run_kernel(*gather, args, &error) == 0) return {};
  }
  return scatter(v, i, o);
}

}  // namespace poolgen
