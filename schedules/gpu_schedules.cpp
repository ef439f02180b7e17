#include "gpu_schedules.h"

namespace poolgen {

using namespace Halide;

namespace {

// Fuses `vars` (innermost first) into one, named after them; `vars` must not be empty.
Var fused(Func f, const std::vector<Var>& vars) {
  Var all = vars[0];
  for (size_t i = 1; i < vars.size(); ++i) {
    Var next(all.name() + "_" + vars[i].name());
    f.fuse(all, vars[i], next);
    all = next;
  }
  return all;
}

// Tiles the first two dimensions of `f` (with fuse_inner, the first two fused into one and the
// third) into blocks of threads_x x threads_y threads and lays the blocks out as `grid` says
// (GpuGrid): fused, every block dimension in grid x (2^31-1 blocks, where y and z take 65535,
// which a channels-last plane or a large batch would exceed); planes, the grid's three
// dimensions. Returns the loop inside which one output is computed: the thread variable of the
// innermost dimension, or the batch loop inside the threads (planes, contiguous).
Var tile_threads(Func f, int threads_x, int threads_y, bool fuse_inner,
                 GpuGrid grid = GpuGrid::fused, Layout layout = Layout::contiguous) {
  std::vector<Var> dims = f.args();
  if (fuse_inner) {
    Var inner(dims[0].name() + "_" + dims[1].name());
    f.fuse(dims[0], dims[1], inner);
    dims.erase(dims.begin(), dims.begin() + 2);
    dims.insert(dims.begin(), inner);
  }
  Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
  f.tile(dims[0], dims[1], xo, yo, xi, yi, threads_x, threads_y, TailStrategy::GuardWithIf);
  const std::vector<Var> outer(dims.begin() + 2, dims.end());  // innermost first; n last
  if (grid == GpuGrid::fused) {
    std::vector<Var> blocks{xo, yo};
    blocks.insert(blocks.end(), outer.begin(), outer.end());
    f.gpu_blocks(fused(f, blocks)).gpu_threads(xi, yi);
    return xi;
  }
  if (outer.empty()) {  // channels-last 1-D, fused: (channels x columns, batch)
    f.gpu_blocks(xo, yo).gpu_threads(xi, yi);
  } else if (layout == Layout::contiguous) {
    // The batch loops inside each thread (the runtime merges it into the planes); 1-D tiles
    // (columns, planes), the others (columns, rows) with the planes in z.
    const Var n = outer.back();
    if (outer.size() == 1) {
      f.reorder(n, xi, yi, xo, yo).gpu_threads(xi, yi).gpu_blocks(xo, yo);
    } else {
      std::vector<Var> rows{yo};
      rows.insert(rows.end(), outer.begin(), outer.end() - 2);
      const Var r = fused(f, rows), planes = outer[outer.size() - 2];
      f.reorder(n, xi, yi, r, xo, planes).gpu_threads(xi, yi).gpu_blocks(r, xo, planes);
    }
    return n;
  } else {
    std::vector<Var> rows{yo};
    rows.insert(rows.end(), outer.begin(), outer.end() - 1);
    f.gpu_blocks(xo, fused(f, rows), outer.back()).gpu_threads(xi, yi);
  }
  return xi;
}

// One thread per element of an update over `r` (memory order, innermost first): threads along
// r[0], and the blocks of r[0] fused with the other dimensions into one block dimension; with
// the planes grid, over a contiguous tensor's (spatial..., c, n), the blocks of r[0] in grid y,
// the other spatial dimensions (fused) in x, the planes in z and the batch inside each thread.
// A plain update (stores to distinct elements, `atomic` false) needs no atomics; with
// fuse_inner its two innermost dimensions run fused (as gpu_fuse fuses a Func's).
void thread_per_element(Stage update, const RDom& r, int threads, GpuGrid grid = GpuGrid::fused,
                        Layout layout = Layout::channels_last, bool atomic = true,
                        bool fuse_inner = false) {
  RVar ro("ro"), ri("ri"), inner = r[0], outer = r[1];
  int first_outer = 1;
  if (fuse_inner) {
    inner = RVar(r[0].name() + "_" + r[1].name());
    update.fuse(r[0], r[1], inner);
    outer = r[2];
    first_outer = 2;
  }
  if (atomic) update.atomic();
  update.split(inner, ro, ri, threads, TailStrategy::GuardWithIf);
  const int dims = r.dimensions();
  if (grid == GpuGrid::planes && layout == Layout::contiguous) {
    const RVar n = r[dims - 1], planes = r[dims - 2];
    if (dims == 3) {  // 1-D
      update.reorder(n, ri, ro, planes).gpu_threads(ri).gpu_blocks(ro, planes);
      return;
    }
    RVar rows = r[1];
    for (int i = 2; i < dims - 2; ++i) {
      RVar next(rows.name() + "_" + r[i].name());
      update.fuse(rows, r[i], next);
      rows = next;
    }
    update.reorder(n, ri, rows, ro, planes).gpu_threads(ri).gpu_blocks(rows, ro, planes);
    return;
  }
  for (int i = first_outer + 1; i < dims; ++i) {
    RVar fused(outer.name() + "_" + r[i].name());
    update.fuse(outer, r[i], fused);
    outer = fused;
  }
  RVar blocks("element_blocks");
  update.fuse(ro, outer, blocks).gpu_blocks(blocks).gpu_threads(ri);
}

// The first-invalid reduction (flat_planes.h): a thread per invalid element, and the reports
// read in a single thread.
void first_invalid_threads(Func first_invalid, const RDom& bad, const std::vector<Func>& reports,
                           int threads) {
  first_invalid.compute_root().gpu_single_thread();
  thread_per_element(first_invalid.update(), bad, threads);
  for (Func f : reports) f.gpu_single_thread();
}

}  // namespace

void GpuPoolSchedule::apply(const PoolStages& s, const Target&) const {
  Func result = s.result, scan = s.scan;
  const Var thread = tile_threads(result, gpu_threads_x, gpu_threads_y,
                                  fuses_inner(gpu_fuse, s.layout), gpu_grid, s.layout);
  scan.compute_at(result, thread);
  if (s.window_fixed) {
    for (int i = 0; i < s.r.dimensions(); ++i) scan.update().unroll(s.r[i]);
  }
}

void GpuWinnerSchedule::apply(const WinnerStages& s, const Target&) const {
  Func winner = s.winner, out = s.out;
  const bool fuse = fuses_inner(gpu_fuse, s.layout);
  thread_per_element(winner.update(0), s.slots, gpu_threads, GpuGrid::fused, s.layout, false, fuse);
  thread_per_element(winner.update(1), s.elements, gpu_threads);
  thread_per_element(out.update(0), s.outputs, gpu_threads, GpuGrid::fused, s.layout, false, fuse);
  first_invalid_threads(s.first_invalid, s.invalid_elements,
                        {s.invalid_position, s.invalid_index}, gpu_threads);
}

void GpuScatterSchedule::apply(const ScatterStages& s, const Target&) const {
  Func out = s.out;
  thread_per_element(out.update(0), s.slots, gpu_threads, GpuGrid::fused, s.layout, false);
  Var planes("planes"), block("block"), thread("thread");
  out.update(1).fuse(s.c, s.n, planes)
      .split(planes, block, thread, gpu_threads, TailStrategy::GuardWithIf)
      .gpu_blocks(block).gpu_threads(thread);
}

void GpuPoolGatherSchedule::apply(const PoolGatherStages& s) const {
  Func grad_input = s.grad_input, sum = s.sum, outside = s.outside_window;
  sum.compute_at(grad_input, tile_threads(grad_input, gpu_threads_x, gpu_threads_y,
                                          fuses_inner(gpu_fuse, s.layout), gpu_grid, s.layout));
  outside.gpu_single_thread();
  thread_per_element(outside.update(), s.outputs, int(gpu_threads_x) * int(gpu_threads_y),
                     gpu_grid, s.layout);
}

void GpuIndexGatherSchedule::apply(const IndexGatherStages& s, Func first_invalid,
                                   const RDom& bad, const std::vector<Func>& reports) const {
  tile_threads(s.out, gpu_threads, 1, fuses_inner(gpu_fuse, s.layout));
  first_invalid_threads(first_invalid, bad, reports, gpu_threads);
}

}  // namespace poolgen
