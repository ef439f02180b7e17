// MaxRule::first_tap as a pass over max_pool's results (first_tap.cpp says why a pass): a
// hand-written kernel (docs/design.md, "Hand-written compute").
#pragma once

#include "core/view.hpp"
#include "validate/window.hpp"

namespace poolgen::detail {

// Rescans, by ONNX Runtime's and TensorFlow's rule, every window whose maximum in `values` (as
// PyTorch's scan found it) is NaN, and rewrites its value and plane offset. Host views with the
// batch dimension (View), `w` with its padding resolved.
void apply_first_tap_rule(const View& input, const View& values, const View& indices,
                          const Window& w);

}  // namespace poolgen::detail
