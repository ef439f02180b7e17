// Tensors whose (n, c) planes the runtime hands over flat: Halide arguments (p, c, n), or
// (c, p, n) in channels-last. The kernels that move elements by index (the winner unpooling, the
// unpooling's backward) run over them, and report the first invalid index in input order from
// inside the kernel: a GPU kernel cannot stop with an error.
#pragma once

#include "Halide.h"
#include "window.h"

#include <functional>
#include <vector>

namespace poolgen {

struct FlatPlanes {
  Layout layout;
  Halide::Expr channels, plane, batches;  // extents of the tensor the elements run over

  template <typename Input>
  FlatPlanes(const Input& tensor, Layout l)
      : layout(l),
        channels(tensor.dim(l == Layout::channels_last ? 0 : 1).extent()),
        plane(tensor.dim(spatial_dim(0, l)).extent()),
        batches(tensor.dim(2).extent()) {}

  // Every element, in memory order (neighbouring threads read neighbouring elements).
  Halide::RDom elements(const char* name) const {
    return layout == Layout::channels_last ? Halide::RDom(0, channels, 0, plane, 0, batches, name)
                                           : Halide::RDom(0, plane, 0, channels, 0, batches, name);
  }

  // An element of `r` as (p, c, n). Schedules split r[0] into blocks or tasks whose last one runs
  // past the end under a guard, and Halide bounds the where-clauses' loads without it: r[0] is
  // clamped, which changes nothing inside the guard.
  std::vector<Halide::Expr> pcn(const Halide::RDom& r) const {
    using Halide::clamp;
    Halide::Expr r0 = clamp(r[0], 0, (layout == Layout::channels_last ? channels : plane) - 1);
    return layout == Layout::channels_last ? std::vector<Halide::Expr>{r[1], r0, r[2]}
                                           : std::vector<Halide::Expr>{r0, r[1], r[2]};
  }

  // The Halide arguments of element (p, c, n).
  std::vector<Halide::Expr> at(const std::vector<Halide::Expr>& e) const {
    return tensor_args<Halide::Expr>({e[0]}, e[1], e[2], layout);
  }

  // Its position in input order, (n * C + c) * P + p.
  Halide::Expr position(const std::vector<Halide::Expr>& e) const {
    return (Halide::cast<int64_t>(e[2]) * channels + e[1]) * plane + e[0];
  }

  // The (p, c, n) of a position, clamped into the tensor.
  std::vector<Halide::Expr> element(const Halide::Expr& position) const {
    using Halide::cast;
    using Halide::clamp;
    const Halide::Expr per_image = cast<int64_t>(channels) * plane;
    return {cast<int32_t>(clamp(position % plane, 0, plane - 1)),
            cast<int32_t>(clamp(position / plane % channels, 0, channels - 1)),
            cast<int32_t>(clamp(position / per_image, 0, batches - 1))};
  }
};

// The first element in input order whose index fails `valid`: first_invalid() is its position
// (FlatPlanes::position), or int64's largest when every index is valid. `bad` is the reduction's
// domain (for the schedule); `index_of(first)` reads the element's index.
struct FirstInvalid {
  Halide::Func first_invalid{"first_invalid"};
  Halide::RDom bad;

  // `runs`: whether the kernel runs at all (a gated kernel's, else true).
  FirstInvalid(const FlatPlanes& planes, const std::function<Halide::Expr(const std::vector<Halide::Expr>&)>& index,
               const std::function<Halide::Expr(const Halide::Expr&)>& valid,
               const Halide::Expr& runs = Halide::Internal::const_true()) {
    bad = planes.elements("invalid_element");
    const std::vector<Halide::Expr> e = planes.pcn(bad);
    bad.where(runs && !valid(index(e)));
    first_invalid() = Halide::Int(64).max();
    first_invalid() = Halide::min(first_invalid(), planes.position(e));
  }
};

// Defines the kernel's outputs invalid_position() (FirstInvalid's) and invalid_index() (that
// element's index, of `index_type`; 0 when there is none).
inline void report_first_invalid(const FirstInvalid& f, const FlatPlanes& planes,
                                 const std::function<Halide::Expr(const std::vector<Halide::Expr>&)>& index,
                                 const Halide::Type& index_type, Halide::Func invalid_position,
                                 Halide::Func invalid_index) {
  Halide::Expr first = f.first_invalid();
  invalid_position() = first;
  invalid_index() = Halide::select(first == Halide::Int(64).max(), Halide::cast(index_type, 0),
                                   index(planes.element(first)));
}

}  // namespace poolgen
