// Max pooling with indices: what is computed (docs/semantics.md), never how; the schedule
// lives in schedules/.
#include "Halide.h"
#include "window.h"
#include "cpu_schedules.h"
#include "gpu_schedules.h"
#include "knobs.h"
#include "prefetch_lines.h"

namespace poolgen {
namespace {

using namespace Halide;

class MaxPool : public Generator<MaxPool> {
 public:
  GeneratorParam<int> rank{"rank", 2, 1, 3};
  GeneratorParam<Type> value_type{"value_type", Float(32)};
  GeneratorParam<Type> index_type{"index_type", Int(64)};
  GeneratorParam<Layout> layout{"layout", Layout::contiguous, kLayoutNames};
  FixedWindow fixed_window;

  GeneratorParam<std::string> cpu_schedule{"cpu_schedule", ""};  // knobs.h
  GpuPoolSchedule gpu_knobs;

  void configure() {
    input_ = add_input<Buffer<>>("input", value_type, rank + 2);
    window_.add_to(this, rank, get_target().has_gpu_feature());
    // Where the schedule prefetches (CpuPoolSchedule::prefetch_rows): whether the call moves
    // more bytes than the caches keep (the runtime's prefetch_pays), where alone they run.
    if (!get_target().has_gpu_feature() && sets_knob(cpu_schedule, "prefetch_rows")) {
      out_of_cache_ = add_input<bool>("out_of_cache");
    }
    result_ = add_output<Func>("result", {value_type, index_type}, rank + 2);
  }

  void generate() {
    const int nd = rank;
    const Layout l = layout;
    window_.use_magic(gpu_knobs.gpu_magic);
    std::vector<Window1D> window(nd);
    Region spatial_bounds;
    std::vector<Expr> in_extent(nd);
    for (int i = 0; i < nd; ++i) {
      window[i] = fixed_window.of(window_, i);
      in_extent[i] = input_->dim(spatial_dim(i, l)).extent();
      spatial_bounds.push_back({input_->dim(spatial_dim(i, l)).min(), in_extent[i]});
    }
    // Taps outside the plane read as the lowest value, which never replaces the running max:
    // padding is never selected, and bounds checks vanish from the interior (channels-last CPU
    // kernels skip such taps instead, below). A fixed window
    // without padding lies inside the plane (the runtime sends ceil_mode's overhanging windows
    // to the general kernel), so it reads the input as it is: no bounds tests, no border copies
    // of the loops.
    const bool bounded = !(fixed_window.fixed() && fixed_window.padding == 0);
    const Range unbounded;
    Func padded("padded");
    std::vector<RDom> padded_columns;
    // The hand schedule, which decides how the stages below are defined.
    const std::optional<CpuPoolSchedule> cpu =
        get_target().has_gpu_feature()
            ? std::nullopt
            : hand_written_schedule<CpuPoolSchedule>(cpu_schedule, get_target());
    const bool skips_outside = cpu && bounded && l == Layout::channels_last;
    if (cpu && cpu->stages(bounded, l)) {
      // The boundary condition's values (below), built as a copy for the rows the schedule
      // stages: the lowest value in the columns the windows reach before and past the row, the
      // row between them, and the lowest value across rows outside the plane. A boundary
      // condition's vectors at the row's ends load through clamped indices, which are gathers;
      // the copy's load dense (1x64x28x28 k3s2p1 f32 on AVX2: 43 -> 40 us; docs/kernels.md).
      std::vector<Var> args(rank + 2);
      padded(args) = undef(value_type);
      // Every window starts inside the row or its padding before it (pool_output_shape's rule,
      // runtime/validate/window.cpp), so its taps reach at most its dilated span minus one past the row.
      const Range& row = spatial_bounds[0];
      const Expr before = -window[0].start(0), past = (window[0].kernel - 1) * window[0].dilation;
      std::vector<Expr> at(args.begin(), args.end());
      RDom left(row.min - before, before, "left_padding"),
          right(row.min + row.extent, past, "right_padding"),
          columns(row.min, row.extent, "column"), outside(row.min, row.extent, "column_outside");
      padded_columns = {left, columns, right, outside};
      at[0] = left;
      padded(at) = lowest(value_type);
      std::vector<Expr> from = at;
      Expr row_inside = Internal::const_true();
      at[0] = from[0] = columns;
      for (int i = 1; i < nd; ++i) {
        const Range& b = spatial_bounds[i];
        row_inside = row_inside && args[i] >= b.min && args[i] < b.min + b.extent;
        from[i] = clamp(args[i], b.min, b.min + b.extent - 1);
      }
      // Rows inside the plane are copied, rows outside it filled, in two updates: a branch per
      // row rather than a select per vector, which AVX-512 compiles to a masked load (a blend
      // from memory under the row's mask), and on Zen 5 masked loads that miss the caches run
      // at memory latency (docs/kernels.md, "Rows outside the plane": 2-3x out of cache).
      columns.where(row_inside);
      padded(at) = (*input_)(from);
      at[0] = right;
      padded(at) = lowest(value_type);
      outside.where(!row_inside);
      at[0] = outside;
      padded(at) = lowest(value_type);
    } else if (bounded && !skips_outside) {
      padded = BoundaryConditions::constant_exterior(
          *input_, lowest(value_type), tensor_args(spatial_bounds, unbounded, unbounded, l));
    } else {
      std::vector<Var> args(rank + 2);
      padded(args) = (*input_)(args);
    }

    std::vector<Var> out_vars(nd);
    std::vector<Expr> out_pos(out_vars.begin(), out_vars.end());
    std::vector<Expr> start(nd), taps(nd), tap_step(nd), first(nd);
    Region kernel_extent;
    for (int i = 0; i < nd; ++i) kernel_extent.push_back({0, window[i].kernel});
    RDom r(kernel_extent, "tap");  // r[0] innermost: taps scan in row-major order
    for (int i = 0; i < nd; ++i) {
      start[i] = window[i].start(out_pos[i]);
      tap_step[i] = r[i] * window[i].dilation;
      taps[i] = start[i] + tap_step[i];
      first[i] = window[i].first_in_bounds(out_pos[i]);
    }
    const std::vector<Expr> at = tensor_args(out_pos, c_, n_, l);

    // The running (winner, value, max): the winner is the tap's offset from the window's start
    // inside the plane, the same for every output of a vector, so the scan moves one 32-bit
    // value per tap; it becomes a plane index once, at the end. Planes are below 2^31 elements
    // (the runtime checks). 16-bit floats are compared as the f32 values they widen to (exactly,
    // as PyTorch does; x86 has no 16-bit float arithmetic, which Halide would emulate), and an
    // f16 winner keeps its own bits (a NaN's payload included). A bf16 carries only its f32:
    // PyTorch narrows the f32 maximum back, exact but for a NaN, which gives 0x7fc0
    // (pytorch_nan). The max comes last in the tuple: Halide 21 with strict_float stores tuple
    // elements one by one and lets later ones read earlier ones' new values, so the compared
    // element must be stored last.
    //
    // A window inside the plane (no bounds) starts from its first tap instead of the lowest
    // value: the scan then ends where it would have (a first tap at the lowest value, which
    // nothing replaces, is the first in-bounds tap either way; comparing it with itself replaces
    // it only by itself), and no "nothing won" case is left to select at the end.
    const Type t = value_type;
    const bool widened = t.is_float() && t.bits() == 16, keeps_bits = !t.is_bfloat();
    const Expr none = Int(32).min();
    // A tap as the scan carries it: its offset, its value's bits, the f32 compared.
    auto carried = [&](const Expr& offset, const Expr& value) {
      std::vector<Expr> tap{offset};
      if (keeps_bits) tap.push_back(value);
      if (widened) tap.push_back(cast<float>(value));
      return tap;
    };
    Expr tap;
    if (skips_outside) {
      // Taps outside the plane are skipped rather than read as the lowest value: in
      // channels-last a tap's position is the same for every lane, so the test is one scalar
      // branch (Halide narrows the tap loops by it where it can) instead of a mask broadcast and
      // a select per vector; the general kernels took half the time (docs/kernels.md).
      Expr inside = Internal::const_true();
      std::vector<Expr> promised(nd);
      for (int i = 0; i < nd; ++i) {
        const Expr lo = spatial_bounds[i].min, hi = lo + spatial_bounds[i].extent - 1;
        inside = inside && taps[i] >= lo && taps[i] <= hi;
        promised[i] = unsafe_promise_clamped(taps[i], lo, hi);  // for bounds inference
      }
      r.where(inside);
      tap = (*input_)(tensor_args(promised, c_, n_, l));
    } else {
      tap = padded(tensor_args(taps, c_, n_, l));
    }
    // The winner of an earlier tap (or run of taps) and a later one: the later where its max is
    // greater, or NaN. The scan's step and the tree's node.
    auto combine = [&](const std::vector<Expr>& earlier, const std::vector<Expr>& later) {
      const Expr wins = later_wins(earlier.back(), later.back());
      std::vector<Expr> winner(later.size());
      for (size_t k = 0; k < later.size(); ++k) {
        winner[k] = select(wins, later[k], earlier[k]);
      }
      return winner;
    };
    Func scan("scan");
    // A fixed window always has a tap in the plane (the runtime sends ceil_mode's overhanging
    // windows to the general kernel), so the scan can start from its first in-bounds tap's
    // offset with the lowest value: where no tap wins, that is the index, with no "none" to
    // select at the end between two 64-bit indices (NHWC k3s2p1: 0.85-0.92x the time).
    const bool fixed = fixed_window.fixed();
    Expr nothing_won = none;
    if (fixed) {
      std::vector<Expr> first_step(nd);
      for (int i = 0; i < nd; ++i) first_step[i] = first[i] - start[i];
      nothing_won = flat_offset(first_step, in_extent, Int(32));
    }
    const std::vector<Expr> init = bounded ? carried(nothing_won, lowest(t))
                                           : carried(0, padded(tensor_args(start, c_, n_, l)));
    if (cpu && fixed && !skips_outside && t.is_float()) {
      // A fixed window of floats on the CPU: the taps combine as a balanced tree of adjacent
      // runs rather than one after another. The combine (the later run wins where its max is
      // greater or NaN) is associative, so the tree gives the scan's winner: the last NaN, else
      // the first maximum. A float scan is a chain of dependent compares, NaN tests and blends,
      // tap after tap, that the CPU waits on; the tree's depth is the log of its taps. Integers
      // compare in one instruction, and kept the scan: u8 measured 6-8% slower as a tree.
      std::vector<std::vector<Expr>> runs;
      if (bounded) runs.push_back(init);  // taps equal to the lowest value never replace it
      for_each_tap(nd, fixed_window.kernel, [&](const std::vector<int>& offset) {
        std::vector<Expr> step(offset.begin(), offset.end()), position(nd);
        for (int i = 0; i < nd; ++i) position[i] = start[i] + offset[i];
        runs.push_back(carried(flat_offset(step, in_extent, Int(32)),
                               padded(tensor_args(position, c_, n_, l))));
      });
      while (runs.size() > 1) {
        std::vector<std::vector<Expr>> combined;
        for (size_t i = 0; i + 1 < runs.size(); i += 2) {
          combined.push_back(combine(runs[i], runs[i + 1]));
        }
        if (runs.size() % 2) combined.push_back(runs.back());
        runs = combined;
      }
      scan(at) = Tuple(runs[0]);
    } else {
      scan(at) = Tuple(init);
      std::vector<Expr> current(init.size());
      for (size_t k = 0; k < init.size(); ++k) current[k] = scan(at)[k];
      scan(at) = Tuple(combine(current, carried(flat_offset(tap_step, in_extent, Int(32)), tap)));
    }

    // No tap won (all lowest, or none in bounds): the index is the first in-bounds tap's, which
    // may lie past the plane (general windows). A window with a tap in the plane has its
    // offsets in 32 bits (planes are below 2^31 elements), widened to the index type last.
    Expr winner = scan(at)[0], index;
    if (bounded && !fixed) {
      index = select(winner == none, flat_offset(first, in_extent, index_type),
                     flat_offset(start, in_extent, index_type) + cast(index_type, winner));
    } else {
      index = cast(index_type, flat_offset(start, in_extent, Int(32)) + winner);
    }
    Expr value = scan(at)[1];
    if (!keeps_bits) value = select(is_nan(value), pytorch_nan(t, value), cast(t, value));
    (*result_)(at) = Tuple(value, index);

    Expr unit_dilation = Internal::const_true();
    for (int i = 0; i < nd; ++i) unit_dilation = unit_dilation && window[i].dilation == 1;
    const PoolStages stages{*result_, scan, padded, padded_columns, bounded, out_vars, c_, n_, l,
                            r, fixed, fixed ? Expr() : window[0].stride,
                            fixed ? Expr() : unit_dilation, ImageParam(*input_).parameter()};
    if (get_target().has_gpu_feature()) {
      gpu_knobs.apply(stages, get_target());
    } else {
      set_estimates();
      apply_cpu_schedule<CpuPoolSchedule>(cpu_schedule, stages, {*result_}, get_target());
    }
  }

  // The schedule's prefetches of input rows (CpuPoolSchedule::prefetch_rows), each line, on
  // calls out of cache only.
  void schedule() {
    if (out_of_cache_) {
      get_pipeline().add_custom_lowering_pass(
          new PrefetchEveryLine(get_target(), Expr(*out_of_cache_)));
    }
  }

  // For the autoschedulers: the benchmark's shape and a kernel 3, stride 2, padding 1 window.
  void set_estimates() {
    for (int i = 0; i < rank; ++i) {
      window_.kernel[i]->set_estimate(3);
      window_.stride[i]->set_estimate(2);
      window_.padding[i]->set_estimate(1);
      window_.dilation[i]->set_estimate(1);
    }
    input_->set_estimates(representative_region(rank, layout));
    result_->set_estimates(representative_region(rank, layout, 2));
  }

 private:
  Input<Buffer<>>* input_ = nullptr;
  WindowInputs window_;
  Input<bool>* out_of_cache_ = nullptr;
  Output<Func>* result_ = nullptr;
  Var c_{"c"}, n_{"n"};
};

}  // namespace
}  // namespace poolgen

HALIDE_REGISTER_GENERATOR(poolgen::MaxPool, max_pool)
