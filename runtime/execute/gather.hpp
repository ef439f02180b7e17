// The fixed windows' gathers on the CPU (max_unpool_gather: unpooling's, and pooling's gradient
// with accumulate): each output slot reads the cells whose windows reach it, which serves a call
// only while every index lies in its own cell's window. A gather that finds one that does not
// declines (its generator's requirement), and the scatter then serves the call. Unpooling's
// gradient by windows (max_unpool_backward_window: each cell reads its own window) runs here
// too, the gather by index behind it.
#pragma once

#include "core/view.hpp"
#include "dispatch/kernel_table.hpp"

namespace poolgen::detail {

// Whether the gather `kernel` takes views (values, indices, output) whole, as they are (fits and
// fits_kernel), and within their bounds (Launch::within_views: its vectors may need more
// channels, or a wider row, than the views have). Decided once for a call's shapes.
[[gnu::cold]] Status gather_takes(const Kernel& kernel, const Views& views, bool* takes);

// Runs the gather `kernel` on views it takes (gather_takes): *served false where it declined
// (the caller then runs the scatter); a failure of any other kind is an internal error. The
// call moves `call_bytes`. An unpooling gather's indices count plane q of the views (n * C + c)
// from q * plane_stride (ONNX's global offsets: the output's plane; 0 for plane offsets), which
// the caller has checked the index dtype holds for every plane.
Status gather_if_served(const Kernel& kernel, const Views& views, int64_t call_bytes,
                        bool* served, int64_t plane_stride = 0);

}  // namespace poolgen::detail
