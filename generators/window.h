// Window geometry shared by the pooling and unpooling algorithms (../shared/SEMANTICS.md).
#pragma once

#include "Halide.h"

#include <vector>

namespace poolgen {

// One spatial dimension of a pooling window. Fields are Exprs so a window can be a runtime
// input or a compile-time constant alike.
struct Window1D {
  Halide::Expr kernel, stride, padding, dilation;

  // First tap of output position o (may lie in the padding).
  Halide::Expr start(const Halide::Expr& o) const { return o * stride - padding; }

  // The start stepped forward by the dilation until it is in bounds (it may pass the end).
  Halide::Expr first_in_bounds(const Halide::Expr& o) const {
    Halide::Expr s = start(o);
    return Halide::select(s < 0, s + ((dilation - 1 - s) / dilation) * dilation, s);
  }
};

// Row-major offset of `coords` inside one plane of `extents`; both innermost first, as Halide
// orders dimensions. Computed in `index_type` so large planes do not overflow.
inline Halide::Expr flat_offset(const std::vector<Halide::Expr>& coords,
                                const std::vector<Halide::Expr>& extents,
                                const Halide::Type& index_type) {
  Halide::Expr flat = Halide::cast(index_type, 0);
  for (int i = static_cast<int>(coords.size()) - 1; i >= 0; --i) {
    flat = flat * Halide::cast(index_type, extents[i]) + Halide::cast(index_type, coords[i]);
  }
  return flat;
}

// The smallest value of `t`: the running maximum starts here (-inf for floats).
inline Halide::Expr lowest(const Halide::Type& t) {
  return t.is_float() ? Halide::cast(t, Halide::Expr(-std::numeric_limits<double>::infinity()))
                      : t.min();
}

// Halide's order of a rank-nd tensor's arguments: spatial (innermost first), channel, batch.
inline std::vector<Halide::Expr> tensor_args(const std::vector<Halide::Expr>& spatial,
                                             const Halide::Expr& c, const Halide::Expr& n) {
  std::vector<Halide::Expr> args = spatial;
  args.push_back(c);
  args.push_back(n);
  return args;
}

}  // namespace poolgen
