// 2-D k2s2p0 and k3s2p1 max pooling with indices of small NCHW planes, over every plane at once: the same
// results as max_pool's (docs/semantics.md), computed in an order whose vectors run across rows
// and planes. The runtime hands over the input and both outputs flat (one dimension over every
// element in memory order, every plane's) with the planes' side; each served side is a
// specialization with constant extents. The schedule lives in schedules/.
//
// Planes of an even side are one tall plane of the same width (an output row's two input rows
// never straddle two planes), so output k reads the window at 2k + side * (k / out_side) on its
// row. A run of `lanes` consecutive outputs (a vector) starts in output row k0 / out_side and
// spans the next few rows; each of those rows gives every lane a window with one stride-2 load,
// and each lane takes its own row's. The four taps then meet in the scan's order.
//
// Planes of an odd side drop their last row and column, so output rows no longer tile the
// input: each output row's two input rows are first combined column by column (`rows`, a row of
// 2 * out_width columns, whose vectors pick their input rows by lane as the even sides' do),
// then each output is the pair of neighbouring columns: element k reads rows(2k) and
// rows(2k + 1), a stride-2 load over whole vectors whatever the planes' width.
//
// k3s2p1 (`window`) does the same for both parities: `columns` holds each output row's column
// winners over its three input rows, in rows of 2 * out_width slots (the side's columns, and on
// odd sides a slot after them, which the padding column on either side of a plane's windows
// reads), so that output k's three columns are columns(2k - 1 + {0, 1, 2}): three stride-2
// loads over whole vectors.
#include "Halide.h"
#include "cpu_schedules.h"
#include "knobs.h"
#include "window.h"

#include <algorithm>
#include <functional>
#include <numeric>
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
  // The square input planes served, by side ("7" or "7,14,28"): a specialization each, with
  // constant extents. The runtime calls it for those alone (POOLGEN_FLAT_PLANES); other sides
  // are the schedule's specialize_fail.
  GeneratorParam<std::string> planes{"planes", "7"};
  // k2s2p0, or k3s2p1 (PyTorch's rules: padding on every side that its windows reach).
  GeneratorParam<std::string> window{"window", "k2s2p0"};
  GeneratorParam<std::string> cpu_schedule{"cpu_schedule", ""};  // knobs.h

  void configure() {
    if (value_type != Float(32) || layout != Layout::contiguous) {
      throw std::invalid_argument("max_pool_flat serves contiguous f32 tensors");
    }
    if (window.value() != "k2s2p0" && window.value() != "k3s2p1") {
      throw std::invalid_argument("max_pool_flat: window is k2s2p0 or k3s2p1");
    }
    for (const std::string& side : split(planes.value(), ',')) sides_.push_back(std::stoi(side));
    input_ = add_input<Buffer<>>("input", value_type, 3);  // (element, 0, 0)
    side_ = add_input<int32_t>("side");
    result_ = add_output<Func>("result", {value_type, index_type}, 3);  // (element, 0, 0)
  }

  void generate() {
    const Input<Buffer<>>& input = *input_;
    Output<Func>& result = *result_;
    // The side is a constant in each specialization.
    const Expr side = *side_;
    lanes_ = get_target().natural_vector_size<float>();
    // Each specialization keeps its side's branch alone.
    const bool odd = std::any_of(sides_.begin(), sides_.end(), [](int s) { return s % 2; });
    const bool even = std::any_of(sides_.begin(), sides_.end(), [](int s) { return s % 2 == 0; });
    const bool padded = window.value() == "k3s2p1";
    Tap best = padded ? column_winners(input, side)
               : odd  ? paired_rows(input, side)
                      : tall_plane(input, side);
    if (odd && even && !padded) {
      const Tap tall = tall_plane(input, side);
      const Expr even_side = side % 2 == 0;
      best = {select(even_side, tall.value, best.value), select(even_side, tall.at, best.at)};
    }
    result(k, c1, n1) = Tuple(best.value, cast(index_type, best.at));
    Func(result).output_buffers()[0].dim(0).set_min(0);  // k counts from a vector's first lane

    const FlatPoolStages stages{result, rows, columns, k, j, *side_, sides_, lanes_,
                                padded};
    apply_cpu_schedule<CpuFlatPoolSchedule>(cpu_schedule, stages, {result}, get_target());
  }

 private:
  struct Tap {
    Expr value, at;  // at: the position in its plane
  };

  // f(row) for the row each element v lies in, among the rows its vector of lanes_ meets, for
  // rows of `width` elements (`odd`: the rows stage's, 2 * (side / 2) wide, of odd sides; else
  // the outputs', side / 2 wide, of even sides). The schedule runs whole runs of whole rows (the
  // runtime calls it for whole runs alone), unrolling their vectors: each vector's rows and the
  // lanes of each are then constants, the simplifier drops the rows no lane of a vector lies
  // in, and every row left is a real one. That is what unsafe_promise_clamped states (for
  // bounds inference; no clamp is computed): a clamp cost a third of the kernel's time.
  Expr by_row(const Var& v, bool odd, const Expr& width, const Expr& last_row,
              const std::function<Expr(const Expr&)>& f) const {
    int spans = 1;  // the most rows a vector meets, at any side served of that parity
    for (int s : sides_) {
      if (s % 2 != odd) continue;
      const int w = odd ? 2 * (s / 2) : s / 2;
      for (int i = 0; i < std::lcm(lanes_, w) / lanes_; i++) {
        spans = std::max(spans, (i * lanes_ % w + lanes_ - 1) / w + 1);
      }
    }
    const Expr first_row = (v / lanes_) * lanes_ / width;  // the row of the vector's first lane
    const auto row = [&](int r) { return unsafe_promise_clamped(first_row + r, 0, last_row); };
    Expr chosen = f(row(spans - 1));
    for (int r = spans - 2; r >= 0; r--) {
      chosen = select(v < width * (first_row + r + 1), f(row(r)), chosen);
    }
    return chosen;
  }

  // Even sides: output k's four taps, in the scan's order, the later where greater or NaN. The
  // window of output k, on output row `row`, starts at 2k + side * row in the input and at
  // 2k + side * (2 * (row % out_side) - row) in its plane.
  Tap tall_plane(const Input<Buffer<>>& input, const Expr& side) {
    const Expr out_side = side / 2;
    const Expr last_row = max(input.dim(0).extent() / (2 * side) - 1, 0);
    const Expr start = by_row(k, false, out_side, last_row, [&](const Expr& row) {
      return side * (2 * (row % out_side) - row);
    });
    Tap best;
    for (int dy = 0; dy < 2; dy++) {
      for (int dx = 0; dx < 2; dx++) {
        const Expr tap = dy * side + dx;
        const auto window = [&](const Expr& row) { return input(2 * k + side * row + tap, 0, 0); };
        best = scan(best, {by_row(k, false, out_side, last_row, window), 2 * k + start + tap});
      }
    }
    return best;
  }

  // Odd sides: rows(j), column j % row_width of the rows stage's row j / row_width (rows of
  // every plane, in memory order, 2 * out_width columns each): the later of its two taps where
  // it is greater or NaN (the scan's rule), with its offset in the plane; then the pair of
  // neighbouring columns. Row R (plane R / out_width, row R % out_width of it) starts at
  // row_width * R in the stage and at `shift(R)` past that in the input, which grows with R, so
  // the vectors read by_row from j + shift(R): a dense load a row, none outside the input.
  Tap paired_rows(const Input<Buffer<>>& input, const Expr& side) {
    const Expr out_width = side / 2, row_width = 2 * out_width;
    const Expr last_row = max(input.dim(0).extent() / (side * side) * out_width - 1, 0);
    const auto shift = [&](const Expr& row) {
      return row / out_width * (side * side - row_width * out_width) +
             row % out_width * (2 * side - row_width);
    };
    const auto tap = [&](int dy) {
      return by_row(j, true, row_width, last_row,
                    [&](const Expr& row) { return input(j + shift(row) + dy * side, 0, 0); });
    };
    const Expr top = tap(0), bottom = tap(1);
    const Expr at_top = by_row(j, true, row_width, last_row, [&](const Expr& row) {
      return 2 * (row % out_width) * side + j - row_width * row;
    });
    const Expr bottom_wins = later_wins(top, bottom);
    rows(j) = Tuple(select(bottom_wins, bottom, top), at_top + select(bottom_wins, side, 0));

    // The scan's winner over the four taps in row-major order is the greatest under one total
    // order: NaNs above numbers, the later of two NaNs, the larger number, the earlier of two
    // equal numbers (-0 and 0 too). A maximum under a total order is associative and
    // commutative, so pairing the columns' winners gives it.
    return greater({rows(2 * k)[0], rows(2 * k)[1]}, {rows(2 * k + 1)[0], rows(2 * k + 1)[1]});
  }

  // The scan's winner once it meets `here` (the first tap where best is undefined): the later
  // tap where it is greater or NaN.
  static Tap scan(const Tap& best, const Tap& here) {
    if (!best.value.defined()) return here;
    const Expr wins = later_wins(best.value, here.value);
    return {select(wins, here.value, best.value), select(wins, here.at, best.at)};
  }

  // The greater of two taps under the scan's total order: NaNs above numbers, the later of two
  // NaNs, the larger number, the earlier of two equal numbers.
  static Tap greater(const Tap& a, const Tap& b) {
    const Expr a_nan = is_nan(a.value), b_nan = is_nan(b.value);
    const Expr b_wins = (b_nan && (!a_nan || b.at > a.at)) ||
                        (!a_nan && (b.value > a.value || (b.value == a.value && b.at < a.at)));
    return {select(b_wins, b.value, a.value), select(b_wins, b.at, a.at)};
  }

  // k3s2p1: columns(j), column j % width of the stage's row R = j / width (plane R / out_width,
  // output row y = R % out_width of it): that column's winner over the output row's input rows
  // 2y - 1, 2y, 2y + 1 in the scan's order, a padding row replaced by the middle one (a tap
  // twice changes no winner). Output k then takes the greater of its three columns 2k - 1, 2k,
  // 2k + 1 (the total order above: the columns' winners lie on different rows), a padding
  // column's tap replaced by the middle one: on an odd side, the slot after the side's columns
  // (whose load reads the next input row), which the next row's first output reads as its
  // column -1. The plane index is clamped into the input: a task's tap one slot before its
  // first output reaches the row before, whose winners it never takes, and the first task's
  // plane before the input recomputes the first plane. An odd side's last row of the last plane
  // would read past the input in that slot: the pure definition takes that row from the plane
  // before, and an update redoes it with its columns clamped.
  Tap column_winners(const Input<Buffer<>>& input, const Expr& side) {
    const Expr out_width = (side + 1) / 2, width = 2 * out_width, odd = side % 2;
    const Expr planes = max(input.dim(0).extent() / (side * side), 1);
    const Expr last_row = planes * out_width - 1;
    const auto winner = [&](const Expr& plane, const Expr& y, const Expr& column) {
      Tap best;
      for (int dy = 0; dy < 3; dy++) {
        const Expr in_row = clamp(2 * y - 1 + dy, 0, side - 1);
        best = scan(best, {input(plane * side * side + in_row * side + column, 0, 0),
                           in_row * side + column});
      }
      return best;
    };
    // A plane's rows are unrolled (constant rows, clamps and positions): the plane alone is
    // clamped, and an odd side's last row takes the plane before (the update redoes it).
    // The plane from the stage row (its rows never straddle two): written j / (width *
    // out_width), or left for the simplifier to fold into that, it is a division per lane where
    // the schedule runs bands of rows instead of whole planes. unsafe_promise_clamped keeps the
    // row's division apart and changes no value; its range is true (a task's stage begins at
    // most a plane before the input), so the plane's clamp stays.
    const Expr y = j / width % out_width;
    const Expr row = unsafe_promise_clamped(j / width, -out_width, last_row);
    const Expr last_plane = planes - 1 - select(odd == 1 && y == out_width - 1, 1, 0);
    const Tap inside = winner(clamp(row / out_width, 0, max(last_plane, 0)), y, j % width);
    columns(j) = Tuple(inside.value, inside.at);
    RDom once(0, 1, "once");
    once.where(odd == 1 && j / width >= last_row);
    const Tap last = winner(planes - 1, out_width - 1, min(j % width, side - 1));
    columns(j) = Tuple(last.value, last.at + once);

    const auto tap = [&](int d) {
      const FuncRef winner = columns(2 * k - 1 + d);  // the stage as it lies in memory
      return Tap{winner[0], winner[1]};
    };
    Tap middle = tap(1), left = tap(0), right = tap(2);
    const Expr first = in_column(out_width, 0), past = odd == 1 && in_column(out_width, -1);
    left = {select(first, middle.value, left.value), select(first, middle.at, left.at)};
    right = {select(past, middle.value, right.value), select(past, middle.at, right.at)};
    return greater(greater(left, middle), right);
  }

  // Whether output k lies in output column x (-1: the last) of its row, as comparisons with the
  // starts of the rows its vector of lanes_ meets (k % out_width would split the vectors by
  // lane): constants once the schedule unrolls whole runs of rows and vectors.
  Expr in_column(const Expr& out_width, int x) const {
    int spans = 1;  // the most rows a vector meets, at any side served
    for (int s : sides_) spans = std::max(spans, (lanes_ - 1) / ((s + 1) / 2) + 2);
    const Expr first_row = (k / lanes_) * lanes_ / out_width;
    const Expr at = x < 0 ? out_width + x : Expr(x);
    Expr any = Internal::const_false();
    for (int r = 0; r < spans; r++) any = any || k == out_width * (first_row + r) + at;
    return any;
  }

  Input<Buffer<>>* input_ = nullptr;
  Input<int32_t>* side_ = nullptr;
  Output<Func>* result_ = nullptr;
  std::vector<int> sides_;
  int lanes_ = 0;  // a vector's f32 lanes on the target
  Var j{"j"}, k{"k"}, c1{"c1"}, n1{"n1"};
  Func rows{"rows"}, columns{"columns"};
};

}  // namespace
}  // namespace poolgen

HALIDE_REGISTER_GENERATOR(poolgen::MaxPoolFlat, max_pool_flat)
