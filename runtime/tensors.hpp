// Tensor views checked against what a call expects, and their halide_buffer_t form.
#pragma once

#include "poolgen/poolgen.hpp"

#include <HalideRuntime.h>

#include <functional>

namespace poolgen::detail {

// A view with the batch dimension always present (N = 1 added to batch-less views) and explicit
// strides, in PyTorch order.
struct View {
  void* data = nullptr;
  DType dtype = DType::f32;
  int rank = 0;
  int64_t shape[5] = {}, strides[5] = {};

  int64_t elements() const;
  // Elements in one (n, c) plane: the product of the spatial extents.
  int64_t plane() const;
  // True when the spatial dimensions (from dimension 2) are packed row-major.
  bool dense_planes() const;
};

// The value types this build has kernels for (f32).
Status check_value_dtype(const char* argument, DType dtype);

// Checks `view` has `dtype` and `shape` and sits on the CPU with usable strides; `nd` spatial
// dimensions decide where a missing batch dimension goes.
Status check_view(const char* argument, const TensorView& view, DType dtype, const Ints& shape,
                  int nd, View* out);

// An output must not reach one element through two positions (a zero or overlapping stride).
Status check_no_overlap(const char* argument, const View& view);

// Kernels address a plane with 32-bit offsets: larger planes are refused.
Status check_plane(const char* argument, const View& view);

// A halide_buffer_t over a View (dimensions reversed: innermost first). With flat_planes, the
// spatial dimensions are presented as one (dense_planes() must hold).
struct HalideView {
  halide_buffer_t buffer{};
  halide_dimension_t dims[5]{};
  HalideView(const View& view, bool flat_planes = false);
};

// Calls f(position, offset) for every element in row-major order: position counts elements,
// offset is the element's distance from data in elements.
void for_each_element(const View& view, const std::function<void(int64_t, int64_t)>& f);

// A contiguous copy of `view`, or back: copies every element between a view and packed storage.
void pack(const View& view, void* packed);
void unpack(const void* packed, const View& view);

const char* dtype_name(DType dtype);
size_t dtype_size(DType dtype);

}  // namespace poolgen::detail
