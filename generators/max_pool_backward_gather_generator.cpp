// Any window's gather by index (CUDA's: no atomics, one thread per input position), for two ops:
// - max pooling's backward (accumulate): position x of the pooling input sums the gradients of
//   the outputs whose windows cover it and whose index names it, in ascending output order and
//   in the value type's arithmetic (add_in_type). That is the scatter's order of additions
//   (max_unpool_scatter with accumulate: outputs in order, each added to the slot its index
//   names), so the two agree bit for bit;
// - max unpooling (accumulate=false): slot x takes the value of the last such output, else 0:
//   the winner's rule (max_unpool_winner: the largest position naming the slot wins), with no
//   pass over per-slot winners. Values are moved, not computed: value_type sets the width.
// Both hold while every index lies in its own output's window, as max_pool's indices do.
//
// An index that does not (an in-plane index outside its output's window, which only a caller's
// own indices can hold) would be missed: outside_window counts them, and the runtime then runs
// the scatter (or the winner) instead. An index outside the plane (an empty window's) names no
// position: pooling's backward drops it, as the scatter does; unpooling counts it, so that the
// winner reports it.
//
// Output o covers x in a dimension when 0 <= x + padding - o * stride <= (kernel - 1) * dilation:
// the outputs lo..hi with lo = ceil((x + padding - span) / stride), hi = floor((x + padding) /
// stride), at most span / stride + 1 of them (span = (kernel - 1) * dilation).
#include "Halide.h"
#include "window.h"
#include "gpu_schedules.h"

namespace poolgen {
namespace {

using namespace Halide;

class MaxPoolBackwardGather : public Generator<MaxPoolBackwardGather> {
 public:
  GeneratorParam<int> rank{"rank", 2, 1, 3};
  GeneratorParam<Type> value_type{"value_type", Float(32)};
  GeneratorParam<Type> index_type{"index_type", Int(64)};
  GeneratorParam<Layout> layout{"layout", Layout::contiguous, kLayoutNames};
  GeneratorParam<bool> accumulate{"accumulate", true};  // false: max_unpool's gather
  FixedWindow fixed_window;  // constants divide and multiply by shifts and adds

  GpuPoolGatherSchedule gpu_knobs;

  void configure() {
    grad_output_ = add_input<Buffer<>>("grad_output", value_type, rank + 2);
    indices_ = add_input<Buffer<>>("indices", index_type, rank + 2);
    // As max_pool's; on GPUs also the magic pairs of the input's spatial extents (the check's
    // divisors).
    const bool gpu = get_target().has_gpu_feature();
    window_.add_to(this, rank, gpu);
    if (gpu) extent_magic_.add_to(this, "extent", rank);
    grad_input_ = add_output<Buffer<>>("grad_input", value_type, rank + 2);
    outside_window_ = add_output<Buffer<>>("outside_window", Int(32), 0);
  }

  void generate() {
    const int nd = rank;
    const Layout l = layout;
    const Type t = index_type;
    window_.use_magic(gpu_knobs.gpu_magic);
    extent_magic_.used = gpu_knobs.gpu_magic;
    std::vector<Expr> in_extent(nd), out_extent(nd), span(nd);
    Region candidates, outputs;
    std::vector<Window1D> window(nd);
    for (int i = 0; i < nd; ++i) {
      window[i] = fixed_window.of(window_, i);
      in_extent[i] = grad_input_->dim(spatial_dim(i, l)).extent();
      out_extent[i] = grad_output_->dim(spatial_dim(i, l)).extent();
      span[i] = (window[i].kernel - 1) * window[i].dilation;
      candidates.push_back({0, window[i].stride_divisor.divide(span[i]) + 1});
      outputs.push_back({0, out_extent[i]});
    }

    // The gather: candidate r (r[0] fastest, so outputs come in row-major order) of position x.
    std::vector<Var> x(nd);
    RDom r(candidates, "candidate");
    std::vector<Expr> o(nd), at(nd);
    Expr covers = Internal::const_true();
    for (int i = 0; i < nd; ++i) {
      const Expr reach = x[i] + window[i].padding;  // non-negative, as the numerators below
      const Divisor& stride = window[i].stride_divisor;
      o[i] = stride.divide(max(0, reach - span[i]) + window[i].stride - 1) + r[i];
      covers = covers && o[i] <= min(out_extent[i] - 1, stride.divide(reach));
      at[i] = clamp(o[i], 0, out_extent[i] - 1);  // changes no covering output; bounds the loads
    }
    const std::vector<Expr> here(x.begin(), x.end());
    r.where(covers && (*indices_)(tensor_args(at, c_, n_, l)) == flat_offset(here, in_extent, t));
    sum_(tensor_args(here, c_, n_, l)) = cast(value_type, 0);
    const Expr covering = (*grad_output_)(tensor_args(at, c_, n_, l));
    sum_(tensor_args(here, c_, n_, l)) =
        accumulate ? add_in_type(sum_(tensor_args(here, c_, n_, l)), covering) : covering;
    (*grad_input_)(tensor_args(here, c_, n_, l)) = sum_(tensor_args(here, c_, n_, l));

    // The check: outputs whose index lies in the plane but outside their window (unpooling: or
    // outside the plane).
    RDom e(tensor_args(outputs, Range(0, grad_output_->dim(l == Layout::channels_last ? 0 : nd).extent()),
                       Range(0, grad_output_->dim(nd + 1).extent()), l),
           "output");
    // The schedule splits e[0] into blocks whose last one runs past the end under a guard, which
    // Halide's bounds of the where-clause's loads miss: e[0] is clamped (a no-op inside).
    std::vector<Expr> out_at(e.dimensions()), out_pos(nd);
    for (int i = 0; i < e.dimensions(); ++i) out_at[i] = e[i];
    out_at[0] = clamp(e[0], 0, grad_output_->dim(0).extent() - 1);
    for (int i = 0; i < nd; ++i) out_pos[i] = out_at[spatial_dim(i, l)];
    const Expr index = (*indices_)(out_at);
    Expr plane = cast(t, 1);
    for (int i = 0; i < nd; ++i) plane *= cast(t, in_extent[i]);
    const Expr outside = fixed_window.fixed() ? !names_a_tap(window, out_pos, in_extent, index)
                                              : outside_window(window, out_pos, in_extent,
                                                               index, plane);
    // Signed comparisons, not in_range: the window test then simplifies knowing index >= 0
    // (in_range's unsigned one made each i64 CUDA kernel 0.7 KB larger).
    const Expr in_plane = index >= 0 && index < plane;
    const Expr counted = accumulate ? in_plane && outside : !in_plane || outside;
    e.where(counted);
    Func count = *outside_window_;
    count() = 0;
    count() += cast<int32_t>(counted);  // 1 wherever the where-clause lets an output through

    if (get_target().has_gpu_feature()) {
      gpu_knobs.apply({*grad_input_, sum_, count, x, c_, n_, l, e});
    } else {  // the CPU twin (tests): serial, as written
      sum_.compute_at(*grad_input_, x[0]);
    }
  }

 private:
  // Whether an in-plane `index` lies outside output `o`'s window (span (kernel - 1) * dilation
  // per dimension): its coordinates, taken apart by the input's extents, against the window's.
  Expr outside_window(const std::vector<Window1D>& window, const std::vector<Expr>& o,
                      const std::vector<Expr>& in_extent, const Expr& index,
                      const Expr& plane) const {
    Expr rest = cast<int32_t>(clamp(index, 0, plane - 1));  // planes hold below 2^31 elements
    Expr outside = Internal::const_false();
    for (size_t i = 0; i < window.size(); ++i) {
      const Divisor extent = extent_magic_.of(in_extent[i], static_cast<int>(i));
      const Expr tap = extent.remainder(rest) + window[i].padding - o[i] * window[i].stride;
      rest = extent.divide(rest);
      outside = outside || tap < 0 || tap > (window[i].kernel - 1) * window[i].dilation;
    }
    return outside;
  }

  // A fixed window's test, with no division: whether `index` is the plane offset of one of
  // output o's taps inside the plane (k^nd comparisons).
  static Expr names_a_tap(const std::vector<Window1D>& window, const std::vector<Expr>& o,
                          const std::vector<Expr>& in_extent, const Expr& index) {
    const int nd = static_cast<int>(window.size());
    const int k = *Internal::as_const_int(window[0].kernel);
    int taps = 1;
    for (int i = 0; i < nd; ++i) taps *= k;
    Expr named = Internal::const_false();
    for (int tap = 0; tap < taps; ++tap) {
      std::vector<Expr> at(nd);
      Expr inside = Internal::const_true();
      for (int i = 0, rest = tap; i < nd; ++i, rest /= k) {
        at[i] = window[i].start(o[i]) + rest % k;  // dilation 1
        inside = inside && at[i] >= 0 && at[i] < in_extent[i];
      }
      named = named || (inside && index == flat_offset(at, in_extent, index.type()));
    }
    return named;
  }

  Input<Buffer<>>* grad_output_ = nullptr;
  Input<Buffer<>>* indices_ = nullptr;
  WindowInputs window_;
  MagicInputs extent_magic_;
  Output<Buffer<>>* grad_input_ = nullptr;
  Output<Buffer<>>* outside_window_ = nullptr;
  Func sum_{"sum"};
  Var c_{"c"}, n_{"n"};
};

}  // namespace
}  // namespace poolgen

HALIDE_REGISTER_GENERATOR(poolgen::MaxPoolBackwardGather, max_pool_backward_gather)
