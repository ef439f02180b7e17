// max_unpool: validate, try the gather fast path, else scatter; on CUDA (or Path::winner) the
// deterministic winner kernel; report invalid indices. Other frameworks' indices become plane
// offsets first (a packed copy), or, where some cross planes, go through the host's flat store.
#include "conventions/index_formats.hpp"
#include "dispatch/cuda.hpp"
#include "dispatch/kernel_table.hpp"
#include "dispatch/launch.hpp"
#include "execute/gather.hpp"
#include "execute/gpu_algorithms.hpp"
#include "execute/memory.hpp"
#include "execute/scatter.hpp"
#include "execute/staging.hpp"
#include "ops/op.hpp"
#include "parallel/settings.hpp"
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

Status plan_shapes(int nd, const Ints& input_shape, const UnpoolOptions& options, Window* window,
                   Ints* output_shape) {
  POOLGEN_RETURN_IF_ERROR(unpool_window(nd, options, window));
  POOLGEN_RETURN_IF_ERROR(check_input_shape("max_unpool", nd, "values", input_shape));
  return unpool_output_shape(*window, input_shape, options.output_size, output_shape);
}

struct UnpoolPlan : OpPlan {  // views: values, indices, output
  Window window;
  Ints output_shape;
  int64_t bytes = 0;  // the values', the indices' and the output's
  // The layout of the gather and the scatter: the output's where it has one (else the values').
  Layout layout = Layout::contiguous;
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

// Whether the scatter streams this call's contiguous output (streaming_bytes(), at 0 only in
// the tests' setting, where every gather is tried): it then writes each line once, where the
// gather's ordinary stores read it first. Intel Xeon, f32 i64 k2s2p0 NCHW, ms, one / two
// threads, gather / streamed scatter: 1x64x1024x1024 49.0 / 24.7 against 44.7 / 18.6,
// 2x64x1024x1024 91.3 against 73.8, 1x64x512x512 (67 MB out) 10.3 / 3.76 against 10.5 / 3.42,
// 8x64x224x224 15.2 / 7.06 against 15.5 / 6.77 (docs/kernels.md, "Streaming outputs").
bool scatter_streams(const View& output, Layout layout) {
  return layout == Layout::contiguous && streaming_bytes() > 0 && output_streams(output) &&
         is_packed(output, layout);
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
    return fail(Code::unsupported, "index_format",
                ": expected plane offsets in PyTorch's frame on ",
                "CUDA and with Path::winner (other frameworks' unpooling runs on the CPU's ",
                "scatter), got index_format ", index_format_name(o.index_format),
                " with output_size_rule ", static_cast<int>(o.output_size_rule));
  }
  return {};
}

// Everything about a call but the indices' and output's views, the data and the kernels.
[[gnu::cold]]
Status prepare(int nd, const TensorView& values, DType index_dtype, const UnpoolOptions& options,
               UnpoolPlan* plan) {
  POOLGEN_RETURN_IF_ERROR(
      plan_shapes(nd, values.shape, options, &plan->window, &plan->output_shape));
  const int64_t slot_plane = spatial_elements(nd, plan->output_shape);
  POOLGEN_RETURN_IF_ERROR(check_leading_view("values", values, values.shape, nd, index_dtype,
                                             slot_plane, &plan->views[0]));
  plan->bytes = by_index_bytes(plan->views[0], index_dtype, spatial_elements(nd, values.shape),
                               slot_plane);
  return {};
}

// The kernels for the values' device and types (after the arguments are known valid, so that a
// malformed call is reported as such even when the build lacks its dtype): the gather (where it
// takes the call's views) and the scatter in the plan's layout, the winner (which takes the
// views whole) in the values'.
[[gnu::cold]]
Status choose(const TensorView& values, DType index_dtype, const UnpoolOptions& options,
              UnpoolPlan* plan) {
  const int nd = plan->window.nd;
  const View& v = plan->views[0];
  plan->device = call_device(options.device, values);
  if (plan->device == Device::cuda || options.path == Path::winner) {
    int capability = 0;
    if (plan->device == Device::cuda) POOLGEN_RETURN_IF_ERROR(cuda_capability(&capability));
    plan->gather_window = plan->window;
    if (!plan->window.by_indices ||
        implied_window(nd, values.shape, plan->output_shape, &plan->gather_window)) {
      plan->window_gather =
          find_kernel(forward_kernels(), {Op::unpool_window_gather, nd, layout_of(v), values.dtype,
                                          index_dtype, &plan->gather_window, plan->device,
                                          capability});
    }
    return choose_kernel(forward_kernels(),
                         {Op::unpool_winner, nd, layout_of(v), values.dtype, index_dtype, nullptr,
                          plan->device, capability},
                         "values", &plan->winner);
  }
  const Layout layout = plan->layout;
  Window implied;
  const Window* window = &plan->window;
  if (plan->window.by_indices) {
    window = implied_window(nd, values.shape, plan->output_shape, &implied) ? &implied : nullptr;
  } else if (!within_window_reach(plan->window, values.shape, plan->output_shape)) {
    window = nullptr;  // the window gathers only the slots its cells reach
  }
  if (options.path == Path::automatic && window) {
    plan->gather = find_kernel(forward_kernels(), {Op::unpool_gather, nd, layout, values.dtype,
                                                   index_dtype, window, Device::cpu, 0});
    bool takes = plan->gather &&
                 gather_pays(*plan->gather, plan->bytes, plan->views[0], plan->views[2]) &&
                 !scatter_streams(plan->views[2], layout);
    if (takes) {
      POOLGEN_RETURN_IF_ERROR(gather_takes(
          *plan->gather, {plan->views[0], plan->views[1], plan->views[2]}, &takes));
    }
    if (!takes) plan->gather = nullptr;
  }
  return choose_kernel(forward_kernels(),
                       {Op::unpool_scatter, nd, layout, values.dtype, index_dtype, nullptr,
                        Device::cpu, 0},
                       "values", &plan->scatter);
}

struct MaxUnpool {
  using Options = UnpoolOptions;
  using Plan = UnpoolPlan;
  static constexpr const char* kNames[3] = {"values", "indices", "output"};
  static constexpr int kOutputs = 1;

  [[gnu::cold]] static Status describe(int nd, const TensorView& values, DType index_dtype,
                         const UnpoolOptions& options, UnpoolPlan* plan) {
    POOLGEN_RETURN_IF_ERROR(prepare(nd, values, index_dtype, options, plan));
    const View& v = plan->views[0];
    plan->layout = layout_of(v);
    plan->views[1] = packed_like(v, index_dtype, values.shape, nd, plan->layout);
    plan->views[2] = packed_like(v, values.dtype, plan->output_shape, nd, plan->layout);
    return choose(values, index_dtype, options, plan);
  }
  static const Kernel& first_kernel(const UnpoolPlan& plan) {
    const Kernel* first = plan.window_gather ? plan.window_gather : plan.winner;
    return *(first ? first : plan.gather ? plan.gather : plan.scatter);
  }

  [[gnu::cold]]
  static Status check(int nd, Tensors tensors, const UnpoolOptions& options, UnpoolPlan* plan) {
    const TensorView &values = *tensors[0], &indices = *tensors[1], &output = *tensors[2];
    POOLGEN_RETURN_IF_ERROR(prepare(nd, values, indices.dtype, options, plan));
    const View& v = plan->views[0];
    View &i = plan->views[1], &o = plan->views[2];
    POOLGEN_RETURN_IF_ERROR(check_views(nd, values, {"values", &v},
                                        {"indices", indices, indices.dtype, values.shape},
                                        {"output", output, values.dtype, plan->output_shape}, &i,
                                        &o));
    // The output's layout where it has one (else the values'): values and indices in another
    // (PyTorch 2 pools 3-D channels-last into channels-last, its unpooling gives contiguous) are
    // the smaller tensors, so they are the ones packed; packing the output cost 1.8x the call.
    const Layout output_layout = layout_of(o);
    plan->layout = fits(o, output_layout) ? output_layout : layout_of(v);
    POOLGEN_RETURN_IF_ERROR(check_conventions(options, call_device(options.device, values)));
    POOLGEN_RETURN_IF_ERROR(choose(values, indices.dtype, options, plan));
    // The winner, the gather and the index rewrites run before the scatter, or instead of it.
    if (plan->device == Device::cpu && !plan->winner && !plan->gather &&
        !rewrites_indices(options)) {
      plan->direct = DirectScatter::make(*plan->scatter, ScatterMode::store, {v, i, o},
                                         slab_stride(plan->window));
    }
    return {};
  }

  static Status run(int nd, Tensors tensors, const UnpoolOptions& options, const UnpoolPlan& plan,
                    const View (&views)[3]) {
    const View &v = views[0], &i = views[1], &o = views[2];
    if (o.elements() == 0) return {};
    if (const Kernel* w = plan.winner) {
      // Device views are checked before any kernel reads them: the winner behind the gather
      // takes only dense planes.
      POOLGEN_RETURN_IF_ERROR(check_device_views(kNames, views, w->layout, true));
      const CudaStreamScope stream(plan.device == Device::cuda ? options.cuda_stream : nullptr);
      return run_gpu_algorithm(plan.window_gather, &plan.gather_window, *w, plan.device,
                               {v, i, o}, o.plane(), "output");
    }
    // Windows within their stride in the outermost spatial dimension: a streamed output may be
    // scattered by slabs of rows (execute/scatter.hpp).
    const int64_t slabs = slab_stride(plan.window);
    if (rewrites_indices(options)) return scatter_rewritten(nd, *tensors[0], options, plan, views);
    // The gather declines indices it cannot serve (outside their cell's window, or invalid);
    // the scatter then decides, and names any invalid one.
    if (plan.gather) {
      bool served = false;
      POOLGEN_RETURN_IF_ERROR(gather_if_served(*plan.gather, {v, i, o}, plan.bytes, &served));
      if (served) return {};
    }
    return scatter(*plan.scatter, ScatterMode::store, v, i, o, plan.bytes, nullptr, false,
                   slabs);
  }

  // Other frameworks' indices: each group of planes has its indices rewritten into plane
  // offsets just before its scatter, in cache (ONNX's offsets in the output need none: the
  // kernels subtract each plane's first slot); where some index leaves its plane, the whole
  // rewrite, in input order, names the first (or finds it crossing planes: the flat store then
  // serves the call).
  [[gnu::cold]]
  static Status scatter_rewritten(int nd, const TensorView& values, const UnpoolOptions& options,
                                  const UnpoolPlan& plan, const View (&views)[3]) {
    const View &v = views[0], &i = views[1], &o = views[2];
    const bool batchless = values.shape.size() == static_cast<size_t>(nd) + 1;
    Ints frame = plan.output_shape;  // ONNX's rule: the default-sized output's
    if (options.output_size_rule == OutputSizeRule::onnx) {
      POOLGEN_RETURN_IF_ERROR(unpool_output_shape(plan.window, values.shape, {}, &frame));
    }
    const IndexRewrite rewrite = [&](const View& src, const View& dst, int64_t n, int64_t c) {
      return unpool_plane_offsets(nd, frame, plan.output_shape, src, options.index_format, dst,
                                  batchless, n, c);
    };
    const bool global = options.index_format == IndexFormat::onnx && frame == plan.output_shape;
    // ONNX's global offsets in the default frame: the gather subtracts each plane's first slot,
    // as the scatter does, where the index dtype holds every slot's offset.
    if (global && plan.gather &&
        (i.dtype == DType::i64 || o.elements() <= std::numeric_limits<int32_t>::max())) {
      bool served = false;
      POOLGEN_RETURN_IF_ERROR(gather_if_served(*plan.gather, {v, i, o}, plan.bytes, &served,
                                               o.plane()));
      if (served) return {};
    }
    const Status grouped = scatter(*plan.scatter, ScatterMode::store, v, i, o, plan.bytes,
                                   &rewrite, global, slab_stride(plan.window));
    if (grouped.code() != Code::index_out_of_range) return grouped;
    std::vector<char> offsets(static_cast<size_t>(i.bytes()));
    const Status st = rewrite(i, packed(i, plan.layout, offsets.data()), 0, 0);
    if (st.code() == Code::index_out_of_range && options.index_format != IndexFormat::plane) {
      return unpool_across_planes(nd, frame, v, i, options.index_format, o, batchless);
    }
    return st.ok() ? grouped : st;
  }
};

}  // namespace

Status max_unpool_output_shape(int nd, const Ints& input_shape, const UnpoolOptions& options,
                               Ints* output_shape) {
  Window window;
  return plan_shapes(nd, input_shape, options, &window, output_shape);
}

Status max_unpool_kernel_name(int nd, const TensorView& values, DType index_dtype,
                              const UnpoolOptions& options, std::string* name) {
  return op_kernel_name<MaxUnpool>(name, nd, values, index_dtype, options);
}

Status max_unpool_kernel_name(int nd, const Ints& values_shape, const UnpoolOptions& options,
                              std::string* name) {
  return max_unpool_kernel_name(nd, contiguous(nullptr, DType::f32, values_shape), DType::i64,
                                options, name);
}

Status max_unpool(int nd, const TensorView& values, const TensorView& indices,
                  const TensorView& output, const UnpoolOptions& options) {
  return run_op<MaxUnpool>(nd, values, indices, output, options);
}

Status prepare_max_unpool(int nd, const TensorView& values, const TensorView& indices,
                          const TensorView& output, const UnpoolOptions& options,
                          PreparedCall* call) {
  return prepare_op<MaxUnpool>(nd, values, indices, output, options, call);
}

}  // namespace poolgen
