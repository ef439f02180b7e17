// Max unpooling, fast path for indices produced by a pooling with this generator's fixed window
// (the SegNet case): an output slot can only be named by the few cells whose windows cover it,
// so each slot gathers from those candidates instead of being scattered to. No zero pass, no
// write conflicts, and duplicates resolve to the latest cell in input order, as the scatter does.
//
// It equals the scatter only while every cell's index names a slot inside that cell's own window;
// a cell that breaks this stops the kernel at a requirement (the kernel declines:
// requirement_failed, which the runtime checks for, runtime/dispatch/launch.hpp) and the runtime
// takes the scatter path.
//
// Indices may count from another origin than their plane's, as the scatter's do: plane q of the
// call (n * C + c) finds its slots at index - q * plane_stride (ONNX's global indices; PyTorch's
// plane offsets pass plane_stride 0). The gather takes whole calls only, so no origin is needed.
//
// With `accumulate` it is max pooling's backward for that window (docs/semantics.md,
// "Gradients"): cells are the pooled gradients, slots the pooling input's positions, and a slot
// sums the candidates naming it in input order, in the value type's arithmetic (add_in_type),
// which is the scatter's order of additions: the two agree bit for bit. An index outside the
// plane (an empty window's, which the scatter drops) declines like any index outside its window,
// and the runtime takes the scatter: testing for it cost 60% of the kernel's time.
#include "Halide.h"
#include "window.h"
#include "cpu_schedules.h"
#include "knobs.h"

namespace poolgen {
namespace {

using namespace Halide;

class MaxUnpoolGather : public Generator<MaxUnpoolGather> {
 public:
  GeneratorParam<int> rank{"rank", 2, 1, 3};
  GeneratorParam<Type> value_type{"value_type", Float(32)};
  GeneratorParam<Type> index_type{"index_type", Int(64)};
  GeneratorParam<int> fixed_kernel{"fixed_kernel", 2};
  GeneratorParam<int> fixed_stride{"fixed_stride", 2};
  GeneratorParam<int> fixed_padding{"fixed_padding", 0};
  GeneratorParam<Layout> layout{"layout", Layout::contiguous, kLayoutNames};
  GeneratorParam<bool> accumulate{"accumulate", false};
  // Windows that tile the output exactly (kernel = stride, no padding, every output extent
  // stride x the input's): each cell and each of its taps lies inside, so cells are read with
  // no boundary condition. A call of other extents breaks the output's constraints (declined:
  // constraint_violated), and the runtime takes the scatter.
  GeneratorParam<bool> tiled{"tiled", false};

  GeneratorParam<std::string> cpu_schedule{"cpu_schedule", ""};  // knobs.h

  void configure() {
    values_ = add_input<Buffer<>>("values", value_type, rank + 2);
    indices_ = add_input<Buffer<>>("indices", index_type, rank + 2);
    if (!accumulate) {
      plane_stride_ = add_input<int64_t>("plane_stride");
    }
    output_ = add_output<Buffer<>>("output", value_type, rank + 2);
  }

  void generate() {
    const int nd = rank, k = fixed_kernel, s = fixed_stride, p = fixed_padding;
    const Layout l = layout;
    // Every cell must be a candidate of some output slot, or its index would go unchecked.
    if (k < s + p) throw CompileError("max_unpool_gather needs kernel >= stride + padding");
    const bool tiles = tiled;
    if (tiles && (k != s || p != 0)) {
      throw CompileError("max_unpool_gather: tiled needs kernel == stride and no padding");
    }
    const int candidates = (k + s - 1) / s;  // cells covering one slot, per dimension
    std::vector<Expr> in_extent(nd), out_extent(nd);
    for (int i = 0; i < nd; ++i) {
      in_extent[i] = values_->dim(spatial_dim(i, l)).extent();
      out_extent[i] = output_->dim(spatial_dim(i, l)).extent();
      if (tiles) output_->dim(spatial_dim(i, l)).set_extent(in_extent[i] * s);
    }

    // Cells are compared in 32 bits, by offsets inside their windows: `local` is a cell's index
    // minus its window's start in the plane (whose taps lie at 0..span), clamped to -1..span+1 so
    // that any other index lands on a value no tap has. 32-bit lanes compare and select 32-bit
    // values without the mask narrowing that 64-bit indices need.
    std::vector<Var> cell_vars(nd);
    std::vector<Expr> cell(cell_vars.begin(), cell_vars.end()), window_start(nd);
    Expr cell_inside = Internal::const_true();
    for (int i = 0; i < nd; ++i) {
      window_start[i] = cell[i] * s - p;
      if (!tiles) cell_inside = cell_inside && cell[i] >= 0 && cell[i] < in_extent[i];
    }
    Region cells;
    for (int i = 0; i < nd; ++i) cells.push_back({0, in_extent[i]});
    cells = tensor_args(cells, Range(), Range(), l);
    // Beyond the input the index is any cell's (cell_inside decides); the value any cell's too,
    // since no slot takes it.
    Func indices = tiles ? Func(*indices_) : BoundaryConditions::repeat_edge(*indices_, cells);
    Func value = tiles ? Func(*values_) : BoundaryConditions::repeat_edge(*values_, cells);
    Expr index = indices(tensor_args(cell, c_, n_, l));
    if (!accumulate) {  // in the index type: the runtime passes origins its indices can hold
      const Expr channels = values_->dim(l == Layout::channels_last ? 0 : nd).extent();
      const Expr plane = cast<int64_t>(n_) * channels + c_;
      index = index - cast(index_type, plane * *plane_stride_);
    }
    const Expr local = offset_in_window(index, window_start, out_extent, k);

    // in_window: the cell's index names a slot inside the cell's own window: for some row of
    // taps (the taps of the outer dimensions) inside the plane, local minus the row's offset
    // is one of the row's taps inside the plane along dimension 0, [first_x, end_x). One
    // unsigned comparison a row (k^(nd-1) of them) where comparing with every tap took k^nd.
    Expr first_x = 0, end_x = k;
    if (!tiles) {
      first_x = max(0, -window_start[0]);
      end_x = max(first_x, min(k, out_extent[0] - window_start[0]));  // no taps: none
    }
    Expr in_window = Internal::const_false();
    for_each_tap(nd - 1, k, [&](const std::vector<int>& outer_tap) {
      Expr inside = Internal::const_true();
      std::vector<Expr> row_offset(nd, 0);
      for (int i = 1; i < nd; ++i) {
        const Expr slot = window_start[i] + outer_tap[i - 1];
        if (!tiles) inside = inside && slot >= 0 && slot < out_extent[i];
        row_offset[i] = outer_tap[i - 1];
      }
      const Expr along = local - flat_offset(row_offset, out_extent, Int(32)) - first_x;
      in_window = in_window || (inside && cast<uint32_t>(along) < cast<uint32_t>(end_x - first_x));
    });
    // marked(cell): the cell's local offset, -1 beyond the input (no slot), -3 where the index
    // breaks its window. A group of cells is checked as a whole (a vectorizable reduction, the
    // lanes' "and", then one scalar require): such a cell anywhere in the group stops the
    // kernel. In channels-last a group is one cell's channels (the vectors), which a schedule
    // can check right before the cell's slots; in contiguous layouts, a row along the innermost
    // spatial dimension.
    const Expr broken = -3;
    const std::vector<Expr> cell_at = tensor_args(cell, c_, n_, l);
    marked_(cell_at) = select(!cell_inside, -1, in_window, local, broken);
    RDom along;
    const std::vector<Expr> group = check_cell_groups(
        marked_, group_ok_, group_checked_, cell_vars, c_, n_, l, values_->dim(0).extent(),
        [&](const Expr& mark) { return mark > broken; },
        "max_unpool: an index lies outside its pooling window", &along);
    Func claimed("claimed");  // marked, once its group is checked
    claimed(cell_at) = marked_(cell_at) + group_checked_(group);

    // Each slot takes the latest candidate cell (row-major order) that claims it, among those
    // whose windows cover it. Where a schedule's tile makes a slot's position constant in its
    // cell (slot_tile), `covers` is a constant: a candidate that misses the slot then costs
    // nothing (k3s2p1's 2x2 tile compares 9 candidates, not 16).
    std::vector<Var> out_vars(nd);
    std::vector<Expr> x(out_vars.begin(), out_vars.end());
    Expr result = cast(value_type, 0);
    for_each_tap(nd, candidates, [&](const std::vector<int>& j) {
      std::vector<Expr> candidate(nd), tap(nd);
      Expr covers = Internal::const_true();
      for (int i = 0; i < nd; ++i) {
        candidate[i] = (x[i] + p) / s - (candidates - 1) + j[i];
        tap[i] = x[i] - (candidate[i] * s - p);
        covers = covers && tap[i] >= 0 && tap[i] < k;
      }
      const Expr here = flat_offset(tap, out_extent, Int(32));
      const std::vector<Expr> at = tensor_args(candidate, c_, n_, l);
      result = select(covers && claimed(at) == here,
                      accumulate ? add_in_type(result, value(at)) : value(at), result);
    });
    (*output_)(tensor_args(x, c_, n_, l)) = result;
    // The runtime's buffers start at 0: the slots of a tile of stride x stride are then known
    // to share their cell (the schedule's slot_tile).
    for (int i = 0; i < nd; ++i) output_->dim(spatial_dim(i, l)).set_min(0);

    values_->set_estimates(representative_region(rank, l, 2));
    indices_->set_estimates(representative_region(rank, l, 2));
    output_->set_estimates(representative_region(rank, l));
    apply_cpu_schedule<CpuGatherSchedule>(
        cpu_schedule,
        GatherStages{*output_, marked_, group_ok_, group_checked_, value, out_vars, cell_vars,
                     along, c_, n_, l, candidates == 1 ? s : 0},
        {*output_}, get_target());
  }

 private:
  Input<Buffer<>>* values_ = nullptr;
  Input<Buffer<>>* indices_ = nullptr;
  Input<int64_t>* plane_stride_ = nullptr;
  Output<Buffer<>>* output_ = nullptr;
  Func marked_{"marked"}, group_ok_{"group_ok"}, group_checked_{"group_checked"};
  Var c_{"c"}, n_{"n"};
};

}  // namespace
}  // namespace poolgen

HALIDE_REGISTER_GENERATOR(poolgen::MaxUnpoolGather, max_unpool_gather)
