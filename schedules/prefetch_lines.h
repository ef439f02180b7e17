// A lowering pass that makes Halide 21's prefetches cover every cache line of what they name.
// Halide splits a prefetched row into one prefetch per cache line (64 bytes; 32 on ARM), but
// steps the prefetch's offset, which counts elements, by the line's bytes: a row of 4-byte
// elements got one line in four (over four times its span), of 8-byte elements one in eight.
// The pass makes each such loop step by one line.
#pragma once

#include "Halide.h"

#include <string>
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
  explicit PrefetchEveryLine(const Halide::Target& target)
      : line_(target.arch == Halide::Target::ARM ? 32 : 64) {}

 private:
  using IRMutator::visit;

  Halide::Internal::Stmt visit(const Halide::Internal::For* loop) override {
    using namespace Halide::Internal;
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

  int line_;
};

}  // namespace poolgen
