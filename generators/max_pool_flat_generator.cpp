// 2-D k2s2p0 max pooling with indices of small NCHW planes, over every plane at once: the same
// results as max_pool's (docs/semantics.md), computed in an order whose vectors run across rows
// and planes. The runtime hands over the input's planes as one dimension (n*C + c, batch 1) and
// the outputs flat (one dimension over every element in memory order); the schedule lives in
// schedules/.
//
// Each output row's two input rows are first combined column by column (`rows`, a row of
// 2 * out_width columns: an odd input's last column belongs to no window), then each output is
// the pair of neighbouring columns: element k reads rows(2k) and rows(2k + 1), a stride-2 load
// over whole vectors whatever the planes' width.
#include "Halide.h"
#include "cpu_schedules.h"
#include "knobs.h"
#include "window.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace poolgen {
namespace {

using namespace Halide;

class MaxPoolFlat : public Generator<MaxPoolFlat> {
 public:
  GeneratorParam<Type> value_type{"value_type", Float(32)};
  GeneratorParam<Type> index_type{"index_type", Int(64)};
  GeneratorParam<Layout> layout{"layout", Layout::contiguous, kLayoutNames};  // contiguous only
  // The square input planes served, by side ("7" or "7,14"): a specialization each, with
  // constant extents. The runtime calls it for those alone (POOLGEN_FLAT_PLANES); other shapes
  // are the schedule's specialize_fail.
  GeneratorParam<std::string> planes{"planes", "7"};
  GeneratorParam<std::string> cpu_schedule{"cpu_schedule", ""};  // knobs.h

  void configure() {
    if (value_type != Float(32) || layout != Layout::contiguous) {
      throw std::invalid_argument("max_pool_flat serves contiguous f32 tensors");
    }
    input_ = add_input<Buffer<>>("input", value_type, 4);  // (x, y, plane, 0)
    result_ = add_output<Func>("result", {value_type, index_type}, 3);  // (element, 0, 0)
  }

  void generate() {
    const Input<Buffer<>>& input = *input_;
    Output<Func>& result = *result_;
    const Expr width = input.dim(0).extent(), height = input.dim(1).extent();
    const Expr out_width = width / 2, out_height = height / 2, row = 2 * out_width;

    // rows(j): column j % row of output row j / row (rows of every plane, in memory order):
    // the later of its two taps where it is greater or NaN (the scan's rule), with its offset
    // in the plane.
    const Expr out_row = j / row, column = j % row;
    // A last task of fewer planes computes the rows of whole tasks (its guard bounds the outputs
    // it writes, not the rows they read): rows past the last plane read the last plane.
    const Expr plane = min(out_row / out_height, input.dim(2).extent() - 1);
    const Expr y = 2 * (out_row % out_height);
    const Expr top = input(column, y, plane, 0), bottom = input(column, y + 1, plane, 0);
    const Expr bottom_wins = later_wins(top, bottom);
    rows(j) = Tuple(select(bottom_wins, bottom, top), y * width + column + select(bottom_wins, width, 0));

    // The scan's winner over the four taps in row-major order is the greatest under one total
    // order: NaNs above numbers, the later of two NaNs, the larger number, the earlier of two
    // equal numbers (-0 and 0 too). A maximum under a total order is associative and
    // commutative, so pairing the columns' winners gives it.
    const Expr left = rows(2 * k)[0], left_at = rows(2 * k)[1];
    const Expr right = rows(2 * k + 1)[0], right_at = rows(2 * k + 1)[1];
    const Expr left_nan = is_nan(left), right_nan = is_nan(right);
    const Expr right_wins = (right_nan && (!left_nan || right_at > left_at)) ||
                            (!left_nan && (right > left || (right == left && right_at < left_at)));
    result(k, c1, n1) = Tuple(select(right_wins, right, left),
                              cast(index_type, select(right_wins, right_at, left_at)));

    std::vector<int> sides;
    for (const std::string& side : split(planes.value(), ',')) sides.push_back(std::stoi(side));
    const FlatPoolStages stages{result, rows, k, j, width, height, sides};
    apply_cpu_schedule<CpuFlatPoolSchedule>(cpu_schedule, stages, {result}, get_target());
  }

 private:
  Input<Buffer<>>* input_ = nullptr;
  Output<Func>* result_ = nullptr;
  Var j{"j"}, k{"k"}, c1{"c1"}, n1{"n1"};
  Func rows{"rows"};
};

}  // namespace
}  // namespace poolgen

HALIDE_REGISTER_GENERATOR(poolgen::MaxPoolFlat, max_pool_flat)
