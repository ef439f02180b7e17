// A lowering pass that gives one name to a value Halide let twice. Lowering can hoist one loop
// invariant at two loop levels under two names (an RDom's where-clause and its body each got
// their own copy of a row's start), and LLVM, meeting the two copies' addresses as different
// values, then loads the same element twice: NCHW's accumulating scatter read each index once
// for its check and again for its slot. Any expression equal to an enclosing let's pure value
// (a let's own value included) is replaced by that let's name, so both copies use one value.
#pragma once

#include "Halide.h"

#include <string>
#include <utility>
#include <vector>

namespace poolgen {

class ReuseEqualLets : public Halide::Internal::IRMutator {
 private:
  using IRMutator::mutate;
  using IRMutator::visit;

  Halide::Expr mutate(const Halide::Expr& e) override {
    using namespace Halide::Internal;
    if (!e.as<Variable>() && !is_const(e)) {
      for (const auto& [earlier, name] : enclosing_) {
        if (equal(earlier, e)) return Variable::make(e.type(), name);
      }
    }
    return IRMutator::mutate(e);
  }

  Halide::Internal::Stmt visit(const Halide::Internal::LetStmt* op) override {
    using namespace Halide::Internal;
    const Halide::Expr value = mutate(op->value);
    if (value.as<Variable>()) {
      return mutate(substitute(op->name, value, op->body));
    }
    const bool pure = is_pure(value);
    if (pure) enclosing_.emplace_back(value, op->name);
    const Stmt body = mutate(op->body);
    if (pure) enclosing_.pop_back();
    return LetStmt::make(op->name, value, body);
  }

  std::vector<std::pair<Halide::Expr, std::string>> enclosing_;  // pure lets in scope
};

}  // namespace poolgen
