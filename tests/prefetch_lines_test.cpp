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

// The bytes past iteration 0's that iterations 0..3 of the row's prefetch loop take, for a row
// of `type` on `target`, with or without the pass.
std::vector<int64_t> line_steps(const Type& type, bool fixed,
                                const Target& target = Target("x86-64-linux-avx2")) {
  ImageParam input(type, 2, "input");
  Func copy("copy");
  Var x("x"), y("y");
  copy(x, y) = input(x, y);
  copy.prefetch(input, y, y, 1, PrefetchBoundStrategy::NonFaulting);
  Pipeline pipeline(copy);
  if (fixed) pipeline.add_custom_lowering_pass(new poolgen::PrefetchEveryLine(target));
  const Module module = pipeline.compile_to_module({input}, "copy", target);
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

}  // namespace
