// Hand-written CPU schedules, kept apart from the algorithms in generators/. Each schedule is a
// set of named knobs, which read() takes from the kernel's `cpu_schedule` GeneratorParam for the
// target being compiled (knobs.h: hand values and tools/tune.py's per-target tunings), and an
// apply() that the generator calls (through apply_cpu_schedule) with the stages it defined.
#pragma once

#include "Halide.h"
#include "knobs.h"
#include "window.h"

#include <optional>
#include <vector>

namespace poolgen {

// Stages of max_pool: result(x..., c, n) = scan(x..., c, n), where scan is the running
// (max, index) updated over the window taps r, or (fixed windows, where no tap is skipped) one
// pure definition combining the taps as a tree.
struct PoolStages {
  Halide::Func result, scan;
  // The input read through the boundary condition (if bounded); where the CPU schedule stages
  // rows (CpuPoolSchedule::stages), built as a copy instead: no pure value, then updates
  // writing the lowest value before the row, the row (rows inside the plane), the lowest value
  // past it, and the lowest value across the row (rows outside the plane).
  Halide::Func padded;
  // The copy's updates' domains: before the row, the row, past it, the row outside the plane
  // (none without a copy).
  std::vector<Halide::RDom> padded_columns;
  bool bounded;         // false: every window lies inside the input, read as it is
  std::vector<Halide::Var> x;  // spatial, innermost first
  Halide::Var c, n;
  Layout layout;  // contiguous: vectors run along x[0]; channels-last: along c
  Halide::RDom r;
  bool window_fixed;            // kernel extents are compile-time constants
  Halide::Expr column_stride;  // the innermost stride when it is a runtime input
  Halide::Expr unit_dilation;  // every dilation is 1, when dilations are runtime inputs
  Halide::Parameter input = {};  // the buffer read, for prefetches (CpuPoolSchedule::prefetch_rows)
};

struct CpuPoolSchedule {
  // Outputs per vector; 0 takes the target's natural width for the value type, at most two
  // vectors of 32-bit winners.
  int vector_width = 0;
  // Output rows (of the outermost spatial dimension; channels in contiguous 1-D) handed to one
  // thread at a time. Halide's thread pool costs microseconds per task, so tasks must be large.
  int rows_per_task = 64;
  // Copy the input rows a block needs into a padded scratch buffer (bounds handled once per
  // row, not once per tap), or read the input through the boundary condition directly. Only
  // where there is a boundary condition (PoolStages::bounded).
  bool stage_rows = true;
  // Let Halide split the row loops (all but the innermost spatial one) into border and interior
  // pieces, so interior rows test no bounds: faster, but in 3-D nine copies of the vector loop.
  bool partition_rows = true;
  // Rows narrower than a vector get halved vectors (down to 4 lanes) before the scalar loop,
  // each width another copy of the loop; false: full vectors and the scalar loop only.
  bool narrow_vectors = true;
  // Contiguous: rows narrower than the narrowest vector above, in tensors of at least a vector
  // of channels, run vectors across channels (a lane per plane; in 1-D, per row) rather than the
  // scalar loop, this many vectors of planes a task; 0: off.
  int channel_vectors = 0;
  // With channel_vectors: rows of fewer outputs than this run across channels (0: those
  // narrower than the narrowest vector). Staged rows are then copied channels innermost, so
  // that every tap loads a dense vector; only the copy and the stores go lane by lane.
  int channel_vectors_below = 0;
  // Contiguous: rows of one or two whole vectors (lanes to 2 x lanes outputs) run without the
  // column loop, each in a copy of its own.
  bool short_rows = false;
  // Contiguous: rows of each width from this one up to a full vector, exclusive, get a copy
  // whose vector spans the row exactly (one dense load per input row, no overlapping or halved
  // vectors), ahead of the vectors across planes and the ladder; 0: none.
  int exact_rows = 0;
  // Vectors narrower than this (contiguous: output rows; channels-last: channels) are another
  // variant's: the runtime runs such calls there (POOLGEN_AVX512_NARROW, variant_for), so this
  // variant's halved vectors stop at this width and it runs no vectors across planes for them,
  // only the scalar loop, should such a call come anyway (0: it serves every width).
  int handed_off_below = 0;
  // The input rows this many output rows ahead are prefetched (0: none): rows of the innermost
  // spatial dimension but one (2-D: of a task's block; 3-D: of one depth slice).
  int prefetch_rows = 0;

  void read(Knobs& knobs);
  void apply(const PoolStages& s, const Halide::Target& target) const;

  // Copies the input rows a block reads into a padded scratch (bounded contiguous windows with
  // stage_rows): the generator then defines PoolStages::padded as that copy, whose in-bounds
  // span loads dense vectors where a boundary condition's clamped vectors at the row ends are
  // gathers.
  bool stages(bool bounded, Layout layout) const {
    return stage_rows && bounded && layout == Layout::contiguous;
  }
};

// Stages of max_pool_flat: result(k, 0, 0), every output element in memory order. Odd sides
// pair rows(2k) and rows(2k + 1), the column-wise winners of each output row's two input rows;
// even sides read the input directly. Both the outputs of even sides and `rows` take their
// input rows by vectors of `lanes`, the generator's own (a vector's first lane names the rows
// its lanes lie in), which every stage vectorizes by.
// k3s2p1 (`padded`) reads columns(j) instead, the column winners of each output row (rows of
// 2 * out_width slots).
struct FlatPoolStages {
  Halide::Func result, rows, columns;
  Halide::Var k, j;
  Halide::Expr side;       // the input planes' (the parameter), a constant in each specialization
  std::vector<int> sides;  // the square input planes served, by side
  int lanes;               // f32 lanes of the target's vectors
  bool padded;             // k3s2p1, else k2s2p0
};

// Each served side is a specialization whose extents are constants, so that the flat positions
// divide by constants. A task is a block of whole planes and whole vectors (outputs_per_task
// outputs rounded down to such blocks, at least one); with odd sides it computes its `rows`
// first. Vectors that pick their rows (both stages of FlatPoolStages::lanes) are unrolled over
// a run of whole rows, whose row breaks then fall at constant lanes.
struct CpuFlatPoolSchedule {
  int outputs_per_task = 1;  // vectors: FlatPoolStages::lanes
  // Sides whose output rows are narrower than this run another variant (the runtime hands
  // them over: POOLGEN_AVX512_NARROW, cmake/PoolgenKernels.cmake), so this one builds none.
  int handed_off_below = 0;
  // Sides above this are built for the variants above the floor alone (the floor's knob: the
  // runtime serves them over flat planes only on CPUs that run one, flat_planes_served); 0: all.
  int widest_side = 0;

  void read(Knobs& knobs);
  void apply(const FlatPoolStages& s, const Halide::Target& target) const;

 private:
  bool builds(int side, int out_width) const {
    return out_width >= handed_off_below && (widest_side == 0 || side <= widest_side);
  }
  void apply_padded(const FlatPoolStages& s) const;
};

// Stages of max_unpool_scatter: out(p, c, n) zeroed, then one update scattering the elements r
// into each plane (channels-last: out(c, p, n)); where the CPU schedule prefetches, r is 2-D
// (an element of a step, the step) and a second update scatters the rest of each plane.
struct ScatterStages {
  Halide::Func out;
  Halide::Var p, c, n;
  Halide::RDom r;
  Halide::RDom slots;  // GPUs: the zeroing update's domain (every slot); undefined on the CPU
  Layout layout;
  bool skips = false;  // dropped elements skipped by a where-clause, in scalar loops only
  // The buffers the scatter reads, for prefetches (CpuScatterSchedule::prefetch_elements).
  Halide::Parameter values = {}, indices = {};
};

// The scatter runs on one group of planes per call, in one thread (the runtime spreads groups
// over its worker threads), so both stages stay serial; the zeroing is vectorized, and in
// channels-last so is the scatter, across the channels of one element (distinct planes).
struct CpuScatterSchedule {
  int vector_width = 0;
  int unroll = 1;  // scalar loops: elements per step (contiguous), channels (channels-last)
  // Channels-last pooling gradient with indices of this many bits: a scalar loop, a pixel's
  // channels innermost, that skips dropped elements rather than vectors of channels that clamp
  // their slots (whose loads, adds and stores go lane by lane anyway); 0: vectors.
  int scalar_index_bits = 0;
  // Contiguous: the values and indices this many elements ahead are prefetched, a step
  // of `unroll` elements at a time (0: none). The loop's stores to scattered slots keep its
  // window too short for the hardware prefetchers to issue the loads it waits on early enough.
  // The generator then steps whole steps in one update (ScatterStages::r 2-D) and the rest in
  // another.
  int prefetch_elements = 0;
  // The accumulating scalar loops (pooling's gradient) get a copy for outputs whose flat
  // dimension starts at a plane's first slot, every call's but a slab's: the slot is then the
  // index itself, and each element goes without the subtraction of the first slot and the
  // 32-bit re-add and widening of its address (contiguous f32 i64: 10 -> 6 instructions).
  bool from_first_slot = false;
  // Channels-last scalar loops: the values and indices of the pixel this many ahead are
  // prefetched, every line, on calls out of cache only (0: none): the kernel then takes the
  // out_of_cache flag, which the runtime sets where prefetch_pays.
  int prefetch_pixels = 0;

  void read(Knobs& knobs);
  void apply(const ScatterStages& s, const Halide::Target& target) const;
};

// Stages of max_unpool_gather: out(x..., c, n) (channels-last: out(c, x..., n)) gathers from
// cells whose window offsets marked(cell) holds; group_ok tells whether every cell of a group
// (along `along`: a row of cells; in channels-last, one cell's channels) lies in its window and
// group_checked requires it; value is the values, clamped at the border (no slot takes a value
// beyond the input).
struct GatherStages {
  Halide::Func out, marked, group_ok, group_checked, value;
  std::vector<Halide::Var> x, cell;  // spatial, innermost first
  Halide::RDom along;  // a group's cells (channels-last: channels)
  Halide::Var c, n;
  Layout layout;
  // The side of the slots a cell alone covers, in every dimension (its window: kernel = stride,
  // no padding); 0 where windows overlap.
  int cell_slots;
  // The input buffer `value` reads, for prefetches (CpuGatherSchedule::prefetch_rows); undefined
  // where none is given.
  Halide::Parameter source = {};
};

struct CpuGatherSchedule {
  int vector_width = 0;
  int rows_per_task = 32;
  // Copy the values a block reads, with their border, into a scratch buffer (bounds handled once
  // per cell), or read them through the boundary condition directly.
  bool stage_cells = true;
  // Split the loops over cells and slots into border and interior pieces (the interior without
  // bounds tests), or keep one loop each (scalar clamps per cell in channels-last; less code).
  bool partition_cells = true;
  // Halved vectors for rows narrower than a vector, or full ones only (a narrower row then lies
  // past the views' bounds: the runtime's plan finds that in the kernel's bounds query and takes
  // the scatter, execute/gather.hpp).
  bool narrow_vectors = true;
  // Channels-last 2-D and 3-D with full vectors only (narrow_vectors false): the slots of each
  // cell's window (slot_tile in every dimension, the stride) in loops of their own, inside the
  // loop over channel vectors: each vector of the cell's marks and values is loaded once for its
  // window's slots, and two output rows are written side by side. Where a cell alone covers
  // those slots (GatherStages::cell_slots), each cell is also marked and checked right before
  // them. 0: slot by slot along each output row.
  int slot_tile = 0;
  // Contiguous windows that cover their slots alone (GatherStages::cell_slots, a
  // generator built `tiled`): vectors of cells rather than of slots. Each lane's window is
  // unrolled into strided stores that become dense interleaved ones, and each row of cells is
  // marked and checked right before its slots. Rows of fewer than a vector of cells lie past
  // the views' bounds (the plan's bounds query), rows of a partial window are declined
  // (specialize_fail): both the scatter's.
  bool cell_vectors = false;
  // With cell_vectors: the slots of a row of cells are written an output row at a time (one
  // store stream), rather than the window's rows side by side. Rows of a few cache lines that
  // start on a 64-byte boundary, written two at a time, stalled on their stores.
  bool whole_rows = false;
  // With full vectors only and no slot tiles (2-D and 3-D): each group of marks (a row of
  // cells; channels-last: a cell's channels) is computed and checked right before its cells are
  // read, rather than a block's marks in a pass of their own.
  bool check_groups = false;
  // With check_groups, contiguous 2-D: the source rows of the row of cells this many rows ahead
  // are prefetched (0: none). Rows of a few cache lines are too short for the hardware
  // prefetchers to learn when they start on a 64-byte boundary, as frameworks' tensors do.
  int prefetch_rows = 0;
  // As pooling's: rows (channels-last: channels) narrower than this run on another variant.
  int handed_off_below = 0;

  void read(Knobs& knobs);
  void apply(const GatherStages& s, const Halide::Target& target) const;
};

// Stages of max_unpool_backward: out(p, c, n) (channels-last: out(c, p, n)) gathers each element
// from the plane slot its index names. Channels-last's CPU kernels check their indices a chunk at
// a time: invalid(chunk, n) says whether a run of in_chunk[1] pixels of an image holds an invalid
// index (undefined elsewhere, where in_chunk is too).
struct IndexGatherStages {
  Halide::Func out, invalid;
  Halide::RDom in_chunk;  // invalid's update: a chunk's (channel, pixel)
  int chunk;              // channels-last: pixels per chunk (0 in contiguous)
  Halide::Var p, c, n;
  Layout layout;
};

// Tasks of about elements_per_task elements (runs of a plane, or of an image's pixels).
// Contiguous: one element at a time, each index checked as it is read, planes smaller than a
// task sharing one. Channels-last: vectors along the channels, each task's chunks of indices
// checked when the task starts.
struct CpuIndexGatherSchedule {
  int vector_width = 0;
  int elements_per_task = 16384;

  void read(Knobs& knobs);
  void apply(const IndexGatherStages& s, const Halide::Target& target) const;
};

// Stages of max_unpool_winner (deterministic unpooling, the GPU's general path), every one an
// update (the gate closes their domains): winner(p, c, n) (channels-last: winner(c, p, n)) is set
// to -1 over `slots`, then one atomic max update over `elements` (the valid ones) takes the
// largest input position naming each slot; first_invalid() starts at the largest int64, then
// one atomic min update over `invalid_elements` takes the first invalid position; out gathers
// from the winners over `outputs`; invalid_position and invalid_index read first_invalid. Every
// RDom runs over its buffer's (element, c, n) in memory order (channels first in channels-last).
struct WinnerStages {
  Halide::Func winner, first_invalid, out, invalid_position, invalid_index;
  Halide::RDom slots, elements, outputs, invalid_elements;
  Layout layout;
};

// The winner algorithm on the CPU: built for the host so that tests can check it where no GPU
// runs. The atomic updates run in parallel across tasks of elements, so threads race on the same
// slots exactly as GPU threads do.
struct CpuWinnerSchedule {
  int elements_per_task = 4096;

  void read(Knobs& knobs);
  void apply(const WinnerStages& s, const Halide::Target& target) const;
};

}  // namespace poolgen
