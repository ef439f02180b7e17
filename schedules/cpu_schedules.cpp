#include "cpu_schedules.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace poolgen {

using namespace Halide;

namespace {

// Narrow value types would get very wide vectors. Along channels (channels-last) a narrow type
// keeps two vectors of 32-bit winners: each vector there serves a whole tap, and halving it made
// u8 pooling 1.3-2.7x slower. Along rows (contiguous) one vector is the cap: wider ones measured
// no faster and cost 12-22% more code. Pooling's 16-bit floats compare as f32 (`compares_f32`),
// so that a second vector of winners also doubles the f32 vectors of the scan, which then spills:
// one vector each took 0.70-0.88x the time (bf16 NHWC, docs/kernels.md).
int vector_lanes(int knob, const Func& f, const Target& target, Layout layout,
                 bool compares_f32 = false) {
  if (knob > 0) return knob;
  const int vectors_of_winners = layout == Layout::channels_last && !compares_f32 ? 2 : 1;
  return std::min(target.natural_vector_size(f.types()[0]),
                  vectors_of_winners * target.natural_vector_size<int32_t>());
}

// Runs blocks of rows in parallel: the outermost spatial dimension (the channel, in contiguous
// 1-D) is split into blocks of rows_per_task, and the blocks of every plane form one parallel
// loop. Inside a block the spatial dimensions stay plain loops, so boundary conditions on them
// are partitioned away and per-row buffers keep a constant size. The block's row loop is named
// `row`. Given planes_per_task (contiguous only), a task takes that many planes whole, whose
// loop (`plane`) runs outside `row`. Returns the parallel variable.
Var parallel_rows(Stage stage, const std::vector<Var>& spatial, const Var& c, const Var& n,
                  Layout layout, int rows_per_task, const Expr& planes_per_task = Expr()) {
  // Channels-last keeps the channels inside each row: they are the vectors.
  const bool channels_inside = layout == Layout::channels_last;
  const Var outermost = spatial.size() > 1 || channels_inside ? spatial.back() : c;
  Var block("block"), row("row");
  stage.split(outermost, block, row, rows_per_task, TailStrategy::GuardWithIf);
  if (planes_per_task.defined()) {
    Var plane("plane");
    // Guarded, not shifted inwards: two tasks would write the planes they share.
    stage.split(c, c, plane, planes_per_task, TailStrategy::GuardWithIf).reorder(row, plane, block);
  }
  std::vector<Var> fused_dims{block};
  if (spatial.size() > 1 && !channels_inside) fused_dims.push_back(c);
  fused_dims.push_back(n);
  Var fused = block;
  for (size_t i = 1; i < fused_dims.size(); ++i) {
    Var next(fused.name() + "_" + fused_dims[i].name());
    stage.fuse(fused, fused_dims[i], next);
    fused = next;
  }
  stage.parallel(fused);
  return fused;
}

// Vectorizes the innermost dimension of `f` by the widest of lanes, lanes/2, ... down to
// `narrowest` that the output's width allows (so narrow feature maps still get vectors), scalar
// below it (each rung is another copy of the loop). Each of `cases`
// gets its own copy of that ladder first (to let a runtime value become a constant). With
// `short_rows`, rows of one vector, and rows of two (the second shifted back over the first),
// get copies of their own without the column loop and its tail test, which cost small planes a
// sixth of their time. Every specialization names its (innermost) outer column loop `xo`.
// Returns the rows of full vectors outside every case (with short_rows, of more than two).
Stage vectorize_columns(Func f, const Var& x, const Expr& width, int lanes, int narrowest,
                        const Var& xo, const std::vector<Expr>& cases = {},
                        bool short_rows = false) {
  Var xi("xi");
  std::vector<Expr> all_cases = cases;
  all_cases.push_back(Internal::const_true());
  std::optional<Stage> full;
  for (const Expr& when : all_cases) {
    if (short_rows) {
      f.specialize(when && width == lanes).split(x, xo, xi, lanes).vectorize(xi);
      f.specialize(when && width > lanes && width <= 2 * lanes)
          .split(x, xo, xi, lanes, TailStrategy::ShiftInwards).vectorize(xi)
          .split(xo, Var("pair"), xo, 2, TailStrategy::GuardWithIf).unroll(xo);
    }
    for (int w = lanes; w >= narrowest; w /= 2) {
      Stage rung = f.specialize(when && width >= w);
      rung.split(x, xo, xi, w, TailStrategy::ShiftInwards).vectorize(xi);
      if (w == lanes) full = rung;
    }
  }
  f.split(x, xo, xi, 1);
  return *full;
}

// The narrowest rung of vectorize_columns' ladder: 4 lanes with halved vectors, but none
// narrower than the calls another variant takes (handed_off_below); the full vector without.
int narrowest_vector(bool narrow_vectors, int handed_off_below, int lanes) {
  return narrow_vectors ? std::max(4, std::min(handed_off_below, lanes)) : lanes;
}

// The scan's update: the taps loop outside one vector of outputs along `lane` (unrolled when
// the window is fixed).
void scan_taps(Stage update, const Var& lane, const RDom& r, bool unroll) {
  std::vector<VarOrRVar> order{lane};
  for (int i = 0; i < r.dimensions(); ++i) order.push_back(r[i]);
  update.reorder(order).vectorize(lane);
  if (unroll) {
    for (int i = 0; i < r.dimensions(); ++i) update.unroll(r[i]);
  }
}

}  // namespace

void CpuPoolSchedule::read(Knobs& knobs) {
  knobs.take("vector_width", &vector_width);
  knobs.take("rows_per_task", &rows_per_task);
  knobs.take("stage_rows", &stage_rows);
  knobs.take("partition_rows", &partition_rows);
  knobs.take("narrow_vectors", &narrow_vectors);
  knobs.take("channel_vectors", &channel_vectors);
  knobs.take("channel_vectors_below", &channel_vectors_below);
  knobs.take("short_rows", &short_rows);
  knobs.take("exact_rows", &exact_rows);
  knobs.take("handed_off_below", &handed_off_below);
  knobs.take("prefetch_rows", &prefetch_rows);
}

void CpuPoolSchedule::apply(const PoolStages& s, const Target& target) const {
  Func result = s.result, scan = s.scan;
  const Type value = result.types()[0];
  const int lanes = vector_lanes(vector_width, result, target, s.layout,
                                 value.is_float() && value.bits() == 16);
  const bool channels_last = s.layout == Layout::channels_last;
  const OutputImageParam out = result.output_buffers()[0];
  Var xo("xo");
  Expr narrow;  // where vectors run across planes (below)
  // Planes of fewer rows than a task share one (2-D, where no rows are staged: staging slides
  // along the rows of one plane). In 3-D, whose tasks hold depth slices, the plane loop cost
  // 1.3 KB a variant.
  const bool staged = stages(s.bounded, s.layout);
  Expr planes_per_task;
  if (!channels_last && s.x.size() == 2 && !staged) {
    planes_per_task = max(rows_per_task / max(out.dim(1).extent(), 1), 1);
  }
  // Rows narrower than a vector, each width in a copy whose vector spans it exactly, ahead of
  // the specializations below (which are checked in order); none for the widths this variant
  // hands to another (handed_off_below).
  const Expr width = out.dim(0).extent();
  const int exact_from = exact_rows > 0 && !channels_last ? std::max(exact_rows, handed_off_below)
                                                           : lanes;
  for (int w = exact_from; w < lanes; ++w) {
    Stage exact = result.specialize(width == w);
    Var xi("xi");
    exact.split(s.x[0], xo, xi, w).vectorize(xi);
    parallel_rows(exact, s.x, s.c, s.n, s.layout, rows_per_task, planes_per_task);
  }
  // Rows of contiguous planes too narrow for any vector of the ladder below (a 7x7 plane pools
  // to rows of 3): a vector of `lanes` planes per output instead, its loads strided by the
  // plane, so no row goes scalar when there are channels enough. Specialized first, so it takes
  // none of the row schedule below. A task is a block of rows of channel_vectors vectors of
  // planes (1-D: channel_vectors vectors of rows): tasks of one vector were too small to pay a
  // second thread's wake-up.
  // The narrowest vector of the ladder along the rows (vectorize_columns).
  const int narrowest_rung = narrowest_vector(narrow_vectors, handed_off_below, lanes);
  const int narrowest = channel_vectors_below > 0 ? channel_vectors_below : narrowest_rung;
  // Rows this variant never gets, or runs in exact vectors, need no vectors across planes (nor
  // may the scan and the staged rows, which the exact rows share, be specialized for them): they
  // run for the widths in [handed_off_below, narrowest) outside [exact_from, lanes), if any.
  const bool across_rows = handed_off_below < std::min(narrowest, exact_from) ||
                           std::max(handed_off_below, lanes) < narrowest;
  if (channel_vectors > 0 && !channels_last && across_rows) {
    // The last vector of planes shifts inwards over its neighbour (guarding it instead tripled
    // the code), which must then be computed by the same task: one task's channels, or whole
    // vectors only.
    const Expr channels = out.dim(s.x.size()).extent();
    narrow = width < narrowest && (width < exact_from || width >= lanes) && channels >= lanes &&
             (channels <= lanes * channel_vectors || channels % lanes == 0);
    Var ci("ci"), cv("cv"), xi("xi");
    // The outer channel keeps c's name, so the loops the staging below names exist here too.
    Stage across = result.specialize(narrow);
    across.split(s.c, s.c, ci, lanes, TailStrategy::ShiftInwards);
    std::vector<VarOrRVar> order{ci, xi, xo};
    if (s.x.size() > 1) {
      across.split(s.c, s.c, cv, channel_vectors, TailStrategy::GuardWithIf);
      order.push_back(cv);
    }
    across.split(s.x[0], xo, xi, 1);
    order.insert(order.end(), s.x.begin() + 1, s.x.end());
    across.reorder(order).vectorize(ci);
    // In 1-D the vectors of rows are the rows parallel_rows blocks.
    parallel_rows(across, s.x, s.c, s.n, s.layout,
                  s.x.size() > 1 ? rows_per_task : channel_vectors);
    scan.specialize(narrow).vectorize(s.c);
    if (scan.has_update_definition()) {
      scan_taps(scan.update().specialize(narrow), s.c, s.r, s.window_fixed);
    }
  }
  Var block = parallel_rows(result, s.x, s.c, s.n, s.layout, rows_per_task, planes_per_task);
  if (!partition_rows) {
    std::vector<VarOrRVar> rows{Var("row")};
    for (size_t i = 1; i + 1 < s.x.size(); ++i) rows.push_back(s.x[i]);
    result.never_partition(rows);
  }
  // Contiguous: vectors of output columns. With runtime windows, a column stride makes every tap
  // a gather (strides 1 and 2 get dense loads), and the first in-bounds tap divides by the
  // dilation (dilation 1 needs no division). Channels-last: vectors of channels, whose loads are
  // dense whatever the window.
  const Var lane = channels_last ? s.c : s.x[0];
  std::vector<Expr> stride_cases;
  if (s.column_stride.defined()) {
    stride_cases = {s.unit_dilation && s.column_stride == 1,
                    s.unit_dilation && s.column_stride == 2, s.unit_dilation};
    if (channels_last) stride_cases = {s.unit_dilation};
  }
  Stage full_rows = vectorize_columns(result, lane, width, lanes, narrowest_rung, xo,
                                      stride_cases, short_rows && !channels_last);
  // Only rows of full vectors prefetch (those of one or two with short_rows do not): narrower
  // rows, which mostly lie in cache, would pay for the flag's test and the bounds every row.
  if (prefetch_rows > 0 && s.input.defined() && s.x.size() > 1) {
    const Var rows = s.x.size() == 2 ? Var("row") : s.x[1];
    full_rows.prefetch(s.input, rows, rows, prefetch_rows, PrefetchBoundStrategy::NonFaulting);
  }

  // The running maximum lives in registers: one vector of outputs, taps looping outside it.
  scan.compute_at(result, xo).vectorize(lane);
  if (scan.has_update_definition()) scan_taps(scan.update(), lane, s.r, s.window_fixed);
  // Without a boundary condition, staging would only copy rows.
  if (staged) {
    // Each output row computes only the input rows it needs that the block has not yet staged.
    Func padded = s.padded;
    padded.store_at(result, block).compute_at(result, Var("row"));
    if (!s.padded_columns.empty()) {
      if (narrow.defined()) {
        // Vectors across planes: the rows are copied channels innermost (lane by lane, each
        // element once), and every tap then loads a dense vector of planes rather than one lane
        // per plane (1x64x14x14 k3s2p1 f32, one thread: 17 -> 8 us; docs/kernels.md).
        const std::vector<Var> args = padded.args();
        const Var channel = args[s.x.size()];
        std::vector<Var> storage{channel};
        storage.insert(storage.end(), args.begin(), args.begin() + s.x.size());
        padded.reorder_storage(storage);
        for (int i = 0; i < int(s.padded_columns.size()); ++i) {
          padded.update(i).specialize(narrow).reorder(channel, s.padded_columns[i].x)
              .vectorize(channel, lanes, TailStrategy::GuardWithIf);
        }
      } else {
        padded.update(0).unscheduled();  // the padding before the row: a column or two
        padded.update(2).unscheduled();  // and past it
      }
      for (int row : {1, 3}) {  // the row inside the plane, and one outside it
        padded.update(row).vectorize(s.padded_columns[row].x, lanes, TailStrategy::GuardWithIf);
      }
    } else {
      padded.vectorize(padded.args()[0], lanes, TailStrategy::RoundUp);
    }
  }
}

namespace {

// Outputs in whole runs of `whole` (whole rows and whole vectors: the runtime calls the kernel
// for such outputs alone, flat_planes_served), whose vectors are unrolled: each vector's rows
// begin at constant lanes. Tasks take whole runs, guarded by run: one copy of a run's code, not
// partitioned. Given runs_per_band, a task's runs go by bands of that many (the loop `band`).
void split_runs(Stage result, const Var& k, int whole, int per_task, int lanes, const Var& task,
                int runs_per_band = 0) {
  Var run("run"), vector("vector"), lane("lane");
  result.split(k, run, vector, whole, TailStrategy::RoundUp)
      .split(vector, vector, lane, lanes)
      .vectorize(lane)
      .unroll(vector)
      .split(run, task, run, per_task / whole, TailStrategy::GuardWithIf)
      .partition(run, Partition::Never)
      .parallel(task);
  if (runs_per_band > 0) {
    Var band("band");
    result.split(run, band, run, runs_per_band, TailStrategy::GuardWithIf)
        .partition(band, Partition::Never);
  }
}

}  // namespace

void CpuFlatPoolSchedule::read(Knobs& knobs) {
  knobs.take("outputs_per_task", &outputs_per_task);
  knobs.take("handed_off_below", &handed_off_below);
  knobs.take("widest_side", &widest_side);
}

void CpuFlatPoolSchedule::apply(const FlatPoolStages& s, const Target& /*target*/) const {
  if (s.padded) {
    apply_padded(s);
    return;
  }
  Func result = s.result, rows = s.rows;
  const int lanes = s.lanes;
  Var task("task"), run("run"), vector("vector"), lane("lane");
  int largest = 0;  // the most elements of `rows` a task computes
  Expr alignment = 1;  // of the rows stage's runs: by odd side, a constant in its specialization
  for (int side : s.sides) {
    const Expr served = s.side == side;  // on the parameter itself: its value then replaces it
    const int out_width = side / 2, row_width = 2 * out_width;
    if (!builds(side, out_width)) continue;
    // Whole planes and whole vectors: no task ends in a guarded vector (whose stride-2 loads go
    // lane by lane).
    const int step = std::lcm(out_width * (side / 2), lanes);
    const int per_task = std::max(outputs_per_task / step, 1) * step;
    if (side % 2 == 0) {
      split_runs(result.specialize(served), s.k, std::lcm(out_width, lanes), per_task, lanes, task);
      continue;
    }
    largest = std::max(largest, 2 * per_task);
    result.specialize(served)
        .split(s.k, task, lane, per_task, TailStrategy::GuardWithIf)
        .vectorize(lane, lanes, TailStrategy::ShiftInwards)
        .parallel(task);
    // The rows stage's vectors pick their rows (FlatPoolStages), over runs of whole planes and
    // whole vectors: unrolled, each vector's row breaks and rows' shifts are constants.
    const int run_rows = std::lcm(row_width * out_width, lanes);
    alignment = select(served, run_rows, alignment);
    rows.specialize(served)
        .split(s.j, run, vector, run_rows, TailStrategy::RoundUp)
        .split(vector, vector, lane, lanes)
        .vectorize(lane)
        .unroll(vector);
  }
  result.specialize_fail("max_pool_flat: planes of a side it was not built for");
  if (largest == 0) return;  // even sides alone: no rows
  // Aligned to whole runs (a task's first element begins one: tasks are whole planes and
  // vectors of outputs, and the runtime calls it for whole tasks' worth of planes alone); the
  // task's buffer sized at compile time, so that it lives on the stack.
  rows.compute_at(result, task).align_bounds(s.j, alignment).bound_storage(s.j, largest);
}

// k3s2p1: tasks of whole runs of lcm(out_width, lanes) outputs, whose vectors are unrolled: the
// lanes of a padding column are then constants. A task computes the stage's whole planes that
// its outputs read (from the plane of the row before its first), a row at a time (vectors
// within the row, the last one shifted inwards where a row is not a multiple of them). Where a
// task would hold fewer than 4 planes (the plane before its first would cost more than a
// quarter), an even side's stage goes by bands of output rows instead, each with the row before
// it, in buffers of about kBandBytes: used right after they are written, they stay in L1
// (1x64x112x112 on the Zen 4 VM, f32 i64, against the row kernel: bands of 4 KB 0.64-0.78x its
// time, of 16 KB 0.75-0.83x; out of cache, 8x64x112x112, 0.96-1.2x and 1.2-1.4x, measured
// again later 0.99-1.01x with bands of 4 KB: docs/kernels.md).
void CpuFlatPoolSchedule::apply_padded(const FlatPoolStages& s) const {
  constexpr int kBandBytes = 4 << 10;  // about a band's stage, each of its two buffers
  constexpr int kSlotBytes = 4;        // a slot of either: f32 or i32
  Func result = s.result, columns = s.columns;
  const int lanes = s.lanes;
  Var task("task"), band("band"), plane("plane"), row("row"), slot("slot");
  int most_slots = 0;  // of the stage, in a band
  Expr width = 1;      // of the stage's planes or rows: by side, a constant in its specialization
  for (int side : s.sides) {
    const Expr served = s.side == side;
    const int out_width = (side + 1) / 2, whole = std::lcm(out_width, lanes);
    if (!builds(side, out_width)) continue;
    int per_task = std::max(outputs_per_task / whole, 1) * whole;
    const int row_slots = 2 * out_width, plane_slots = out_width * row_slots;
    int band_outputs = per_task;  // a task's: the stage of whole planes
    const bool by_rows = per_task < 4 * out_width * out_width && side % 2 == 0;
    if (by_rows) {
      const int rows_per_run = whole / out_width;
      const int band_rows = std::max(kBandBytes / (row_slots * kSlotBytes) - 2, rows_per_run) /
                            rows_per_run * rows_per_run;
      band_outputs = band_rows * out_width;
      per_task = std::max(per_task / band_outputs, 1) * band_outputs;
      most_slots = std::max(most_slots, (band_rows + 2) * row_slots);
      width = select(served, row_slots, width);
    } else {
      most_slots = std::max(most_slots, (per_task / (out_width * out_width) + 3) * plane_slots);
      width = select(served, plane_slots, width);
    }
    split_runs(result.specialize(served), s.k, whole, per_task, lanes, task, band_outputs / whole);
    int row_lanes = lanes;  // no wider than the row
    while (row_lanes > row_slots) row_lanes /= 2;
    Stage stage = columns.specialize(served);
    if (!by_rows) stage.split(s.j, plane, row, plane_slots, TailStrategy::RoundUp);
    stage.split(by_rows ? s.j : row, row, slot, row_slots)
        .vectorize(slot, row_lanes, TailStrategy::ShiftInwards);
    // An odd side's rows unrolled (their clamps and positions constants): 7x7 3.5x faster. Even
    // sides' rows gained 4-9% for 10 KB a variant, not taken. The odd sides' update redoes the
    // last row (a vector a row).
    if (side % 2) {
      stage.unroll(row);
      columns.update().specialize(served).split(s.j, row, slot, 2 * out_width).vectorize(slot);
    }
  }
  result.specialize_fail("max_pool_flat: planes of a side it was not built for");
  // Whole planes or rows, the band's buffer sized at compile time.
  columns.compute_at(result, band).align_bounds(s.j, width).bound_storage(s.j, most_slots);
}

void CpuScatterSchedule::read(Knobs& knobs) {
  knobs.take("vector_width", &vector_width);
  knobs.take("unroll", &unroll);
  knobs.take("scalar_index_bits", &scalar_index_bits);
  knobs.take("prefetch_elements", &prefetch_elements);
  knobs.take("from_first_slot", &from_first_slot);
  knobs.take("prefetch_pixels", &prefetch_pixels);
}

void CpuScatterSchedule::apply(const ScatterStages& s, const Target& target) const {
  // The output comes zeroed (the runtime's pass), so only the scatter is scheduled. Inside a
  // plane it keeps input order: the latest duplicate wins.
  Func out = s.out;
  // from_first_slot: the accumulating scalar loops specialized for outputs whose flat dimension
  // starts at a plane's first slot (every call but a slab's).
  const auto first_slot_copy = [&](Stage stage) {
    if (!s.skips || !from_first_slot) return;
    const int plane_dim = s.layout == Layout::channels_last ? 1 : 0;
    stage.specialize(out.output_buffer().dim(plane_dim).min() == 0);
  };
  if (s.layout == Layout::channels_last && s.skips) {
    out.update().reorder(s.c, s.r);  // a pixel's channels innermost
    if (unroll > 1) {
      Var outer("c_o"), inner("c_i");
      out.update().split(s.c, outer, inner, unroll, TailStrategy::GuardWithIf).unroll(inner);
    }
    if (prefetch_pixels > 0) {  // out of cache only: the generator's flag
      for (const Parameter& read : {s.values, s.indices}) {
        out.update().prefetch(read, s.r, s.r, prefetch_pixels, PrefetchBoundStrategy::NonFaulting);
      }
    }
    first_slot_copy(out.update());
  } else if (s.layout == Layout::contiguous) {
    // One element after another, by design; unrolled, the loop's count and branch are shared.
    if (s.r.dimensions() == 2) {  // whole steps, then the rest (prefetch_elements)
      out.update(0).unroll(s.r.x);
      for (const Parameter& read : {s.values, s.indices}) {
        out.update(0).prefetch(read, s.r.y, s.r.y, prefetch_elements / unroll,
                               PrefetchBoundStrategy::NonFaulting);
      }
      first_slot_copy(out.update(0));
      out.update(1).unscheduled();
    } else if (unroll > 1) {
      RVar outer("element_o"), inner("element_i");
      out.update().split(s.r, outer, inner, unroll, TailStrategy::GuardWithIf).unroll(inner);
      first_slot_copy(out.update());
    } else {
      out.update().unscheduled();
      first_slot_copy(out.update());
    }
  } else {
    const int lanes = vector_lanes(vector_width, out, target, s.layout);
    out.update().reorder(s.c, s.r).vectorize(s.c, lanes, TailStrategy::GuardWithIf);
  }
}

void CpuGatherSchedule::read(Knobs& knobs) {
  knobs.take("vector_width", &vector_width);
  knobs.take("rows_per_task", &rows_per_task);
  knobs.take("stage_cells", &stage_cells);
  knobs.take("partition_cells", &partition_cells);
  knobs.take("narrow_vectors", &narrow_vectors);
  knobs.take("slot_tile", &slot_tile);
  knobs.take("cell_vectors", &cell_vectors);
  knobs.take("check_groups", &check_groups);
  knobs.take("prefetch_rows", &prefetch_rows);
  knobs.take("whole_rows", &whole_rows);
  knobs.take("handed_off_below", &handed_off_below);
}

void CpuGatherSchedule::apply(const GatherStages& s, const Target& target) const {
  Func out = s.out;
  const int lanes = vector_lanes(vector_width, out, target, s.layout);
  Var block = parallel_rows(out, s.x, s.c, s.n, s.layout, rows_per_task);
  Func marked = s.marked, group_ok = s.group_ok, group_checked = s.group_checked;
  if (!partition_cells) {
    marked.never_partition_all();
    out.never_partition_all();  // before the specializations copy the schedule
  }
  Var xo("xo"), xi("xi");
  const Var lane = s.layout == Layout::channels_last ? s.c : s.x[0];
  const Expr width = out.output_buffer().dim(0).extent();
  // Each block checks the cells it reads once: marks them (vectors), reduces each group of marks
  // (vector reduction), and requires the result (scalar).
  LoopLevel checked_at(out, block);
  // Splits the spatial dimensions from `first` on (the outermost is parallel_rows' block and row
  // by now) into tiles of `tile` slots, after the loops in `inner`: unrolled inside the loop over
  // vectors (`xo`), or around it where `tiles_outside`; returns the outer loops, innermost first.
  const auto tile_dims = [&](Stage full, size_t first, std::vector<VarOrRVar> inner, int tile,
                             bool tiles_outside) {
    std::vector<Var> outer(s.x.begin() + first, s.x.end() - 1);
    outer.push_back(Var("row"));
    if (tiles_outside) inner.push_back(xo);
    for (size_t i = 0; i < outer.size(); ++i) {
      Var t("tile_" + std::to_string(i));
      full.split(outer[i], outer[i], t, tile, TailStrategy::GuardWithIf);
      if (!tiles_outside) full.unroll(t);
      inner.push_back(t);
    }
    if (!tiles_outside) inner.push_back(xo);
    inner.insert(inner.end(), outer.begin(), outer.end());
    full.reorder(inner);
    return outer;
  };
  // Each group is marked and checked right before its slots, at `level`: its marks reuse one
  // block-wide buffer of a group, and its check is a scalar (not allocations sized at run time,
  // which go to the heap).
  const auto check_each_group = [&](const LoopLevel& level) {
    checked_at = level;
    marked.hoist_storage(out, block);
    const std::vector<Var> mark_args = marked.args();
    for (size_t i = 1; i < mark_args.size(); ++i) marked.bound_storage(mark_args[i], 1);
    for (Func f : {group_ok, group_checked}) {
      for (const Var& v : f.args()) f.bound_storage(v, 1);
    }
  };
  const int k = s.cell_slots;
  if (cell_vectors && s.layout == Layout::contiguous && k > 0) {
    // Lanes are cells: each cell's slots are unrolled stride-k stores, which LLVM interleaves
    // into dense ones, and each row of cells is checked right before its slots. Rows of fewer
    // than a vector of cells, or of a partial window, are the scatter's (past the views' bounds,
    // which the plan's bounds query finds; declined by specialize_fail).
    Var xc("xc"), xt("xt"), xci("xci");
    Stage full = out.specialize(width % k == 0 && width >= k * lanes);
    full.split(s.x[0], xc, xt, k, TailStrategy::GuardWithIf)
        .split(xc, xo, xci, lanes, TailStrategy::ShiftInwards)
        .vectorize(xci)
        .unroll(xt);
    if (s.x.size() > 1) {
      check_each_group(LoopLevel(out, tile_dims(full, 1, {xci, xt}, k, whole_rows)[0]));
    } else {  // 1-D: a window is one row's, and the row (parallel_rows' `row`) is the group
      full.reorder(xci, xt, xo);
      check_each_group(LoopLevel(out, Var("row")));
    }
    out.specialize_fail("max_unpool: rows narrower than a vector of windows are the scatter's");
  } else if (narrow_vectors) {
    vectorize_columns(out, lane, width, lanes, narrowest_vector(true, handed_off_below, lanes), xo);
  } else {
    // One loop of full vectors; a narrower row lies past the views' bounds, which the runtime's
    // plan finds in the bounds query, and takes the scatter.
    Stage full = out.specialize(width >= lanes);
    full.split(lane, xo, xi, lanes, TailStrategy::ShiftInwards).vectorize(xi);
    if (slot_tile > 0 && s.layout == Layout::channels_last && s.x.size() > 1) {
      const std::vector<Var> outer = tile_dims(full, 0, {xi}, slot_tile, false);
      // Where the tile is one cell's window, the cell is marked and checked right before its
      // slots (its group is its channels): marking a block's cells in a pass of their own, then
      // its slots in another, took 1.4x the time (docs/kernels.md).
      if (slot_tile == k) check_each_group(LoopLevel(out, outer[0]));
    } else if (check_groups && s.x.size() > 1) {
      // A group is a row of cells (contiguous: the row loop, parallel_rows' "row" in 2-D) or a
      // cell's channels (channels-last: the cell's loop).
      const bool row2d = s.layout == Layout::contiguous && s.x.size() == 2;
      check_each_group(LoopLevel(out, s.layout == Layout::channels_last ? s.x[0]
                                      : row2d                         ? Var("row")
                                                                      : s.x[1]));
      if (row2d && prefetch_rows > 0 && s.source.defined()) {
        full.prefetch(s.source, Var("row"), Var("row"), prefetch_rows,
                      PrefetchBoundStrategy::NonFaulting);
      }
    }
    out.specialize_fail("max_unpool: rows narrower than a vector are the scatter's");
  }
  marked.compute_at(checked_at).vectorize(marked.args()[0], lanes, TailStrategy::Predicate);
  group_ok.compute_at(checked_at);
  group_ok.update().atomic().vectorize(s.along[0], lanes);
  group_checked.compute_at(checked_at);
  if (stage_cells) {
    // Masked tails: rounded-up vectors would read past the last channel (or column), and the
    // plan's bounds query would then leave every width not a multiple of the vector to the
    // scatter.
    Func value = s.value;
    value.compute_at(out, block).vectorize(value.args()[0], lanes, TailStrategy::Predicate);
  }
}

void CpuIndexGatherSchedule::read(Knobs& knobs) {
  knobs.take("vector_width", &vector_width);
  knobs.take("elements_per_task", &elements_per_task);
}

void CpuIndexGatherSchedule::apply(const IndexGatherStages& s, const Target& target) const {
  Func out = s.out;
  const int lanes = vector_lanes(vector_width, out, target, s.layout);
  Var block("block"), chunk("chunk"), inner("inner"), block_c("block_c"), tasks("tasks");
  if (s.layout == Layout::contiguous) {
    // One element at a time, each index checked as it is read (the generator's require), in
    // tasks of elements_per_task elements; planes smaller than that share a task (a runtime
    // split): a task per 7x7 plane paid the task's call, its unfusing divisions and its setup
    // for nine elements. The runtime's parallel hook still hands threads several tasks at a time.
    Var c_block("c_block"), plane("plane");
    const OutputImageParam grad = out.output_buffers()[0];
    const Expr planes_per_task = max(elements_per_task / max(grad.dim(0).extent(), 1), 1);
    out.split(s.p, block, inner, elements_per_task, TailStrategy::GuardWithIf)
        .split(s.c, c_block, plane, planes_per_task, TailStrategy::GuardWithIf)
        .reorder(inner, plane, block, c_block, s.n)
        .fuse(block, c_block, block_c).fuse(block_c, s.n, tasks).parallel(tasks)
        .unroll(inner, 4, TailStrategy::GuardWithIf);
    return;
  }
  // Channels-last: channels are the vectors; a task is a run of one image's pixels, split at the
  // chunks' bounds so that each vector's chunk (and its check) is one, and about
  // elements_per_task elements: fewer chunks where pixels hold more channels than 64 (with four
  // chunks of 512 channels, a 1x512x14x14 image was one task).
  const int most_chunks = std::max(1, elements_per_task / (64 * s.chunk));
  const Expr channels = max(out.output_buffers()[0].dim(0).extent(), 1);
  const Expr chunks_per_task = clamp(elements_per_task / (channels * s.chunk), 1, most_chunks);
  out.vectorize(s.c, lanes, TailStrategy::GuardWithIf)
      .split(s.p, chunk, inner, s.chunk, TailStrategy::GuardWithIf)
      .split(chunk, block, chunk, chunks_per_task, TailStrategy::GuardWithIf)
      .fuse(block, s.n, tasks).parallel(tasks);
  if (Func invalid = s.invalid; invalid.defined()) {
    // A task's flags fit on the stack: one per chunk.
    invalid.compute_at(out, tasks)
        .bound_storage(invalid.args()[0], most_chunks)
        .update().atomic().vectorize(s.in_chunk[0], lanes, TailStrategy::GuardWithIf);
  }
}

void CpuWinnerSchedule::read(Knobs& knobs) { knobs.take("elements_per_task", &elements_per_task); }

void CpuWinnerSchedule::apply(const WinnerStages& s, const Target&) const {
  Func winner = s.winner, first_invalid = s.first_invalid, out = s.out;
  // Setting the slots and gathering into them: plain stores, the images in parallel.
  for (auto [stage, r] : {std::pair{winner.update(0), s.slots}, std::pair{out.update(0), s.outputs}}) {
    stage.parallel(r[2]);
  }
  // Tasks of elements_per_task consecutive elements (in memory order) race on shared slots; the
  // atomic max makes the result independent of who comes first.
  first_invalid.compute_root();
  for (auto [stage, r] : {std::pair{winner.update(1), s.elements},
                          std::pair{first_invalid.update(), s.invalid_elements}}) {
    RVar task("task"), element("element_in_task"), planes("planes"), tasks("tasks");
    stage.atomic().split(r[0], task, element, elements_per_task, TailStrategy::GuardWithIf)
        .fuse(r[1], r[2], planes).fuse(task, planes, tasks).parallel(tasks);
  }
}

}  // namespace poolgen
