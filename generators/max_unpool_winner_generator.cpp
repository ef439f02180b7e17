// Max unpooling, deterministic on any number of threads: the general path on GPUs, where the
// scatter's "latest store wins" would depend on which thread stores last. Two passes:
//   1. for each output slot, the winner is the largest input position (within its plane) among
//      the valid elements whose index names the slot: an atomic max, so the order in which
//      threads arrive does not matter;
//   2. each slot gathers its winner's value, or 0 when nothing names it.
// Invalid indices are never stored through: they only feed the smallest invalid input position
// (an atomic min over the invalid elements alone), which the runtime reads back and reports as
// the scatter does. Planes are flat (the runtime hands dense planes over); values are moved,
// never compared: value_type only sets the element width. The winners are a buffer the runtime
// hands over (scratch: on CUDA from the caller's allocator where one is set).
//
// Gated: the kernel runs only where `always` is set or `gate` (the count of indices the window
// gather in front of it could not serve, on the device) is not 0; otherwise it writes nothing,
// and its report says no index was invalid. So the choice between the gather and the winner
// needs no read of the count on the host.
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
    gate_ = add_input<Buffer<>>("gate", Int(32), 0);
    always_ = add_input<bool>("always");
    output_ = add_output<Buffer<>>("output", value_type, 3);
    // The first invalid element's position in input order ((n * C + c) * P + p, the largest
    // int64 when every index is valid) and its index.
    invalid_position_ = add_output<Buffer<>>("invalid_position", Int(64), 0);
    invalid_index_ = add_output<Buffer<>>("invalid_index", index_type, 0);
    winners_ = add_output<Buffer<>>("winners", index_type, 3);  // the output's shape
  }

  void generate() {
    const Layout l = layout;
    const Type t = index_type;
    const FlatPlanes planes(*values_, l), slots(*output_, l);
    const Expr out_plane = cast(t, output_->dim(spatial_dim(0, l)).extent());
    auto index = [&](const std::vector<Expr>& e) { return (*indices_)(planes.at(e)); };
    // Two signed comparisons, not in_range's one unsigned: measured, in_range moved these
    // kernels' CUDA code by -120 to +343 bytes and bought nothing.
    auto valid = [&](const Expr& i) { return i >= 0 && i < out_plane; };
    const Expr runs = *always_ || (*gate_)() != 0;

    // Every stage writes through an update whose domain the gate closes: a kernel that does not
    // run touches nothing (slot order is the buffers' own, so each store is its own element).
    Func winner = *winners_, out = *output_;
    winner(tensor_args<Expr>({p_}, c_, n_, l)) = undef(t);
    RDom every_slot = slots.elements("slot"), every_output = slots.elements("output_slot");
    every_slot.where(runs);
    every_output.where(runs);
    const std::vector<Expr> slot_at{every_slot[0], every_slot[1], every_slot[2]},
        output_at{every_output[0], every_output[1], every_output[2]};
    winner(slot_at) = cast(t, -1);

    // 1. Winners. The clamp changes no valid slot; it lets Halide bound the stores.
    RDom e = planes.elements("element");
    const std::vector<Expr> ep = planes.pcn(e);
    e.where(runs && valid(index(ep)));
    Expr slot = cast<int32_t>(clamp(index(ep), 0, out_plane - 1));
    const std::vector<Expr> named = planes.at({slot, ep[1], ep[2]});
    winner(named) = max(winner(named), cast(t, ep[0]));

    // 2. The gather: nothing named the slot, or its winner's value.
    out(tensor_args<Expr>({p_}, c_, n_, l)) = undef(value_type);
    const std::vector<Expr> slot_pcn = slots.pcn(every_output);
    Expr w = winner(output_at);
    Expr from = cast<int32_t>(clamp(w, 0, cast(t, planes.plane) - 1));
    out(output_at) = select(w >= 0, (*values_)(planes.at({from, slot_pcn[1], slot_pcn[2]})),
                            cast(value_type, 0));

    // The first invalid element in input order.
    const FirstInvalid invalid(planes, index, valid, runs);
    report_first_invalid(invalid, planes, index, t, *invalid_position_, *invalid_index_);

    const WinnerStages stages{winner,   invalid.first_invalid, out,       *invalid_position_,
                              *invalid_index_, every_slot, e, every_output, invalid.bad, l};
    if (get_target().has_gpu_feature()) {
      gpu_knobs.apply(stages, get_target());
    } else {
      apply_cpu_schedule<CpuWinnerSchedule>(
          cpu_schedule, stages, {out, *invalid_position_, *invalid_index_, winner}, get_target());
    }
  }

 private:
  Input<Buffer<>>* values_ = nullptr;
  Input<Buffer<>>* indices_ = nullptr;
  Output<Buffer<>>* output_ = nullptr;
  Output<Buffer<>>* invalid_position_ = nullptr;
  Input<Buffer<>>* gate_ = nullptr;
  Input<bool>* always_ = nullptr;
  Output<Buffer<>>* invalid_index_ = nullptr;
  Output<Buffer<>>* winners_ = nullptr;
  Var p_{"p"}, c_{"c"}, n_{"n"};
};

}  // namespace
}  // namespace poolgen

HALIDE_REGISTER_GENERATOR(poolgen::MaxUnpoolWinner, max_unpool_winner)
