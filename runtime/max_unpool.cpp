// max_unpool: validate, try the gather fast path, else scatter; on CUDA (or Path::winner) the
// deterministic winner kernel; report invalid indices.
#include "cuda.hpp"
#include "kernels.hpp"
#include "shapes.hpp"
#include "tensors.hpp"

#include <HalideRuntime.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>

namespace poolgen {

using namespace detail;

namespace {

Status plan(int nd, const Ints& input_shape, const UnpoolOptions& options, Window* window,
            Ints* output_shape) {
  POOLGEN_RETURN_IF_ERROR(unpool_window(nd, options, window));
  POOLGEN_RETURN_IF_ERROR(check_input_shape("max_unpool", nd, "values", input_shape));
  return unpool_output_shape(*window, input_shape, options.output_size, output_shape);
}

struct UnpoolCall {
  Window window;
  Ints output_shape;
  View values;
  Device device = Device::cpu;
  const Kernel* gather = nullptr;  // the fast path, when one is built for this call
  const Kernel* scatter = nullptr;
  const Kernel* winner = nullptr;  // CUDA calls and Path::winner: the only kernel they run
};

// Everything about a call but the indices' and output's views, the data and the kernels.
Status prepare(int nd, const TensorView& values, DType index_dtype, const UnpoolOptions& options,
               UnpoolCall* call) {
  POOLGEN_RETURN_IF_ERROR(plan(nd, values.shape, options, &call->window, &call->output_shape));
  return check_leading_view("values", values, nd, index_dtype,
                            spatial_elements(nd, call->output_shape), &call->values);
}

// The kernels for the values' device, layout and types (after the arguments are known valid, so
// that a malformed call is reported as such even when the build lacks its dtype).
Status choose(const TensorView& values, DType index_dtype, const UnpoolOptions& options,
              UnpoolCall* call) {
  const int nd = call->window.nd;
  const Layout layout = layout_of(call->values);
  call->device = call_device(options.device, values);
  if (call->device == Device::cuda || options.path == Path::winner) {
    int capability = 0;
    if (call->device == Device::cuda) POOLGEN_RETURN_IF_ERROR(cuda_capability(&capability));
    return choose_kernel({Op::unpool_winner, nd, layout, values.dtype, index_dtype, nullptr,
                          call->device, capability},
                         "values", &call->winner);
  }
  if (options.path == Path::automatic) {
    call->gather = find_kernel({Op::unpool_gather, nd, layout, values.dtype, index_dtype,
                                &call->window, Device::cpu, 0});
  }
  return choose_kernel(
      {Op::unpool_scatter, nd, layout, values.dtype, index_dtype, nullptr, Device::cpu, 0},
      "values", &call->scatter);
}

// The error for element `position` (in input order) holding `index`, outside a plane of `plane`.
Status invalid_index_at(int64_t position, int64_t index, int64_t plane) {
  return fail(Code::index_out_of_range, "indices: expected indices in [0, ", plane - 1,
              "] (an output plane of ", plane, " elements), got ", index, " at element ", position,
              " (in input order)");
}

// Names the first index, in input order, that lies outside its output plane.
Status invalid_index_error(const View& indices, int64_t plane) {
  Status status;
  for_each_element(indices, [&](int64_t position, int64_t offset) {
    const int64_t index = indices.dtype == DType::i32
                              ? static_cast<const int32_t*>(indices.data)[offset]
                              : static_cast<const int64_t*>(indices.data)[offset];
    if (status.ok() && (index < 0 || index >= plane)) {
      status = invalid_index_at(position, index, plane);
    }
  });
  return status;
}

// Planes per scatter call: a group's output stays in cache between the kernel's zero and
// scatter passes, and there are enough groups to keep `cores` threads busy. In channels-last a
// plane's elements lie C apart, interleaved with the other channels': groups are whole images,
// split into channel blocks of whole cache lines only when there are fewer images than cores
// and the call moves at least 8 times min_parallel_bytes (`call_bytes`): below that the threads
// contend for the same lines and pages (measured: 1x64x56x56 f32, 1.4 MB, 10% slower on two
// threads than on one; 1x64x80x80, 2.9 MB, 30% faster), and at most kSplitBytes: above it each
// thread's half-pixel stripes go to memory twice (zero, then scatter) and two threads measured
// 1.1-1.75x slower than one (1x64x256x256 to 1x64x1024x1024, 29 MB to 470 MB; 1x64x90x90 to
// 1x64x182x182, 3.6 to 15 MB, were 1.1-1.4x faster).
int64_t planes_per_group(const View& o, Layout layout, int64_t cores, int64_t call_bytes) {
  constexpr int64_t kGroupBytes = 1 << 20, kLineBytes = 64, kSplitBytes = 16 << 20;
  const int64_t size = static_cast<int64_t>(dtype_size(o.dtype));
  const int64_t planes = o.shape[0] * o.shape[1], channels = o.shape[1];
  const int64_t plane_bytes = std::max<int64_t>(1, o.plane() * size);
  if (layout == Layout::channels_last) {
    if (o.shape[0] >= cores || call_bytes < 8 * min_parallel_bytes() || call_bytes > kSplitBytes) {
      return channels;
    }
    const int64_t line = std::max<int64_t>(1, kLineBytes / size);
    const int64_t blocks = std::min(cores, std::max<int64_t>(1, channels / line));
    return (channels / blocks + line - 1) / line * line;
  }
  const int64_t for_cores = (planes + 4 * cores - 1) / (4 * cores);
  return std::max<int64_t>(1, std::min(kGroupBytes / plane_bytes, for_cores));
}

// One Halide task per group of planes: the scatter kernel runs on planes
// [task * planes, (task + 1) * planes) of the (N, C) planes, in one thread.
struct ScatterGroups {
  const Kernel* kernel;
  View values, indices, output;
  int64_t planes;
  bool share;  // false: every task on the calling thread
  std::mutex mutex;
  std::string error;  // the first kernel error message, if any

  // Planes [first, first + count) of `v` (never crossing a batch).
  static View part(const View& v, int64_t first, int64_t count) {
    const int64_t n = first / v.shape[1], c = first % v.shape[1];
    return slice(slice(v, 0, n, 1), 1, c, std::min(count, v.shape[1] - c));
  }

  int run(int task) {
    auto& g = *this;
    const Layout layout = g.kernel->layout;
    const int64_t end = std::min((task + 1) * g.planes, g.output.shape[0] * g.output.shape[1]);
    for (int64_t first = task * g.planes; first < end;) {
      const View v = part(g.values, first, end - first), i = part(g.indices, first, end - first),
                 o = part(g.output, first, end - first);
      HalideView values_buffer(v, layout, g.kernel->value, true),
          indices_buffer(i, layout, g.kernel->index, true),
          output_buffer(o, layout, g.kernel->value, true);
      std::vector<void*> args{nullptr, &values_buffer.buffer, &indices_buffer.buffer,
                              &output_buffer.buffer};
      std::string error;
      if (const int result = run_kernel(*g.kernel, args, &error, g.share)) {
        std::lock_guard<std::mutex> lock(g.mutex);
        if (g.error.empty()) g.error = error;
        return result;
      }
      first += o.shape[1];
    }
    return 0;
  }
};

// Planes too large for a kernel's buffers (flat views in `layout`): every index is checked first
// (the first invalid one in input order is the error), then each output plane is zeroed and
// scattered in input order, so the latest duplicate wins. One thread, 64-bit offsets.
Status scatter_large(const View& values, const View& indices, const View& output, Layout layout) {
  POOLGEN_RETURN_IF_ERROR(invalid_index_error(indices, output.plane()));
  const int64_t size = static_cast<int64_t>(dtype_size(values.dtype));
  const int64_t value_step = values.plane_step(layout) * size,
                index_step = indices.plane_step(layout), output_step = output.plane_step(layout) * size;
  auto plane_of = [](const View& view, int64_t n, int64_t c) {
    return static_cast<char*>(slice(slice(view, 0, n, 1), 1, c, 1).data);
  };
  for (int64_t n = 0; n < output.shape[0]; ++n) {
    for (int64_t c = 0; c < output.shape[1]; ++c) {
      const char* from = plane_of(values, n, c);
      const char* index = plane_of(indices, n, c);
      char* to = plane_of(output, n, c);
      if (output_step == size) {
        std::memset(to, 0, static_cast<size_t>(output.plane() * size));
      } else {
        for (int64_t j = 0; j < output.plane(); ++j) std::memset(to + j * output_step, 0, size);
      }
      for (int64_t j = 0; j < values.plane(); ++j) {
        const int64_t at = indices.dtype == DType::i32
                               ? reinterpret_cast<const int32_t*>(index)[j * index_step]
                               : reinterpret_cast<const int64_t*>(index)[j * index_step];
        std::memcpy(to + at * output_step, from + j * value_step, size);
      }
    }
  }
  return {};
}

// Runs the scatter kernel over flat planes in its layout, through packed copies where needed;
// the call moves `call_bytes` in all.
Status scatter(const Kernel& kernel, const View& values, const View& indices, const View& output,
               int64_t call_bytes) {
  const Staged v(values, kernel.layout, true, Staged::input),
      i(indices, kernel.layout, true, Staged::input),
      o(output, kernel.layout, true, Staged::output);
  // Groups never cross an image: the most channels of one image a kernel's buffers hold.
  auto image_fits = [&](int64_t channels) {
    for (const View* view : {&v.view(), &i.view(), &o.view()}) {
      if (!fits_kernel(slice(slice(*view, 0, 0, 1), 1, 0, channels), kernel.layout, true)) {
        return false;
      }
    }
    return true;
  };
  const int64_t channels = o.view().shape[1];
  const int64_t fitting =
      image_fits(channels) ? channels : largest_fitting(channels, image_fits);
  if (fitting == 0) {
    POOLGEN_RETURN_IF_ERROR(scatter_large(v.view(), i.view(), o.view(), kernel.layout));
    o.finish();
    return {};
  }
  const bool share = worth_sharing(call_bytes);
  ScatterGroups groups{&kernel, v.view(), i.view(), o.view(),
                       std::min(fitting, planes_per_group(o.view(), kernel.layout,
                                                          share ? thread_count() : 1, call_bytes)),
                       share, {}, {}};
  const int64_t planes = output.shape[0] * output.shape[1];
  // Halide numbers tasks with an int.
  groups.planes = std::max(groups.planes, planes / std::numeric_limits<int32_t>::max() + 1);
  const int tasks = static_cast<int>((planes + groups.planes - 1) / groups.planes);
  if (parallel_for(tasks, [&](int task) { return groups.run(task); }, share) != 0) {
    Status invalid = invalid_index_error(indices, output.plane());
    return invalid.ok() ? kernel_failed(kernel, groups.error) : invalid;
  }
  o.finish();
  return {};
}

// Runs the winner kernel on flat views (values, indices, output) in its layout; the first invalid
// element's position (in the piece's input order) and index go to *position and *index, or
// *position is int64's largest when every index is valid.
Status run_winner(const Kernel& kernel, Device device, const Views& views, int64_t* position,
                  int64_t* index) {
  HalideView values_buffer(views[0], kernel.layout, kernel.value, true),
      indices_buffer(views[1], kernel.layout, kernel.index, true),
      output_buffer(views[2], kernel.layout, kernel.value, true);
  const bool i32 = kernel.index == DType::i32;
  int32_t index32 = 0;
  halide_buffer_t position_buffer{}, index_buffer{};
  position_buffer.host = reinterpret_cast<uint8_t*>(position);
  position_buffer.type = {halide_type_int, 64};
  index_buffer.host = i32 ? reinterpret_cast<uint8_t*>(&index32) : reinterpret_cast<uint8_t*>(index);
  index_buffer.type = {halide_type_int, static_cast<uint8_t>(i32 ? 32 : 64)};
  std::vector<void*> args{nullptr,          &values_buffer.buffer, &indices_buffer.buffer,
                          &output_buffer.buffer, &position_buffer,      &index_buffer};
  std::string error;
  const bool on_device = views[0].device == Device::cuda;
  const int result =
      device == Device::cuda
          ? run_cuda_kernel(kernel, args,
                            {{&values_buffer.buffer, on_device, false},
                             {&indices_buffer.buffer, on_device, false},
                             {&output_buffer.buffer, on_device, true},
                             {&position_buffer, false, true},
                             {&index_buffer, false, true}},
                            &error)
          : run_kernel(kernel, args, &error, worth_sharing(total_bytes(views)));
  if (result != 0) return kernel_failed(kernel, error);
  if (i32) *index = index32;
  return {};
}

// Runs the winner kernel (deterministic on any thread count; CUDA's only unpooling kernel) over
// flat planes in its layout, in pieces of planes its buffers hold. Host views go through packed
// copies where needed; device views were checked to need none. The kernel reports the first
// invalid element instead of stopping.
Status winner(const Kernel& kernel, Device device, const View& values, const View& indices,
              const View& output) {
  const Staged v(values, kernel.layout, true, Staged::input),
      i(indices, kernel.layout, true, Staged::input),
      o(output, kernel.layout, true, Staged::output);
  POOLGEN_RETURN_IF_ERROR(for_each_piece(
      {v.view(), i.view(), o.view()},
      [&](const Views& piece) { return fits_kernel(piece, kernel.layout, true); },
      [&](const Views& piece, int64_t first_plane) {
        int64_t position = 0, index = 0;
        POOLGEN_RETURN_IF_ERROR(run_winner(kernel, device, piece, &position, &index));
        if (position == std::numeric_limits<int64_t>::max()) return Status();
        return invalid_index_at(first_plane * values.plane() + position, index, output.plane());
      },
      [&](const Views& plane, int64_t) {
        return fail(Code::unsupported, "output: expected planes the winner kernel's buffers ",
                    "hold (CUDA, Path::winner: below 2^31 elements and 2 GiB), got planes of ",
                    plane[2].plane(), " elements of ", dtype_name(plane[2].dtype));
      }));
  o.finish();
  return {};
}

}  // namespace

Status max_unpool_output_shape(int nd, const Ints& input_shape, const UnpoolOptions& options,
                               Ints* output_shape) {
  Window window;
  return plan(nd, input_shape, options, &window, output_shape);
}

Status max_unpool_kernel_name(int nd, const TensorView& values, DType index_dtype,
                              const UnpoolOptions& options, std::string* name) {
  UnpoolCall call;
  POOLGEN_RETURN_IF_ERROR(prepare(nd, values, index_dtype, options, &call));
  POOLGEN_RETURN_IF_ERROR(choose(values, index_dtype, options, &call));
  *name = (call.winner ? call.winner : call.gather ? call.gather : call.scatter)->name;
  return {};
}

Status max_unpool_kernel_name(int nd, const Ints& values_shape, const UnpoolOptions& options,
                              std::string* name) {
  return max_unpool_kernel_name(nd, contiguous(nullptr, DType::f32, values_shape), DType::i64,
                                options, name);
}

namespace {

Status unpool(int nd, const TensorView& values, const TensorView& indices,
              const TensorView& output, const UnpoolOptions& options) {
  UnpoolCall call;
  POOLGEN_RETURN_IF_ERROR(prepare(nd, values, indices.dtype, options, &call));
  View v, i, o;
  POOLGEN_RETURN_IF_ERROR(check_view("values", values, values.dtype, values.shape, nd, &v));
  POOLGEN_RETURN_IF_ERROR(check_view("indices", indices, indices.dtype, values.shape, nd, &i));
  POOLGEN_RETURN_IF_ERROR(check_view("output", output, values.dtype, call.output_shape, nd, &o));
  POOLGEN_RETURN_IF_ERROR(check_no_overlap("output", o));
  POOLGEN_RETURN_IF_ERROR(check_same_device(v, "values", {{"indices", &i}, {"output", &o}}));
  POOLGEN_RETURN_IF_ERROR(check_apart({{"output", &o}}, {{"values", &v}, {"indices", &i}}));
  POOLGEN_RETURN_IF_ERROR(choose(values, indices.dtype, options, &call));
  if (o.elements() == 0) return {};

  if (const Kernel* w = call.winner) {
    POOLGEN_RETURN_IF_ERROR(check_device_view("values", v, w->layout, true));
    POOLGEN_RETURN_IF_ERROR(check_device_view("indices", i, w->layout, true));
    POOLGEN_RETURN_IF_ERROR(check_device_view("output", o, w->layout, true));
    return winner(*w, call.device, v, i, o);
  }

  // The gather reports indices it cannot serve (outside their cell's window, or invalid);
  // the scatter then decides, and names any invalid one. It takes the views as they are.
  const int64_t call_bytes = v.bytes() + i.bytes() + o.bytes();
  const Kernel* gather = call.gather;
  if (gather && fits(v, gather->layout) && fits(i, gather->layout) && fits(o, gather->layout) &&
      fits_kernel(v, gather->layout) && fits_kernel(i, gather->layout) &&
      fits_kernel(o, gather->layout)) {
    HalideView values_buffer(v, gather->layout, gather->value),
        indices_buffer(i, gather->layout, gather->index),
        output_buffer(o, gather->layout, gather->value);
    std::vector<void*> args{nullptr, &values_buffer.buffer, &indices_buffer.buffer,
                            &output_buffer.buffer};
    std::string error;
    if (run_kernel(*gather, args, &error, worth_sharing(call_bytes)) == 0) return {};
  }
  return scatter(*call.scatter, v, i, o, call_bytes);
}

}  // namespace

Status max_unpool(int nd, const TensorView& values, const TensorView& indices,
                  const TensorView& output, const UnpoolOptions& options) {
  return without_exceptions([&] { return unpool(nd, values, indices, output, options); });
}

}  // namespace poolgen
