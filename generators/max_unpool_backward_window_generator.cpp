// Max unpooling's backward for indices a pooling with this fixed window gave (the SegNet case):
// grad_values(cell) = grad_output at the cell's index, which then lies in the cell's own window,
// so each cell reads its window's taps with dense loads and keeps the one its index names,
// instead of a gather by index (every lane loaded on its own). Windows tile the output
// (kernel = stride, no padding, each grad_output extent kernel x the cell's): a call of other
// extents breaks the constraints and declines, as does a cell whose index lies outside its
// window (a requirement, checked a row of cells at a time); the runtime then runs the gather by
// index (max_unpool_backward), which also names an invalid index.
#include "Halide.h"
#include "window.h"
#include "cpu_schedules.h"
#include "knobs.h"
#include "prefetch_lines.h"

namespace poolgen {
namespace {

using namespace Halide;

class MaxUnpoolBackwardWindow : public Generator<MaxUnpoolBackwardWindow> {
 public:
  GeneratorParam<int> rank{"rank", 2, 1, 3};
  GeneratorParam<Type> value_type{"value_type", Float(32)};
  GeneratorParam<Type> index_type{"index_type", Int(64)};
  GeneratorParam<int> fixed_kernel{"fixed_kernel", 2};
  GeneratorParam<Layout> layout{"layout", Layout::contiguous, kLayoutNames};
  GeneratorParam<std::string> cpu_schedule{"cpu_schedule", ""};  // knobs.h

  void configure() {
    grad_output_ = add_input<Buffer<>>("grad_output", value_type, rank + 2);
    indices_ = add_input<Buffer<>>("indices", index_type, rank + 2);
    grad_values_ = add_output<Buffer<>>("grad_values", value_type, rank + 2);
  }

  void generate() {
    const int nd = rank, k = fixed_kernel;
    const Layout l = layout;
    std::vector<Var> cell_vars(nd);
    std::vector<Expr> cell(cell_vars.begin(), cell_vars.end()), window_start(nd), slots(nd);
    for (int i = 0; i < nd; ++i) {
      const Expr cells = grad_values_->dim(spatial_dim(i, l)).extent();
      slots[i] = grad_output_->dim(spatial_dim(i, l)).extent();
      grad_output_->dim(spatial_dim(i, l)).set_extent(cells * k);
      window_start[i] = cell[i] * k;
    }
    const std::vector<Expr> cell_at = tensor_args(cell, c_, n_, l);
    const Expr local = offset_in_window((*indices_)(cell_at), window_start, slots, k);

    // The tap the index names, -1 where it names none: then the row's check stops the kernel.
    Expr named = -1;
    std::vector<std::pair<Expr, Expr>> taps;  // (offset in the window, gradient there)
    for_each_tap(nd, k, [&](const std::vector<int>& tap) {
      std::vector<Expr> at(nd), offset(tap.begin(), tap.end());
      for (int i = 0; i < nd; ++i) at[i] = window_start[i] + tap[i];
      const Expr here = flat_offset(offset, slots, Int(32));
      named = select(local == here, here, named);
      taps.push_back({here, (*grad_output_)(tensor_args(at, c_, n_, l))});
    });
    marked_(cell_at) = named;

    // A row of cells (in channels-last, a cell's channels) is checked as a whole.
    RDom along;
    const std::vector<Expr> group = check_cell_groups(
        marked_, group_ok_, group_checked_, cell_vars, c_, n_, l, grad_values_->dim(0).extent(),
        [](const Expr& mark) { return mark >= 0; },
        "max_unpool_backward: an index lies outside its pooling window", &along);
    const Expr claimed = marked_(cell_at) + group_checked_(group);
    Expr result = cast(value_type, 0);
    for (const auto& [offset, gradient] : taps) result = select(claimed == offset, gradient, result);
    (*grad_values_)(cell_at) = result;
    for (int i = 0; i < nd; ++i) grad_values_->dim(spatial_dim(i, l)).set_min(0);

    grad_output_->set_estimates(representative_region(rank, l));
    indices_->set_estimates(representative_region(rank, l, 2));
    grad_values_->set_estimates(representative_region(rank, l, 2));
    // The gather's schedule (its cells are the output here): vectors along the row or the
    // channels, each block's cells marked and its rows checked before they are read.
    Func grad_output = *grad_output_;
    apply_cpu_schedule<CpuGatherSchedule>(
        cpu_schedule,
        GatherStages{*grad_values_, marked_, group_ok_, group_checked_, grad_output, cell_vars,
                     cell_vars, along, c_, n_, l, 0, ImageParam(*grad_output_).parameter()},
        {*grad_values_}, get_target());
  }

  // The schedule's prefetches of grad_output rows (CpuGatherSchedule::prefetch_rows), each line.
  void schedule() { get_pipeline().add_custom_lowering_pass(new PrefetchEveryLine(get_target())); }

 private:
  Input<Buffer<>>* grad_output_ = nullptr;
  Input<Buffer<>>* indices_ = nullptr;
  Output<Buffer<>>* grad_values_ = nullptr;
  Func marked_{"marked"}, group_ok_{"group_ok"}, group_checked_{"group_checked"};
  Var c_{"c"}, n_{"n"};
};

}  // namespace
}  // namespace poolgen

HALIDE_REGISTER_GENERATOR(poolgen::MaxUnpoolBackwardWindow, max_unpool_backward_window)
