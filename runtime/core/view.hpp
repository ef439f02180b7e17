// Tensors inside the runtime: a View (the batch dimension always present, explicit strides) and
// what is asked of one's geometry: its layout, its planes, its packed form, its slices.
#pragma once

#include "core/inline_vector.hpp"
#include "poolgen/poolgen.hpp"

#include <functional>

namespace poolgen::detail {

// dtype_size for a dtype already checked valid, inline: views ask it several times a call.
inline int64_t element_size(DType dtype) {
  constexpr int64_t kSizes[] = {4, 8, 8, 2, 2, 1, 1, 2, 4};  // DType's order
  return kSizes[static_cast<int>(dtype)];
}

// A view with the batch dimension always present (N = 1 added to batch-less views) and explicit
// strides, in PyTorch order.
struct View {
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  int rank = 0;
  // Entries [0, rank) only: the rest stay unset, as zeroing five-entry arrays for every view a
  // call builds was a measurable part of its fixed cost.
  int64_t shape[5], strides[5];

  int64_t elements() const {
    int64_t count = 1;
    for (int i = 0; i < rank; ++i) count *= shape[i];
    return count;
  }
  int64_t bytes() const { return elements() * element_size(dtype); }
  // Elements in one (n, c) plane: the product of the spatial extents.
  int64_t plane() const;
  // The innermost spatial extent: a row of a plane.
  int64_t row() const { return shape[rank - 1]; }
  // True when the spatial dimensions form one flat dimension of step plane_step(layout): 1 in
  // contiguous, the innermost stepped spatial stride in channels-last.
  bool flat_planes(Layout layout) const;
  int64_t plane_step(Layout layout) const;
};

// Whether a kernel of `layout` takes `view` as it is: the dimension that layout keeps innermost
// (the last spatial one, or the channel) has stride 1.
bool fits(const View& view, Layout layout);

// The layout whose kernels serve a call on `view` (its input): contiguous when it fits, else
// channels-last when it fits, else contiguous (through a packed copy).
Layout layout_of(const View& view);

// `view`'s shape packed in `layout` at `data`: contiguous is row-major; channels-last keeps the
// channel innermost, then the spatial dimensions row-major, then the batch.
View packed(const View& view, Layout layout, void* data);

// A packed view of `shape` (N, C, spatial...) of `dtype` in `layout` at `data` (the runtime's
// unit tests and benchmarks build their views so).
inline View dense(void* data, DType dtype, const Ints& shape, Layout layout) {
  View v;
  v.dtype = dtype;
  v.rank = static_cast<int>(shape.size());
  for (int i = 0; i < v.rank; ++i) v.shape[i] = shape[i];
  return packed(v, layout, data);
}

// A view with `view`'s batch and channels, `dtype` and the spatial extents of `shape` (its last
// nd), packed in `layout`, without data: the view a call's other tensor would have (for the
// kernel-name queries, which know the leading tensor alone).
View packed_like(const View& view, DType dtype, const Ints& shape, int nd, Layout layout);

// Whether `view` is packed(view, layout, its data): one run of memory (extents of 1 aside).
bool is_packed(const View& view, Layout layout);

// Elements [start, start + count) of dimension `dim` of `v`. Inline: the scatter's groups slice
// their planes twice per view, and out of line each slice was a copied view.
inline View slice(const View& v, int dim, int64_t start, int64_t count) {
  View s = v;
  s.data = static_cast<char*>(v.data) + start * v.strides[dim] * element_size(v.dtype);
  s.shape[dim] = count;
  return s;
}

// `v` without dimensions [first, first + count), which have extent 1.
inline View without_dims(const View& v, int first, int count) {
  View w = v;
  w.rank -= count;
  for (int i = first; i < w.rank; ++i) {
    w.shape[i] = v.shape[i + count];
    w.strides[i] = v.strides[i + count];
  }
  return w;
}

// A call's views, which share their batch and channel extents (N and C).
using Views = InlineVector<View, 3>;
// The bytes of all of a call's views together.
int64_t total_bytes(const Views& views);

// Calls f(position, offset) for every element in row-major order: position counts elements,
// offset is the element's distance from data in elements.
void for_each_element(const View& view, const std::function<void(int64_t, int64_t)>& f);


}  // namespace poolgen::detail
