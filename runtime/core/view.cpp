#include "core/view.hpp"

namespace poolgen::detail {

int64_t total_bytes(const Views& views) {
  int64_t total = 0;
  for (const View& view : views) total += view.bytes();
  return total;
}

int64_t View::plane() const {
  int64_t count = 1;
  for (int i = 2; i < rank; ++i) count *= shape[i];
  return count;
}

int64_t View::plane_step(Layout layout) const {
  if (layout == Layout::contiguous) return 1;
  for (int i = rank - 1; i >= 2; --i) {
    if (shape[i] > 1) return strides[i];
  }
  return 1;
}

bool View::flat_planes(Layout layout) const {
  // Extents of 1 are never stepped along, whatever their strides.
  int64_t expected = plane_step(layout);
  for (int i = rank - 1; i >= 2; --i) {
    if (shape[i] > 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

bool fits(const View& v, Layout layout) {
  const int d = layout == Layout::contiguous ? v.rank - 1 : 1;
  return v.strides[d] == 1 || v.shape[d] == 1;
}

Layout layout_of(const View& v) {
  return !fits(v, Layout::contiguous) && fits(v, Layout::channels_last) ? Layout::channels_last
                                                                        : Layout::contiguous;
}

View packed(const View& view, Layout layout, void* data) {
  View p = view;
  p.data = data;
  int64_t stride = 1;
  if (layout == Layout::channels_last) {
    p.strides[1] = 1;
    stride = p.shape[1];
  }
  for (int d = p.rank - 1; d >= 0; --d) {
    if (layout == Layout::channels_last && d == 1) continue;
    p.strides[d] = stride;
    stride *= p.shape[d];
  }
  return p;
}

View packed_like(const View& view, DType dtype, const Ints& shape, int nd, Layout layout) {
  View like = view;
  like.dtype = dtype;
  for (int i = 0; i < nd; ++i) like.shape[2 + i] = shape[shape.size() - nd + i];
  return packed(like, layout, nullptr);
}

bool is_packed(const View& view, Layout layout) {
  const View p = packed(view, layout, view.data);
  for (int d = 0; d < view.rank; ++d) {
    if (view.shape[d] > 1 && view.strides[d] != p.strides[d]) return false;
  }
  return true;
}

void for_each_element(const View& v, const std::function<void(int64_t, int64_t)>& f) {
  if (v.elements() == 0) return;
  int64_t position = 0, index[5] = {};
  while (true) {
    int64_t offset = 0;
    for (int i = 0; i < v.rank; ++i) offset += index[i] * v.strides[i];
    f(position++, offset);
    int i = v.rank - 1;
    while (i >= 0 && ++index[i] == v.shape[i]) index[i--] = 0;
    if (i < 0) return;
  }
}


}  // namespace poolgen::detail
