// Max unpooling, deterministic on any number of threads: the general path on GPUs, where the
// scatter's "latest store wins" would depend on which thread stores last. Two passes:
//   1. for each output slot, the winner is the largest input position (within its plane) among
//      the valid elements whose index names the slot: an atomic max, so the order in which
//      threads arrive does not matter;
//   2. each slot gathers its winner's value, or 0 when nothing names it.
// Invalid indices are never stored through: they only feed the smallest invalid input position
// (an atomic min over the invalid elements alone), which the runtime reads back and reports as
// the scatter does. Planes are flat (the runtime hands dense planes over); values are moved,
// never compared: value_type only sets the element width.
#include "Halide.h"
#include "window.h"
#include "cpu_schedules.h"
#include "gpu_schedules.h"
#include "knobs.h"

namespace poolgen {
namespace {

using namespace Halide;

class MaxUnpoolWinner : public Generator<MaxUnpoolWinner> {
 public:
  GeneratorParam<Type> value_type{"value_type", Float(32)};
  GeneratorParam<Type> index_type{"index_type", Int(64)};
  GeneratorParam<Layout> layout{"layout", Layout::contiguous, kLayoutNames};

  GeneratorParam<std::string> cpu_schedule{"cpu_schedule", ""};  // knobs.h
  GpuWinnerSchedule gpu_knobs;

  void configure() {
    // (plane offset, c, n), or (c, plane offset, n) in channels-last; indices as values
    values_ = add_input<Buffer<>>("values", value_type, 3);
    indices_ = add_input<Buffer<>>("indices", index_type, 3);
    output_ = add_output<Buffer<>>("output", value_type, 3);
    // The first invalid element's position in input order ((n * C + c) * P + p, the largest
    // int64 when every index is valid) and its index.
    invalid_position_ = add_output<Buffer<>>("invalid_position", Int(64), 0);
    invalid_index_ = add_output<Buffer<>>("invalid_index", index_type, 0);
  }

  void generate() {
    const Layout l = layout;
    const Type t = index_type;
    const int channel_dim = l == Layout::channels_last ? 0 : 1, plane_dim = spatial_dim(0, l);
    const Expr channels = values_->dim(channel_dim).extent();
    const Expr in_plane = values_->dim(plane_dim).extent();
    const Expr out_plane = cast(t, output_->dim(plane_dim).extent());

    // Every element, in memory order (neighbouring threads read neighbouring indices), as the
    // RDom's (p, c, n) and the tensors' arguments.
    auto elements = [&](const char* name) {
      return l == Layout::channels_last
                 ? RDom(0, channels, 0, in_plane, 0, values_->dim(2).extent(), name)
                 : RDom(0, in_plane, 0, channels, 0, values_->dim(2).extent(), name);
    };
    // Schedules split r[0] into thread blocks or tasks whose last one runs past the end under a
    // guard, and Halide bounds the where-clauses' loads without it: r[0] is clamped, which changes
    // nothing inside the guard (and an extra update by the last element would be idempotent).
    auto pcn = [&](const RDom& r) {
      Expr r0 = clamp(r[0], 0, (l == Layout::channels_last ? channels : in_plane) - 1);
      return l == Layout::channels_last ? std::vector<Expr>{r[1], r0, r[2]}
                                        : std::vector<Expr>{r0, r[1], r[2]};
    };
    auto at = [&](const std::vector<Expr>& e) { return tensor_args<Expr>({e[0]}, e[1], e[2], l); };
    auto valid = [&](const Expr& index) { return index >= 0 && index < out_plane; };

    // 1. Winners. The clamp changes no valid slot; it lets Halide bound the stores.
    RDom e = elements("element");
    const std::vector<Expr> ep = pcn(e);
    Expr index = (*indices_)(at(ep));
    e.where(valid(index));
    Expr slot = cast<int32_t>(clamp(index, 0, out_plane - 1));
    winner_(tensor_args<Expr>({p_}, c_, n_, l)) = cast(t, -1);
    const std::vector<Expr> named = at({slot, ep[1], ep[2]});
    winner_(named) = max(winner_(named), cast(t, ep[0]));

    // 2. The gather: nothing named the slot, or its winner's value.
    const std::vector<Expr> here = tensor_args<Expr>({p_}, c_, n_, l);
    Expr w = winner_(here);
    Expr from = cast<int32_t>(clamp(w, 0, cast(t, in_plane) - 1));
    (*output_)(here) = select(w >= 0, (*values_)(tensor_args<Expr>({from}, c_, n_, l)),
                              cast(value_type, 0));

    // The first invalid element in input order: the smallest (n * C + c) * P + p among them.
    RDom bad = elements("invalid_element");
    const std::vector<Expr> bp = pcn(bad);
    bad.where(!valid((*indices_)(at(bp))));
    const Expr position = (cast<int64_t>(bp[2]) * channels + bp[1]) * in_plane + bp[0];
    first_invalid_() = Int(64).max();
    first_invalid_() = min(first_invalid_(), position);
    Expr first = first_invalid_();
    const Expr per_image = cast<int64_t>(channels) * in_plane;
    const std::vector<Expr> first_at = {
        cast<int32_t>(clamp(first % in_plane, 0, in_plane - 1)),
        cast<int32_t>(clamp(first / in_plane % channels, 0, channels - 1)),
        cast<int32_t>(clamp(first / per_image, 0, values_->dim(2).extent() - 1))};
    (*invalid_position_)() = first;
    (*invalid_index_)() = select(first == Int(64).max(), cast(t, 0), (*indices_)(at(first_at)));

    const WinnerStages stages{winner_, first_invalid_, *output_, *invalid_position_,
                              *invalid_index_, e, bad, l};
    if (get_target().has_gpu_feature()) {
      gpu_knobs.apply(stages, get_target());
    } else {
      apply_cpu_schedule<CpuWinnerSchedule>(
          cpu_schedule, stages, {*output_, *invalid_position_, *invalid_index_}, get_target());
    }
  }

 private:
  Input<Buffer<>>* values_ = nullptr;
  Input<Buffer<>>* indices_ = nullptr;
  Output<Buffer<>>* output_ = nullptr;
  Output<Buffer<>>* invalid_position_ = nullptr;
  Output<Buffer<>>* invalid_index_ = nullptr;
  Func winner_{"winner"}, first_invalid_{"first_invalid"};
  Var p_{"p"}, c_{"c"}, n_{"n"};
};

}  // namespace
}  // namespace poolgen

HALIDE_REGISTER_GENERATOR(poolgen::MaxUnpoolWinner, max_unpool_winner)
