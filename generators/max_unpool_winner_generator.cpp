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
#include "flat_planes.h"
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
    const FlatPlanes planes(*values_, l);
    const Expr out_plane = cast(t, output_->dim(spatial_dim(0, l)).extent());
    auto index = [&](const std::vector<Expr>& e) { return (*indices_)(planes.at(e)); };
    auto valid = [&](const Expr& i) { return i >= 0 && i < out_plane; };

    // 1. Winners. The clamp changes no valid slot; it lets Halide bound the stores.
    RDom e = planes.elements("element");
    const std::vector<Expr> ep = planes.pcn(e);
    e.where(valid(index(ep)));
    Expr slot = cast<int32_t>(clamp(index(ep), 0, out_plane - 1));
    winner_(tensor_args<Expr>({p_}, c_, n_, l)) = cast(t, -1);
    const std::vector<Expr> named = planes.at({slot, ep[1], ep[2]});
    winner_(named) = max(winner_(named), cast(t, ep[0]));

    // 2. The gather: nothing named the slot, or its winner's value.
    const std::vector<Expr> here = tensor_args<Expr>({p_}, c_, n_, l);
    Expr w = winner_(here);
    Expr from = cast<int32_t>(clamp(w, 0, cast(t, planes.plane) - 1));
    (*output_)(here) = select(w >= 0, (*values_)(tensor_args<Expr>({from}, c_, n_, l)),
                              cast(value_type, 0));

    // The first invalid element in input order.
    const FirstInvalid invalid(planes, index, valid);
    report_first_invalid(invalid, planes, index, t, *invalid_position_, *invalid_index_);

    const WinnerStages stages{winner_, invalid.first_invalid, *output_, *invalid_position_,
                              *invalid_index_, e, invalid.bad, l};
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
  Func winner_{"winner"};
  Var p_{"p"}, c_{"c"}, n_{"n"};
};

}  // namespace
}  // namespace poolgen

HALIDE_REGISTER_GENERATOR(poolgen::MaxUnpoolWinner, max_unpool_winner)
