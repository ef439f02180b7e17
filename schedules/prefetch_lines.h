// A lowering pass that makes Halide 21's prefetches cover every cache line of what they name.
// Halide splits a prefetched row into one prefetch per cache line (64 bytes; 32 on ARM), but
// steps the prefetch's offset, which counts elements, by the line's bytes: a row of 4-byte
// elements got one line in four (over four times its span), of 8-byte elements one in eight.
// The pass makes each such loop step by one line. Given a condition (a scalar input of the
// pipeline), it also runs each prefetch only where that holds: prefetches of data the caches
// already hold cost their instructions and buy nothing.
#pragma once

#include "Halide.h"

#include <string>
#include <utility>
#include <vector>

namespace poolgen {

// The prefetch of a loop Halide split a prefetched row into (one iteration per line), or null.
inline const Halide::Internal::Call* split_prefetch(const Halide::Internal::For* loop) {
  using namespace Halide::Internal;
  const Evaluate* body = loop->body.as<Evaluate>();
  const Call* call = body ? body->value.as<Call>() : nullptr;
  return loop->name.rfind("prefetch_split_", 0) == 0 && call &&
                 call->is_intrinsic(Call::prefetch) && call->args.size() == 4
             ? call
             : nullptr;
}

class PrefetchEveryLine : public Halide::Internal::IRMutator {
 public:
  explicit PrefetchEveryLine(const Halide::Target& target, Halide::Expr when = Halide::Expr())
      : line_(target.arch == Halide::Target::ARM ? 32 : 64), when_(std::move(when)) {}

 private:
  using IRMutator::visit;

  Halide::Internal::Stmt visit(const Halide::Internal::For* loop) override {
    using namespace Halide::Internal;
    // Halide's loops over a prefetched region (prefetch_reduce_*, prefetch_split_*): the
    // outermost one is guarded whole, so that a call that skips them computes none of their
    // bounds.
    if (!inside_ && loop->name.rfind("prefetch_", 0) == 0) {
      inside_ = true;
      const Stmt body = mutate(Stmt(loop));
      inside_ = false;
      return guarded(body);
    }
    const Call* call = split_prefetch(loop);
    const int bytes = call ? call->type.bytes() : 0;
    if (bytes <= 1 || line_ % bytes != 0) return IRMutator::visit(loop);
    // Iteration i (one per line of the span) prefetched element line * i past the start; it
    // now takes element line * (i / bytes) + (i % bytes) * (line / bytes) = i * line / bytes.
    const Halide::Expr i = Variable::make(Halide::Int(32), loop->name);
    std::vector<Halide::Expr> args = call->args;
    args[1] = substitute(loop->name, i / bytes, args[1]) + (i % bytes) * (line_ / bytes);
    const Stmt prefetch =
        Evaluate::make(Call::make(call->type, Call::prefetch, args, Call::Intrinsic));
    return For::make(loop->name, loop->min, loop->extent, loop->for_type,
                     loop->partition_policy, loop->device_api, prefetch);
  }

  // A prefetch Halide did not split (a line or less).
  Halide::Internal::Stmt visit(const Halide::Internal::Evaluate* op) override {
    using namespace Halide::Internal;
    const Call* call = op->value.as<Call>();
    return call && call->is_intrinsic(Call::prefetch) && !inside_ ? guarded(op) : Stmt(op);
  }

  Halide::Internal::Stmt guarded(const Halide::Internal::Stmt& prefetch) const {
    return when_.defined() ? Halide::Internal::IfThenElse::make(when_, prefetch) : prefetch;
  }

  int line_;
  bool inside_ = false;  // within a prefetch loop, whose outermost loop is guarded
  Halide::Expr when_;  // prefetches run where it holds; undefined: always
};

}  // namespace poolgen
