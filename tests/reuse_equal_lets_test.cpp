// schedules/reuse_equal_lets.h against Halide itself: an accumulating scatter whose where-clause
// and body both read an index (max_unpool_scatter's NCHW gradient, cut down) is lowered with and
// without the pass, and the addresses its loads of the index take are read off the lowered code.
#include "reuse_equal_lets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace Halide;
using namespace Halide::Internal;

// The distinct addresses (index expressions) of the loads of one buffer: two are one where
// their difference simplifies to 0 (the order of a sum's terms is LLVM's to canonicalize).
class LoadAddresses : public IRVisitor {
 public:
  explicit LoadAddresses(std::string buffer) : buffer_(std::move(buffer)) {}
  std::vector<Expr> distinct;

 private:
  using IRVisitor::visit;
  void visit(const Load* op) override {
    if (op->name == buffer_ &&
        std::none_of(distinct.begin(), distinct.end(),
                     [&](const Expr& seen) { return is_const_zero(simplify(seen - op->index)); })) {
      distinct.push_back(op->index);
    }
    IRVisitor::visit(op);
  }
  std::string buffer_;
};

// Each value added to the slot its index names, in planes (p, c, n), an index outside the
// plane skipped: the loads of `indices` in the lowered code, with or without the pass.
std::vector<Expr> index_loads(bool reused) {
  const ImageParam values(Float(32), 3, "values"), indices(Int(64), 3, "indices");
  Func out("out");
  Var p("p"), c("c"), n("n");
  out(p, c, n) = undef(Float(32));
  const Expr plane = out.output_buffer().dim(0).extent();
  RDom r(0, values.dim(0).extent(), "r");
  const Expr index = indices(r, c, n);
  r.where(cast<uint64_t>(index) < cast<uint64_t>(plane));
  const Expr slot = unsafe_promise_clamped(cast<int32_t>(index), 0, plane - 1);
  out(slot, c, n) = out(slot, c, n) + values(r, c, n);
  Pipeline pipeline(out);
  if (reused) pipeline.add_custom_lowering_pass(new poolgen::ReuseEqualLets);
  const Module module = pipeline.compile_to_module({values, indices}, "scatter",
                                                   Target("x86-64-linux-avx2"));
  LoadAddresses loads(indices.name());
  for (const LoweredFunc& f : module.functions()) f.body.accept(&loads);
  return loads.distinct;
}

// Halide 21 addresses the index twice (the where-clause's copy and the body's, from a row's
// start let at two loop levels); if a release stops doing so, this test says the pass may go.
TEST(ReuseEqualLets, HalideAddressesTheIndexTwice) { EXPECT_EQ(index_loads(false).size(), 2U); }

TEST(ReuseEqualLets, AddressesTheIndexOnce) { EXPECT_EQ(index_loads(true).size(), 1U); }

}  // namespace
