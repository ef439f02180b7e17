// max_unpool: validate, try the gather fast path, else scatter; report invalid indices.
#include "kernels.hpp"
#include "shapes.hpp"
#include "tensors.hpp"

#include <HalideRuntime.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <thread>

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

// Planes per scatter call: a group's output stays in cache between the kernel's zero and
// scatter passes, and there are enough groups to keep every core busy.
int64_t planes_per_group(const View& o) {
  constexpr int64_t kGroupBytes = 1 << 20;
  const int64_t planes = o.shape[0] * o.shape[1];
  const int64_t plane_bytes = o.plane() * static_cast<int64_t>(dtype_size(o.dtype));
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t for_cores = (planes + 4 * cores - 1) / (4 * cores);
  return std::max<int64_t>(1, std::min(kGroupBytes / plane_bytes, for_cores));
}

// One Halide task per group of planes: the scatter kernel runs on planes
// [task * planes, (task + 1) * planes) of the (N, C) planes, in one thread.
struct ScatterGroups {
  const Kernel* kernel;
  View values, indices, output;
  int64_t planes;
  std::mutex mutex;
  std::string error;  // the first kernel error message, if any

  // Planes [first, first + count) of `v` (never crossing a batch), as a flat-plane buffer.
  static View part(const View& v, int64_t first, int64_t count) {
    View p = v;
    const int64_t n = first / v.shape[1], c = first % v.shape[1];
    p.data = static_cast<char*>(v.data) +
             (n * v.strides[0] + c * v.strides[1]) * static_cast<int64_t>(dtype_size(v.dtype));
    p.shape[0] = 1;
    p.shape[1] = std::min(count, v.shape[1] - c);
    return p;
  }

  static int run(void*, int task, uint8_t* closure) {
    auto& g = *reinterpret_cast<ScatterGroups*>(closure);
    const int64_t end = std::min((task + 1) * g.planes, g.output.shape[0] * g.output.shape[1]);
    for (int64_t first = task * g.planes; first < end;) {
      const View v = part(g.values, first, end - first), i = part(g.indices, first, end - first),
                 o = part(g.output, first, end - first);
      HalideView values_buffer(v, true), indices_buffer(i, true), output_buffer(o, true);
      std::vector<void*> args{nullptr, &values_buffer.buffer, &indices_buffer.buffer,
                              &output_buffer.buffer};
      std::string error;
      if (const int result = run_kernel(*g.kernel, args, &error)) {
        std::lock_guard<std::mutex> lock(g.mutex);
        if (g.error.empty()) g.error = error;
        return result;
      }
      first += o.shape[1];
    }
    return 0;
  }
};

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
  const Kernel* kernel = find_kernel(Op::unpool_scatter, values.rank - 2, Window{}, Path::general);
  ScatterGroups groups{kernel, v, i, o, planes_per_group(o), {}, {}};
  const int64_t planes = o.shape[0] * o.shape[1];
  const int tasks = static_cast<int>((planes + groups.planes - 1) / groups.planes);
  if (halide_do_par_for(nullptr, ScatterGroups::run, 0, tasks,
                        reinterpret_cast<uint8_t*>(&groups)) != 0) {
    Status invalid = invalid_index_error(indices, output.plane());
    return invalid.ok() ? fail(Code::internal, kernel->name, " failed: ", groups.error) : invalid;
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
