// ONNX Runtime's windows that PyTorch's kernels do not have, as passes over max_pool's results
// (docs/design.md, "Hand-written compute"):
// - windows with no tap inside the input (dilation or padding past it): PyTorch's kernels give
//   them -inf and their first tap's index, which only plane offsets carry; ONNX Runtime gives the
//   lowest finite value and the index of coordinates (n, c, -1, ...);
// - windows that start inside the input (SAME's negative padding where the stride passes the
//   kernel): the kernels run on the input less the elements no window reaches, and their plane
//   offsets are moved back to the whole input's.
#pragma once

#include "core/view.hpp"
#include "validate/window.hpp"

namespace poolgen::detail {

// Whether some window of `w` (padding resolved) over `input_shape` pooled to `output_shape` has
// no tap inside the input; names in *dim the first spatial dimension where one has none.
bool has_empty_windows(const Window& w, const Ints& input_shape, const Ints& output_shape,
                       int* dim);

// Writes ONNX Runtime's answer for every window with no tap inside (PoolRule::onnx_runtime) into
// host views `values` and `indices` (batch dimension included, planes from (n0, c0) of the
// frame `frame_shape`): the dtype's lowest finite value, and the index of coordinates (n, c, -1,
// ..., -1) in `format`; with `placeholder`, plane offset 0 instead, an index that a rewrite
// into `format` takes (the kernel's index of such a window may lie past the plane).
void fill_empty_windows(const View& values, const View& indices, const Window& w,
                        const Ints& frame_shape, IndexFormat format, bool placeholder,
                        int64_t n0, int64_t c0);

// Plane offsets in `indices` (host, any strides, i32 or i64) of a plane whose first crop[i]
// elements of each spatial dimension were cut off (`cropped`: its extents) rewritten as offsets
// of the whole plane (`extent`); nd spatial dimensions.
void uncrop_plane_offsets(const View& indices, int nd, const int64_t* cropped,
                          const int64_t* crop, const int64_t* extent);

}  // namespace poolgen::detail
