// schedules/prefetch_lines.h against Halide itself: a pipeline that prefetches a row of its
// input is lowered with and without the pass, and the byte offsets its prefetch loop takes are
// read off the lowered code.
#include "prefetch_lines.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace {

using namespace Halide;
using namespace Halide::Internal;

// The prefetch loop Halide made of a row (one iteration per cache line): its prefetch's offset.
class FindSplitPrefetch : public IRVisitor {
 public:
  std::string loop;
  Expr offset;
  int bytes = 0;

 private:
  using IRVisitor::visit;
  void visit(const For* op) override {
    if (const Call* call = poolgen::split_prefetch(op)) {
      loop = op->name;
      offset = call->args[1];
      bytes = call->type.bytes();
    }
    IRVisitor::visit(op);
  }
};

// A copy of a 2-D input that prefetches its next row, lowered with or without the pass (which
// runs its prefetches where `when` holds, if defined), and the inputs it takes.
Module lowered_copy(const ImageParam& input, bool fixed, const Target& target,
                    const Expr& when = Expr(), std::vector<Argument> args = {}) {
  Func copy("copy");
  Var x("x"), y("y");
  copy(x, y) = input(x, y);
  copy.prefetch(input, y, y, 1, PrefetchBoundStrategy::NonFaulting);
  Pipeline pipeline(copy);
  if (fixed) pipeline.add_custom_lowering_pass(new poolgen::PrefetchEveryLine(target, when));
  args.insert(args.begin(), input);
  return pipeline.compile_to_module(args, "copy", target);
}

// The bytes past iteration 0's that iterations 0..3 of the row's prefetch loop take, for a row
// of `type` on `target`, with or without the pass.
std::vector<int64_t> line_steps(const Type& type, bool fixed,
                                const Target& target = Target("x86-64-linux-avx2")) {
  const ImageParam input(type, 2, "input");
  const Module module = lowered_copy(input, fixed, target);
  FindSplitPrefetch finder;
  for (const LoweredFunc& f : module.functions()) f.body.accept(&finder);
  EXPECT_TRUE(finder.offset.defined()) << "no prefetch loop in the lowered code";
  std::vector<int64_t> steps;
  if (!finder.offset.defined()) return steps;
  const Expr first = substitute(finder.loop, 0, finder.offset);
  for (int i = 0; i < 4; ++i) {
    const Expr step = simplify(substitute(finder.loop, i, finder.offset) - first);
    const std::optional<int64_t> elements = as_const_int(step);
    EXPECT_TRUE(elements.has_value()) << step;
    steps.push_back(elements ? *elements * finder.bytes : -1);
  }
  return steps;
}

TEST(PrefetchEveryLine, TakesEachLineOfARow) {
  for (const Type& type : {Float(32), Int(64), Float(16)}) {
    EXPECT_EQ(line_steps(type, true), (std::vector<int64_t>{0, 64, 128, 192})) << type;
  }
}

// ARM's split is by 32 bytes (Halide's choice: its lines may be 32 or 64 bytes).
TEST(PrefetchEveryLine, TakesEachLineOfARowOnArm) {
  const Target arm("arm-64-linux");
  EXPECT_EQ(line_steps(Float(32), true, arm), (std::vector<int64_t>{0, 32, 64, 96}));
  EXPECT_EQ(line_steps(Float(32), false, arm), (std::vector<int64_t>{0, 128, 256, 384}));
}

// Halide's own split, which the pass corrects: should a Halide release step by lines itself,
// this fails, and the pass must go (it would then skip lines).
TEST(PrefetchEveryLine, HalideStepsByElements) {
  EXPECT_EQ(line_steps(Float(32), false), (std::vector<int64_t>{0, 256, 512, 768}));
}

// Every prefetch (each of Halide's loops over the prefetched region) inside an if on the
// condition given, and the loops that hold them.
class FindGuardedPrefetches : public IRVisitor {
 public:
  explicit FindGuardedPrefetches(std::string condition) : condition_(std::move(condition)) {}
  int guarded = 0, unguarded = 0;

 private:
  using IRVisitor::visit;
  void visit(const IfThenElse* op) override {
    const Variable* v = op->condition.as<Variable>();
    const bool guards = v && v->name == condition_;
    guards_ += guards;
    IRVisitor::visit(op);
    guards_ -= guards;
  }
  void visit(const Call* op) override {
    if (op->is_intrinsic(Call::prefetch)) ++(guards_ > 0 ? guarded : unguarded);
    IRVisitor::visit(op);
  }
  std::string condition_;
  int guards_ = 0;
};

// With a condition (pooling's out_of_cache), the prefetches run only where it holds, and still
// take every line.
TEST(PrefetchEveryLine, RunsWhereItsConditionHolds) {
  const ImageParam input(Float(32), 2, "input");
  const Param<bool> when("when");
  const Module module =
      lowered_copy(input, true, Target("x86-64-linux-avx2"), when, {when});
  FindGuardedPrefetches finder("when");
  for (const LoweredFunc& f : module.functions()) f.body.accept(&finder);
  EXPECT_GT(finder.guarded, 0);
  EXPECT_EQ(finder.unguarded, 0);
  FindSplitPrefetch split;
  for (const LoweredFunc& f : module.functions()) f.body.accept(&split);
  ASSERT_TRUE(split.offset.defined());
  const Expr step = simplify(substitute(split.loop, 1, split.offset) -
                             substitute(split.loop, 0, split.offset));
  EXPECT_TRUE(is_const(step, 16)) << step;  // 16 floats: one line
}

}  // namespace
