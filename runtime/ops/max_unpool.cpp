// max_unpool: validate, try the gather fast path, else scatter; on CUDA (or Path::winner) the
// deterministic winner kernel; report invalid indices. Other frameworks' indices become plane
// offsets first (a packed copy), or, where some cross planes, go through the host's flat store.
#include "conventions/index_formats.hpp"
#include "dispatch/cuda.hpp"
#include "dispatch/kernel_table.hpp"
#include "dispatch/launch.hpp"
#include "execute/gpu_algorithms.hpp"
#include "execute/memory.hpp"
#include "execute/scatter.hpp"
#include "execute/staging.hpp"
#include "ops/call_memo.hpp"
#include "validate/views.hpp"
#include "validate/window.hpp"

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
  int64_t bytes = 0;  // the values', the indices' and the output's
  Device device = Device::cpu;
  const Kernel* gather = nullptr;  // the fast path, when one is built for and pays on this call
  const Kernel* scatter = nullptr;
  // CUDA calls and Path::winner: any window's gather where a window is known (given, or implied
  // by the shapes) and every index lies in its own, else the winner.
  Window gather_window;
  const Kernel* window_gather = nullptr;
  const Kernel* winner = nullptr;
};

// Whether every output extent lies within a stride of the window's default (PyTorch's rule,
// which other frameworks' rules need not keep): the window gather's candidates for a slot are
// the cells whose windows reach it, which holds only there.
bool within_window_reach(const Window& w, const Ints& in, const Ints& out) {
  const size_t first = in.size() - w.nd;
  for (int i = 0; i < w.nd; ++i) {
    const int64_t natural =
        (in[first + i] - 1) * w.stride[i] - w.padding[i] - w.padding_end[i] + w.kernel[i];
    if (out[first + i] <= natural - w.stride[i] || out[first + i] >= natural + w.stride[i]) {
      return false;
    }
  }
  return true;
}

// Whether the indices are read through a rewrite into plane offsets of the output: another
// framework's format, or ONNX's frame (the default-sized output) inside a larger output.
bool rewrites_indices(const UnpoolOptions& o) {
  return o.index_format != IndexFormat::plane ||
         (o.output_size_rule == OutputSizeRule::onnx && !o.output_size.empty());
}

// The conventions the CPU's scatter alone serves.
Status check_conventions(const UnpoolOptions& o, Device device) {
  if (rewrites_indices(o) && (device == Device::cuda || o.path == Path::winner)) {
    return fail(Code::unsupported, "index_format: expected plane offsets in PyTorch's frame on ",
                "CUDA and with Path::winner (other frameworks' unpooling runs on the CPU's ",
                "scatter), got index_format ", index_format_name(o.index_format),
                " with output_size_rule ", static_cast<int>(o.output_size_rule));
  }
  return {};
}

// Everything about a call but the indices' and output's views, the data and the kernels.
Status prepare(int nd, const TensorView& values, DType index_dtype, const UnpoolOptions& options,
               UnpoolCall* call) {
  POOLGEN_RETURN_IF_ERROR(plan(nd, values.shape, options, &call->window, &call->output_shape));
  const int64_t slot_plane = spatial_elements(nd, call->output_shape);
  POOLGEN_RETURN_IF_ERROR(check_leading_view("values", values, values.shape, nd, index_dtype,
                                             slot_plane, &call->values));
  call->bytes = by_index_bytes(call->values, index_dtype, spatial_elements(nd, values.shape),
                               slot_plane);
  return {};
}

// The kernels for the values' device and types (after the arguments are known valid, so that a
// malformed call is reported as such even when the build lacks its dtype): the gather and the
// scatter in `layout`, the winner (which takes the views whole) in the values'.
Status choose(const TensorView& values, DType index_dtype, const UnpoolOptions& options,
              Layout layout, UnpoolCall* call) {
  const int nd = call->window.nd;
  call->device = call_device(options.device, values);
  if (call->device == Device::cuda || options.path == Path::winner) {
    int capability = 0;
    if (call->device == Device::cuda) POOLGEN_RETURN_IF_ERROR(cuda_capability(&capability));
    call->gather_window = call->window;
    if (!call->window.by_indices ||
        implied_window(nd, values.shape, call->output_shape, &call->gather_window)) {
      call->window_gather = find_kernel(
          forward_kernels(), {Op::unpool_window_gather, nd, layout_of(call->values), values.dtype,
                              index_dtype, &call->gather_window, call->device, capability});
    }
    return choose_kernel(forward_kernels(), {Op::unpool_winner, nd, layout_of(call->values), values.dtype, index_dtype, nullptr,
                          call->device, capability},
                         "values", &call->winner);
  }
  Window implied;
  const Window* window = &call->window;
  if (call->window.by_indices) {
    window = implied_window(nd, values.shape, call->output_shape, &implied) ? &implied : nullptr;
  } else if (!within_window_reach(call->window, values.shape, call->output_shape)) {
    window = nullptr;  // the window gathers only the slots its cells reach
  }
  if (options.path == Path::automatic && window) {
    call->gather = find_kernel(forward_kernels(), {Op::unpool_gather, nd, layout, values.dtype, index_dtype,
                                window, Device::cpu, 0});
    if (call->gather && !gather_pays(*call->gather, call->bytes)) call->gather = nullptr;
  }
  return choose_kernel(
      forward_kernels(), {Op::unpool_scatter, nd, layout, values.dtype, index_dtype, nullptr, Device::cpu, 0},
      "values", &call->scatter);
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
  POOLGEN_RETURN_IF_ERROR(choose(values, index_dtype, options, layout_of(call.values), &call));
  const Kernel* first = call.window_gather ? call.window_gather : call.winner;
  *name = (first ? first : call.gather ? call.gather : call.scatter)->name;
  return {};
}

Status max_unpool_kernel_name(int nd, const Ints& values_shape, const UnpoolOptions& options,
                              std::string* name) {
  return max_unpool_kernel_name(nd, contiguous(nullptr, DType::f32, values_shape), DType::i64,
                                options, name);
}

namespace {

// What a call's checks leave for its runs: the call, its indices' and output's views (the
// values' is call.values), the layout its kernels take, and its direct run where it has one.
struct UnpoolPlan {
  UnpoolCall call;
  View indices, output;
  Layout layout = Layout::contiguous;
  std::unique_ptr<DirectScatter> direct;  // where the scatter alone serves the call in one run
};
constexpr const char* kNames[3] = {"values", "indices", "output"};

// Runs a checked call on views of its data.
Status run_checked(int nd, const TensorView& values, const UnpoolOptions& options,
                   const UnpoolCall& call, Layout layout, const View& v, const View& i,
                   const View& o) {
  if (o.elements() == 0) return {};
  if (const Kernel* w = call.winner) {
    // Device views are checked before any kernel reads them: the winner behind the gather takes
    // only dense planes.
    POOLGEN_RETURN_IF_ERROR(check_device_view("values", v, w->layout, true));
    POOLGEN_RETURN_IF_ERROR(check_device_view("indices", i, w->layout, true));
    POOLGEN_RETURN_IF_ERROR(check_device_view("output", o, w->layout, true));
    const CudaStreamScope stream(call.device == Device::cuda ? options.cuda_stream : nullptr);
    return run_gpu_algorithm(call.window_gather, &call.gather_window, *w, call.device,
                             {v, i, o}, o.plane(), "output");
  }

  // Windows within their stride in the outermost spatial dimension: a streamed output may be
  // scattered by slabs of rows (execute/scatter.hpp).
  const int64_t slabs = slab_stride(call.window);
  if (rewrites_indices(options)) {
    // Each group of planes has its indices rewritten into plane offsets just before its
    // scatter, in cache (ONNX's offsets in the output need none: the kernels subtract each
    // plane's first slot); where some index leaves its plane, the whole rewrite, in input order,
    // names the first (or finds it crossing planes: the flat store then serves the call).
    const bool batchless = values.shape.size() == static_cast<size_t>(nd) + 1;
    Ints frame = call.output_shape;  // ONNX's rule: the default-sized output's
    if (options.output_size_rule == OutputSizeRule::onnx) {
      POOLGEN_RETURN_IF_ERROR(unpool_output_shape(call.window, values.shape, {}, &frame));
    }
    const IndexRewrite rewrite = [&](const View& src, const View& dst, int64_t n, int64_t c) {
      return unpool_plane_offsets(nd, frame, call.output_shape, src, options.index_format, dst,
                                  batchless, n, c);
    };
    const bool global = options.index_format == IndexFormat::onnx && frame == call.output_shape;
    const Status grouped =
        scatter(*call.scatter, ScatterMode::store, v, i, o, call.bytes, &rewrite, global, slabs);
    if (grouped.code() != Code::index_out_of_range) return grouped;
    std::vector<char> offsets(static_cast<size_t>(i.bytes()));
    const Status st = rewrite(i, packed(i, layout, offsets.data()), 0, 0);
    if (st.code() == Code::index_out_of_range && options.index_format != IndexFormat::plane) {
      return unpool_across_planes(nd, frame, v, i, options.index_format, o, batchless);
    }
    return st.ok() ? grouped : st;
  }

  // The gather reports indices it cannot serve (outside their cell's window, or invalid);
  // the scatter then decides, and names any invalid one. It takes the views as they are.
  const Kernel* gather = call.gather;
  if (gather && takes_whole({&v, &i, &o}, gather->layout)) {
    HalideView values_buffer(v, gather->layout, gather->value),
        indices_buffer(i, gather->layout, gather->index),
        output_buffer(o, gather->layout, gather->value);
    KernelArgs args{nullptr, &values_buffer.buffer, &indices_buffer.buffer,
                    &output_buffer.buffer};
    std::string error;
    if (run_kernel(*gather, args, &error, call.bytes) == 0) return {};
  }
  return scatter(*call.scatter, ScatterMode::store, v, i, o, call.bytes, nullptr, false, slabs);
}

Status unpool(int nd, const TensorView& values, const TensorView& indices,
              const TensorView& output, const UnpoolOptions& options) {
  thread_local CallMemo<UnpoolPlan> memo;
  const CallKey key(nd, {&values, &indices, &output}, options);
  if (const UnpoolPlan* plan = memo.find(key)) {  // the last call's checks hold: data's remain
    View views[3] = {plan->call.values, plan->indices, plan->output};
    DirectScatter* direct = plan->direct.get();
    POOLGEN_RETURN_IF_ERROR(check_views_data(kNames, {&values, &indices, &output}, views,
                                             direct ? &direct->spans : nullptr));
    if (direct) return direct->run(values.data, indices.data, output.data);
    return run_checked(nd, values, options, plan->call, plan->layout, views[0], views[1],
                       views[2]);
  }

  UnpoolPlan& plan = memo.start();
  UnpoolCall& call = plan.call;
  POOLGEN_RETURN_IF_ERROR(prepare(nd, values, indices.dtype, options, &call));
  const View& v = call.values;
  View &i = plan.indices, &o = plan.output;
  POOLGEN_RETURN_IF_ERROR(check_views(nd, values, {"values", &v},
                                      {"indices", indices, indices.dtype, values.shape},
                                      {"output", output, values.dtype, call.output_shape}, &i,
                                      &o));
  // The output's layout where it has one (else the values'): values and indices in another
  // (PyTorch 2 pools 3-D channels-last into channels-last, its unpooling gives contiguous) are
  // the smaller tensors, so they are the ones packed; packing the output cost 1.8x the call.
  const Layout output_layout = layout_of(o);
  const Layout layout = plan.layout = fits(o, output_layout) ? output_layout : layout_of(v);
  POOLGEN_RETURN_IF_ERROR(check_conventions(options, call_device(options.device, values)));
  POOLGEN_RETURN_IF_ERROR(choose(values, indices.dtype, options, layout, &call));
  if (call.device == Device::cpu) {
    // The winner, the gather and the index rewrites run before the scatter, or instead of it.
    if (!call.winner && !call.gather && !rewrites_indices(options)) {
      plan.direct = DirectScatter::make(*call.scatter, ScatterMode::store, {v, i, o},
                                        slab_stride(call.window));
    }
    memo.keep(key);
  }
  return run_checked(nd, values, options, call, layout, v, i, o);
}

}  // namespace

Status max_unpool(int nd, const TensorView& values, const TensorView& indices,
                  const TensorView& output, const UnpoolOptions& options) {
  return without_exceptions([&] { return unpool(nd, values, indices, output, options); });
}

}  // namespace poolgen
