// max_pool: validate, choose a kernel for the input's device, layout and types, call it.
#include "conventions/onnx_windows.hpp"
#include "conventions/first_tap.hpp"
#include "conventions/index_formats.hpp"
#include "dispatch/cuda.hpp"
#include "dispatch/kernel_table.hpp"
#include "dispatch/launch.hpp"
#include "execute/memory.hpp"
#include "execute/staging.hpp"
#include "ops/op.hpp"
#include "parallel/settings.hpp"
#include "validate/views.hpp"
#include "validate/window.hpp"

#include <memory>

namespace poolgen {

using namespace detail;

namespace {

// Checks everything that depends only on shapes and options.
Status plan_shapes(int nd, const Ints& input_shape, const PoolOptions& options, Window* window,
            Ints* output_shape) {
  POOLGEN_RETURN_IF_ERROR(pool_window(nd, options, window));
  POOLGEN_RETURN_IF_ERROR(check_input_shape("max_pool", nd, "input", input_shape));
  return pool_output_shape(window, input_shape, output_shape);
}

struct PoolPlan : OpPlan {  // views: input, values, indices
  Window window;
  Ints output_shape;
  KernelQuery query{};  // what chose `kernel`, but its window (the call's copies move)
  bool match_window = false;  // whether the query takes the window (fixed-window kernels)
  bool empty_windows = false;  // ONNX Runtime's answer to write for windows with no tap inside
  // ONNX Runtime's negative SAME padding: the kernel runs on the input less crop[i] leading
  // elements per spatial dimension, with kernel_window (that padding 0); else kernel_window is
  // the window.
  bool cropped = false;
  int64_t crop[3] = {};
  Window kernel_window;
  bool passes = false;  // other frameworks' rules: passes over the kernel's results (host)
  const Kernel* kernel = nullptr;
  // The kernel over flat planes (Op::pool_flat) where it serves the input's planes: it runs
  // instead of `kernel` where the views allow (flat_kernel).
  const Kernel* flat = nullptr;
};

// Everything about a call but its outputs' views, the data and the kernel: shapes, types.
[[gnu::cold]]
Status prepare(int nd, const TensorView& input, DType index_dtype, const PoolOptions& options,
               PoolPlan* plan) {
  POOLGEN_RETURN_IF_ERROR(plan_shapes(nd, input.shape, options, &plan->window,
                                      &plan->output_shape));
  int dim = 0;
  if (has_empty_windows(plan->window, input.shape, plan->output_shape, &dim)) {
    // Refused before anything is written: only ONNX Runtime defines them in every format.
    if (options.pool_rule == PoolRule::tensorflow) {
      return fail(Code::invalid_argument, "padding", ": expected every window to hold a tap ",
                  "inside the input with pool_rule tensorflow, got windows with none in spatial ",
                  "dimension ", dim);
    }
    // PyTorch's index for them (the first tap's) only plane offsets carry; a window format's
    // index is a tap's.
    if ((options.pool_rule == PoolRule::pytorch && options.index_format != IndexFormat::plane) ||
        options.index_format == IndexFormat::window) {
      return fail(Code::invalid_argument, "index_format", ": expected ",
                  options.pool_rule == PoolRule::pytorch ? "plane offsets" : "another format",
                  " where windows hold no tap inside the input (spatial dimension ", dim,
                  ") with pool_rule ", static_cast<int>(options.pool_rule),
                  ", which has no index for them in it, got ",
                  index_format_name(options.index_format));
    }
    plan->empty_windows = options.pool_rule == PoolRule::onnx_runtime;
  }
  plan->kernel_window = plan->window;
  for (int i = 0; i < nd; ++i) {
    if (plan->window.padding[i] >= 0) continue;
    plan->cropped = true;
    plan->crop[i] = -plan->window.padding[i];
    plan->kernel_window.padding[i] = 0;
  }
  return check_leading_view("input", input, input.shape, nd, index_dtype,
                            spatial_elements(nd, input.shape), &plan->views[0]);
}

// A call whose window spans leading spatial dimensions of extent 1 with one tap runs one rank
// lower (unit_leading_dims): 1-D pooling as frameworks hand it over, 2-D on (N, C, 1, L), took
// the general kernel. The views the plan has (describe's: the input's alone) and the kernel's
// window lose those dimensions.
void drop_unit_dims(PoolPlan* plan) {
  const int count = unit_leading_dims(plan->kernel_window, plan->views[0].shape + 2);
  if (count == 0) return;
  plan->kernel_window = without_leading_dims(plan->kernel_window, count);
  for (View& view : plan->views) {
    if (view.rank > 0) view = without_dims(view, 2, count);  // rank 0: a view not yet made
  }
}

// The kernel for the input's device, layout and types (after the arguments are known valid, so
// that a malformed call is reported as such even when the build lacks its dtype).
[[gnu::cold]] Status choose(const TensorView& input, DType index_dtype, const PoolOptions& options,
              PoolPlan* plan) {
  plan->device = call_device(options.device, input);
  int capability = 0;
  if (plan->device == Device::cuda) POOLGEN_RETURN_IF_ERROR(cuda_capability(&capability));
  // Other frameworks' rules are passes over the results, on the host.
  plan->passes = options.max_rule != MaxRule::any_nan ||
                 options.index_format != IndexFormat::plane || plan->empty_windows ||
                 plan->cropped;
  // The passes work on the call's own rank.
  if (!plan->passes && plan->device == Device::cpu) drop_unit_dims(plan);
  const int nd = plan->kernel_window.nd;
  plan->match_window = options.path == Path::automatic;
  plan->query = {Op::pool, nd,           layout_of(plan->views[0]), input.dtype, index_dtype,
                 nullptr,  plan->device, capability};
  KernelQuery query = plan->query;
  if (plan->match_window) query.window = &plan->kernel_window;
  POOLGEN_RETURN_IF_ERROR(choose_kernel(forward_kernels(), query, "input", &plan->kernel));
  // Small square planes under PyTorch's rules, which the fixed window's kernel serves: the
  // kernel over flat planes where the build has one for them. Its outputs are floor_mode's (an
  // odd side's ceil_mode gives the same; k2s2p0's overhanging windows never reach a fixed one).
  const View& in = plan->views[0];
  const bool floor_outputs = !plan->kernel_window.ceil_mode || in.shape[3] % 2;
  if (plan->kernel->kernel != 0 && nd == 2 && !plan->passes && plan->device == Device::cpu &&
      plan->query.layout == Layout::contiguous && in.shape[2] == in.shape[3] && floor_outputs &&
      flat_planes_served(in.shape[3], in.shape[0] * in.shape[1], index_dtype,
                         plan->kernel->kernel)) {
    query.op = Op::pool_flat;
    plan->flat = find_kernel(forward_kernels(), query);
  }
  return {};
}

// A packed view as one dimension over every element, (1, 1, elements), as a kernel over flat
// planes takes its input and outputs (flat_kernel).
View flat_view(const View& v) {
  View flat = v;
  flat.rank = 3;
  flat.shape[0] = flat.shape[1] = 1;
  flat.shape[2] = v.elements();
  flat.strides[0] = flat.strides[1] = flat.shape[2];
  flat.strides[2] = 1;
  return flat;
}

// The kernel that runs on `views` (input, values, indices; in the kernel's layout): the plan's
// kernel over flat planes where it has one and every view is packed (one run of memory each),
// else its kernel.
const Kernel& flat_kernel(const PoolPlan& plan, const Views& views) {
  const bool flat = plan.flat && is_packed(views[0], Layout::contiguous) &&
                    is_packed(views[1], Layout::contiguous) &&
                    is_packed(views[2], Layout::contiguous);
  return flat ? *plan.flat : *plan.kernel;
}

// The bytes that decide how many threads a pooling call runs on (sharing_threads). Channels-last
// pooling moves its bytes about twice as fast as the other ops (90 against 35-50 GB/s on one
// thread of the 2-core VM), so it counts half of them: counted whole, f32 1x64x20x20 took 2.26
// us on two threads against 2.0 on one (docs/kernels.md, "Threads").
int64_t sharing_bytes(const Kernel& kernel, const Views& views) {
  return total_bytes(views) / (kernel.layout == Layout::channels_last ? 2 : 1);
}

// A pooling kernel's launch with `window` on views (input, values, indices) in its layout. A
// kernel over flat planes (fixed window) takes every view flat and the planes' side.
struct PoolLaunch : Launch {
  PoolLaunch(const Kernel& kernel, const Window& window, const Views& views) : Launch(kernel) {
    const bool flat = kernel.op == Op::pool_flat;
    add_view(flat ? flat_view(views[0]) : views[0], kernel.value, Access::read);
    if (flat) {
      add_int32(static_cast<int32_t>(views[0].shape[3]));  // a served side
    } else {
      add_window(window);
      if (kernel.prefetches) add_flag(prefetch_pays(total_bytes(views)));
    }
    add_view(flat ? flat_view(views[1]) : views[1], kernel.value, Access::write);
    add_view(flat ? flat_view(views[2]) : views[2], kernel.index, Access::write);
    fit_variant(views[1]);
  }
};

Status run_pool(const Kernel& kernel, const Window& window, const Views& views) {
  return PoolLaunch(kernel, window, views).run(sharing_bytes(kernel, views));
}

// Planes too large for a kernel's buffers (one, or one image's in channels-last): runs of output
// rows (the outermost spatial dimension) with the input rows their windows reach, each run with
// the padding its first window sees; its indices, offsets from the run's first input row, are
// shifted to the plane's.
[[gnu::cold]] Status pool_rows(const PoolPlan& call, const Views& plane) {
  const Window& w = call.kernel_window;
  const View &in = plane[0], &values = plane[1], &indices = plane[2];
  const int64_t s = w.stride[0], pad = w.padding[0];
  const int64_t span = w.dilation[0] * (w.kernel[0] - 1) + 1, rows = in.shape[2];
  // Output rows [first, first + count) read input rows [top, bottom).
  auto run_of = [&](int64_t first, int64_t count, int64_t* top) {
    *top = std::max<int64_t>(0, first * s - pad);
    const int64_t bottom = std::min(rows, (first + count - 1) * s - pad + span);
    return Views{slice(in, 2, *top, bottom - *top), slice(values, 2, first, count),
                 slice(indices, 2, first, count)};
  };
  const Layout layout = call.kernel->layout;
  const int64_t per_run = largest_fitting(values.shape[2], [&](int64_t count) {
    // An interior run (no padding) reads the most input rows.
    return fits_kernel({slice(in, 2, 0, std::min(rows, (count - 1) * s + span)),
                    slice(values, 2, 0, count), slice(indices, 2, 0, count)},
                   layout);
  });
  if (in.device == Device::cuda) {
    return fail(Code::unsupported, "input", ": expected device planes a kernel's buffer holds ",
                "(below 2^31 elements and 2 GiB), got a plane of shape ",
                format_shape(Ints(in.shape + 2, in.shape + in.rank)), " of ",
                dtype_name(in.dtype));
  }
  if (per_run == 0) {
    return fail(Code::unsupported, "input", ": expected planes whose outermost spatial rows fit a ",
                "kernel's buffer (below 2^31 elements and 2 GiB), got a plane of shape ",
                format_shape(Ints(in.shape + 2, in.shape + in.rank)), " of ",
                dtype_name(in.dtype));
  }
  const int64_t row_elements = in.plane() / rows;
  for (int64_t first = 0; first < values.shape[2]; first += per_run) {
    int64_t top = 0;
    const Views run = run_of(first, std::min(per_run, values.shape[2] - first), &top);
    Window local = w;
    local.padding[0] = top - (first * s - pad);
    KernelQuery query = call.query;
    if (call.match_window) query.window = &local;
    const Kernel* kernel = nullptr;
    POOLGEN_RETURN_IF_ERROR(choose_kernel(forward_kernels(), query, "input", &kernel));
    POOLGEN_RETURN_IF_ERROR(run_pool(*kernel, local, run));
    if (top > 0) add_to_indices(run[2], top * row_elements);
  }
  return {};
}

}  // namespace

namespace {

// Other frameworks' rules, passes over the kernel's results (input as the kernel read it, values,
// indices): the NaN rule's rescan, plane offsets of a cropped input moved back to the whole
// input's, ONNX Runtime's windows with no tap, then the index format; all of them over one
// block of planes while it is in cache (for_index_blocks).
[[gnu::cold]] Status apply_other_rules(int nd, const Ints& input_shape, const PoolOptions& options,
                         const PoolPlan& plan, const Views& views) {
  const Window& window = plan.window;
  const bool empty_windows = plan.empty_windows;
  int64_t extents[3], cropped[3];
  for (int i = 0; i < nd; ++i) {
    extents[i] = input_shape[input_shape.size() - nd + i];
    cropped[i] = extents[i] - plan.crop[i];
  }
  const bool batchless = input_shape.size() == static_cast<size_t>(nd) + 1;
  return for_index_blocks(views[2], total_bytes(views), [&](const IndexBlock& b) -> Status {
    const View in = b.of(views[0]), values = b.of(views[1]), block = b.of(views[2]);
    const IndexFormat format = options.index_format;
    if (options.max_rule == MaxRule::first_tap) {
      apply_first_tap_rule(in, values, block, plan.kernel_window);
    }
    if (plan.cropped) uncrop_plane_offsets(block, nd, cropped, plan.crop, extents);
    if (empty_windows) {
      fill_empty_windows(values, block, window, input_shape, format, format != IndexFormat::plane,
                         b.n0, b.c0);
    }
    if (format == IndexFormat::plane) return {};
    POOLGEN_RETURN_IF_ERROR(rewrite_indices(nd, input_shape, &window, block, IndexFormat::plane,
                                            block, format, batchless, b.n0, b.c0));
    if (empty_windows) {
      fill_empty_windows(values, block, window, input_shape, format, false, b.n0, b.c0);
    }
    return {};
  });
}

// A CPU call that runs its kernel once on its views as they are (each in the kernel's layout,
// within its buffers' limits) under PyTorch's rules: the launch, built once, so that a call
// repeating it sets the three data pointers and calls the kernel, without the copies, pieces
// and buffers MaxPool::run decides each time, and checks the overlap with its spans' sizes kept
// (f32 NHWC, one thread: 1x64x2x2 250 -> 140 ns a call, 1x64x7x7 400 -> 280 ns).
class DirectPool : public DirectRun {
 public:
  DirectPool(const Kernel& kernel, const Window& window, const Views& views)
      : DirectRun(KeptSpans(views, 2)),
        launch_(kernel, window, views),
        call_bytes_(sharing_bytes(kernel, views)) {}

  Status run(void* const (&data)[3]) override {
    for (int k = 0; k < 3; ++k) launch_.set_data(k, data[k]);
    return launch_.run(call_bytes_);
  }

 private:
  PoolLaunch launch_;
  int64_t call_bytes_;
};

struct MaxPool {
  using Options = PoolOptions;
  using Plan = PoolPlan;
  static constexpr const char* kNames[3] = {"input", "values", "indices"};
  static constexpr int kOutputs = 2;

  [[gnu::cold]] static Status describe(int nd, const TensorView& input, DType index_dtype,
                         const PoolOptions& options, PoolPlan* plan) {
    POOLGEN_RETURN_IF_ERROR(prepare(nd, input, index_dtype, options, plan));
    return choose(input, index_dtype, options, plan);
  }
  // A call with packed outputs, as the kernel-name queries assume.
  static const Kernel& first_kernel(const PoolPlan& plan) {
    return plan.flat ? *plan.flat : *plan.kernel;
  }

  [[gnu::cold]]
  static Status check(int nd, Tensors tensors, const PoolOptions& options, PoolPlan* plan) {
    const TensorView &input = *tensors[0], &values = *tensors[1], &indices = *tensors[2];
    POOLGEN_RETURN_IF_ERROR(prepare(nd, input, indices.dtype, options, plan));
    // i32 indices must hold what the format gives (prepare checked the plane offsets).
    POOLGEN_RETURN_IF_ERROR(check_index_capacity("indices", indices.dtype, options.index_format,
                                                 nd, input.shape, &plan->window));
    View &in = plan->views[0], &out_values = plan->views[1], &out_indices = plan->views[2];
    POOLGEN_RETURN_IF_ERROR(check_data("input", input, in));
    POOLGEN_RETURN_IF_ERROR(
        check_view("values", values, input.dtype, plan->output_shape, nd, &out_values));
    POOLGEN_RETURN_IF_ERROR(
        check_view("indices", indices, indices.dtype, plan->output_shape, nd, &out_indices));
    POOLGEN_RETURN_IF_ERROR(check_no_overlap("values", out_values));
    POOLGEN_RETURN_IF_ERROR(check_no_overlap("indices", out_indices));
    POOLGEN_RETURN_IF_ERROR(
        check_same_device(in, "input", {{"values", &out_values}, {"indices", &out_indices}}));
    POOLGEN_RETURN_IF_ERROR(check_apart({{"values", &out_values}, {"indices", &out_indices}},
                                        {{"input", &in}}));
    POOLGEN_RETURN_IF_ERROR(choose(input, indices.dtype, options, plan));
    const bool pytorch_rules = !plan->passes;
    if (!pytorch_rules && plan->device != Device::cpu) {
      return fail(Code::unsupported, "max_rule and index_format",
                  ": expected PyTorch's rules on CUDA (any_nan, plane, and windows as PyTorch's ",
                  "kernels compute them), got max_rule ", static_cast<int>(options.max_rule),
                  ", index_format ", index_format_name(options.index_format), " and pool_rule ",
                  static_cast<int>(options.pool_rule));
    }
    // A CPU call under PyTorch's rules that one launch serves as its views are.
    const Kernel& kernel = *plan->kernel;
    if (plan->device == Device::cpu && pytorch_rules && out_values.elements() != 0 &&
        takes_whole({&in, &out_values, &out_indices}, kernel.layout)) {
      plan->direct =
          std::make_unique<DirectPool>(flat_kernel(*plan, {in, out_values, out_indices}),
                                       plan->kernel_window, Views{in, out_values, out_indices});
    }
    return {};
  }

  static Status run(int nd, Tensors tensors, const PoolOptions& options, const PoolPlan& plan,
                    const View (&views)[3]) {
    const View &out_values = views[1], &out_indices = views[2];
    if (out_values.elements() == 0) return {};
    // ONNX Runtime's negative padding: the input its windows reach.
    View in = views[0];
    for (int i = 0; plan.cropped && i < nd; ++i) {
      in = slice(in, 2 + i, plan.crop[i], in.shape[2 + i] - plan.crop[i]);
    }
    const Kernel& kernel = *plan.kernel;
    POOLGEN_RETURN_IF_ERROR(check_device_views(kNames, views, kernel.layout, false));
    const CudaStreamScope stream(plan.device == Device::cuda ? options.cuda_stream : nullptr);
    const Staged staged_in(in, kernel.layout, false, Staged::input);
    const Staged staged_values(out_values, kernel.layout, false, Staged::output);
    const Staged staged_indices(out_indices, kernel.layout, false, Staged::output);
    // Calls too large for one kernel call run in pieces of planes, or of rows of one plane.
    POOLGEN_RETURN_IF_ERROR(for_each_piece(
        {staged_in.view(), staged_values.view(), staged_indices.view()},
        [&](const Views& piece) {
          return fits_kernel(piece, kernel.layout) &&
                 (plan.device != Device::cuda || fits_cuda_grid(piece, kernel.layout));
        },
        [&](const Views& piece, int64_t) {
          return run_pool(flat_kernel(plan, piece), plan.kernel_window, piece);
        },
        [&](const Views& plane, int64_t) { return pool_rows(plan, plane); }));
    staged_values.finish();
    staged_indices.finish();
    if (!plan.passes) return {};
    return apply_other_rules(nd, tensors[0]->shape, options, plan, {in, out_values, out_indices});
  }
};

}  // namespace

Status max_pool_output_shape(int nd, const Ints& input_shape, const PoolOptions& options,
                             Ints* output_shape) {
  Window window;
  return plan_shapes(nd, input_shape, options, &window, output_shape);
}

Status max_pool_kernel_name(int nd, const TensorView& input, DType index_dtype,
                            const PoolOptions& options, std::string* name) {
  return op_kernel_name<MaxPool>(name, nd, input, index_dtype, options);
}

Status max_pool_kernel_name(int nd, const Ints& input_shape, const PoolOptions& options,
                            std::string* name) {
  return max_pool_kernel_name(nd, contiguous(nullptr, DType::f32, input_shape), DType::i64,
                              options, name);
}

Status max_pool(int nd, const TensorView& input, const TensorView& values,
                const TensorView& indices, const PoolOptions& options) {
  return run_op<MaxPool>(nd, input, values, indices, options);
}

Status prepare_max_pool(int nd, const TensorView& input, const TensorView& values,
                        const TensorView& indices, const PoolOptions& options,
                        PreparedCall* call) {
  return prepare_op<MaxPool>(nd, input, values, indices, options, call);
}

}  // namespace poolgen
