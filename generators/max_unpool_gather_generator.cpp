// Max unpooling, fast path for indices produced by a pooling with this generator's fixed window
// (the SegNet case): an output slot can only be named by the few cells whose windows cover it,
// so each slot gathers from those candidates instead of being scattered to. No zero pass, no
// write conflicts, and duplicates resolve to the latest cell in input order, as the scatter does.
//
// It equals the scatter only while every cell's index names a slot inside that cell's own window;
// a cell that breaks this stops the kernel with an error and the runtime takes the scatter path.
#include "Halide.h"
#include "window.h"
#include "cpu_schedules.h"

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

  CpuGatherSchedule schedule_knobs;

  void configure() {
    values_ = add_input<Buffer<>>("values", value_type, rank + 2);
    indices_ = add_input<Buffer<>>("indices", index_type, rank + 2);
    output_ = add_output<Buffer<>>("output", value_type, rank + 2);
  }

  void generate() {
    const int nd = rank, k = fixed_kernel, s = fixed_stride, p = fixed_padding;
    // Every cell must be a candidate of some output slot, or its index would go unchecked.
    if (k < s + p) throw CompileError("max_unpool_gather needs kernel >= stride + padding");
    const int candidates = (k + s - 1) / s;  // cells covering one slot, per dimension
    std::vector<Expr> in_extent(nd), out_extent(nd);
    for (int i = 0; i < nd; ++i) {
      in_extent[i] = values_->dim(i).extent();
      out_extent[i] = output_->dim(i).extent();
    }

    // checked(cell) is the cell's index, once it is known to name a slot in the cell's window.
    std::vector<Var> cell_vars(nd);
    std::vector<Expr> cell(cell_vars.begin(), cell_vars.end());
    Expr index = (*indices_)(tensor_args(cell, c_, n_));
    Expr in_window = Internal::const_false();
    for_each_offset(nd, k, [&](const std::vector<int>& tap) {
      std::vector<Expr> slot(nd);
      Expr inside = Internal::const_true();
      for (int i = 0; i < nd; ++i) {
        slot[i] = cell[i] * s - p + tap[i];
        inside = inside && slot[i] >= 0 && slot[i] < out_extent[i];
      }
      in_window = in_window || (inside && index == flat_offset(slot, out_extent, index_type));
    });
    checked_(tensor_args(cell, c_, n_)) =
        require(in_window, index, "max_unpool: index", index, "is not in its pooling window");

    // Each slot takes the latest candidate cell (row-major order) whose index names it.
    std::vector<Var> out_vars(nd);
    std::vector<Expr> x(out_vars.begin(), out_vars.end());
    Expr here = flat_offset(x, out_extent, index_type);
    Expr result = cast(value_type, 0);
    for_each_offset(nd, candidates, [&](const std::vector<int>& j) {
      std::vector<Expr> candidate(nd);
      Expr exists = Internal::const_true();
      for (int i = 0; i < nd; ++i) {
        Expr c = (x[i] + p) / s - (candidates - 1) + j[i];
        exists = exists && c >= 0 && c < in_extent[i];
        candidate[i] = clamp(c, 0, in_extent[i] - 1);
      }
      const std::vector<Expr> at = tensor_args(candidate, c_, n_);
      result = select(likely(exists) && checked_(at) == here, (*values_)(at), result);
    });
    (*output_)(tensor_args(x, c_, n_)) = result;

    schedule_knobs.apply(GatherStages{*output_, checked_, out_vars, cell_vars, c_, n_, s},
                         get_target());
  }

 private:
  // Calls f(offset) for every offset in [0, extent)^nd, in row-major order (offset[0] fastest,
  // matching Halide's innermost-first dimensions).
  template <typename F>
  static void for_each_offset(int nd, int extent, F f) {
    std::vector<int> offset(nd, 0);
    while (true) {
      f(offset);
      int i = 0;
      while (i < nd && ++offset[i] == extent) offset[i++] = 0;
      if (i == nd) return;
    }
  }

  Input<Buffer<>>* values_ = nullptr;
  Input<Buffer<>>* indices_ = nullptr;
  Output<Buffer<>>* output_ = nullptr;
  Func checked_{"checked"};
  Var c_{"c"}, n_{"n"};
};

}  // namespace
}  // namespace poolgen

HALIDE_REGISTER_GENERATOR(poolgen::MaxUnpoolGather, max_unpool_gather)
