#include "tensors.hpp"

#include "shapes.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace poolgen::detail {

int64_t View::elements() const {
  int64_t count = 1;
  for (int i = 0; i < rank; ++i) count *= shape[i];
  return count;
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

Status check_no_overlap(const char* argument, const View& view) {
  // Sorted by stride, each dimension must step over everything the finer ones cover.
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, extent)
  for (int i = 0; i < view.rank; ++i) {
    if (view.shape[i] > 1) dims.emplace_back(view.strides[i], view.shape[i]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t covered = 1;
  for (const auto& [stride, extent] : dims) {
    if (stride < covered) {
      return fail(Code::invalid_argument, argument, ": expected strides that keep elements apart",
                  ", got stride ", stride, " where ", covered, " or more is needed (shape ",
                  format_shape(Ints(view.shape, view.shape + view.rank)), ", strides ",
                  format_shape(Ints(view.strides, view.strides + view.rank)), ")");
    }
    covered = stride * extent;
  }
  return {};
}

Status check_plane(const char* argument, const View& view) {
  if (view.plane() > std::numeric_limits<int32_t>::max()) {
    return fail(Code::unsupported, argument, ": planes of more than 2^31-1 elements are not ",
                "supported yet, got ", view.plane());
  }
  return {};
}

Status check_dtype(const char* argument, DType dtype) {
  if (static_cast<uint32_t>(dtype) > static_cast<uint32_t>(DType::i32)) {
    return fail(Code::invalid_argument, argument, ": expected a dtype code from 0 to ",
                static_cast<int>(DType::i32), ", got ", static_cast<int>(dtype));
  }
  return {};
}

Status check_index_dtype(const char* argument, DType dtype, int64_t plane) {
  if (dtype != DType::i64 && dtype != DType::i32) {
    POOLGEN_RETURN_IF_ERROR(check_dtype(argument, dtype));
    return fail(Code::invalid_argument, argument, ": expected dtype i64 or i32, got ",
                dtype_name(dtype));
  }
  if (dtype == DType::i32 && plane > std::numeric_limits<int32_t>::max()) {
    return fail(Code::invalid_argument, argument, ": i32 indices cannot name every slot of a ",
                "plane of ", plane, " elements (at most 2^31-1); use i64 indices");
  }
  return {};
}

Status check_view_shape(const char* argument, const TensorView& view, DType dtype,
                        const Ints& shape, int nd, View* out) {
  if (view.device != Device::cpu && view.device != Device::cuda) {
    return fail(Code::unsupported, argument, ": expected device cpu (0) or cuda (1), got device ",
                static_cast<int>(view.device));
  }
  POOLGEN_RETURN_IF_ERROR(check_dtype(argument, view.dtype));
  if (view.dtype != dtype) {
    return fail(Code::invalid_argument, argument, ": expected dtype ", dtype_name(dtype),
                ", got ", dtype_name(view.dtype));
  }
  if (view.shape != shape) {
    return fail(Code::invalid_argument, argument, ": expected shape ", format_shape(shape),
                ", got ", format_shape(view.shape));
  }
  const int rank = static_cast<int>(shape.size());
  if (!view.strides.empty() && view.strides.size() != shape.size()) {
    return fail(Code::invalid_argument, argument, ": expected ", rank, " strides, got ",
                view.strides.size(), " (", format_shape(view.strides), ")");
  }
  const int missing = nd + 2 - rank;  // 1 for a batch-less view
  View v;
  v.data = view.data;
  v.dtype = dtype;
  v.device = view.device;
  v.rank = nd + 2;
  int64_t packed = 1;
  for (int i = rank - 1; i >= 0; --i) {
    v.shape[i + missing] = shape[i];
    v.strides[i + missing] = view.strides.empty() ? packed : view.strides[i];
    packed *= shape[i];
  }
  if (missing) {
    v.shape[0] = 1;
    v.strides[0] = packed;
  }
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  for (int i = 0; i < v.rank; ++i) {
    if (v.shape[i] > kMax || v.strides[i] > kMax || v.strides[i] < 0) {
      return fail(Code::unsupported, argument, ": extents and strides must lie in [0, 2^31), got ",
                  "extent ", v.shape[i], " stride ", v.strides[i], " in dimension ", i - missing);
    }
  }
  // A dimension of extent 1 is never stepped along: its stride may be anything, so it is set to
  // what lets the view fit a layout.
  if (v.shape[1] == 1) v.strides[1] = 1;
  if (v.shape[v.rank - 1] == 1) v.strides[v.rank - 1] = 1;
  *out = v;
  return {};
}

Status check_leading_view(const char* argument, const TensorView& view, int nd, DType index_dtype,
                          int64_t index_plane, View* out) {
  POOLGEN_RETURN_IF_ERROR(check_dtype(argument, view.dtype));
  POOLGEN_RETURN_IF_ERROR(check_index_dtype("indices", index_dtype, index_plane));
  return check_view_shape(argument, view, view.dtype, view.shape, nd, out);
}

Status check_view(const char* argument, const TensorView& view, DType dtype, const Ints& shape,
                  int nd, View* out) {
  POOLGEN_RETURN_IF_ERROR(check_view_shape(argument, view, dtype, shape, nd, out));
  if (out->elements() > 0 && view.data == nullptr) {
    return fail(Code::invalid_argument, argument, ": data is null for a tensor of shape ",
                format_shape(shape));
  }
  return {};
}

namespace {

// `view`'s shape packed in `layout` at `data`: contiguous is row-major; channels-last keeps the
// channel innermost, then the spatial dimensions row-major, then the batch.
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

}  // namespace

Staged::Staged(const View& view, Layout layout, bool flat, Role role)
    : original_(view), staged_(view), role_(role) {
  if (fits(view, layout) && (!flat || view.flat_planes(layout))) return;
  scratch_.resize(static_cast<size_t>(view.elements()) * dtype_size(view.dtype));
  staged_ = packed(view, layout, scratch_.data());
  if (role == input) copy_elements(original_, staged_);
}

void Staged::finish() const {
  if (role_ == output && !scratch_.empty()) copy_elements(staged_, original_);
}

HalideView::HalideView(const View& v, Layout layout, DType type, bool flat) {
  static const halide_type_t kTypes[] = {
      {halide_type_float, 32}, {halide_type_int, 64},  {halide_type_float, 64},
      {halide_type_float, 16}, {halide_type_bfloat, 16}, {halide_type_int, 8},
      {halide_type_uint, 8},   {halide_type_int, 16},  {halide_type_int, 32}};
  buffer.host = static_cast<uint8_t*>(v.data);
  buffer.type = kTypes[static_cast<int>(type)];
  buffer.dim = dims;
  auto add = [&](int64_t extent, int64_t stride) {
    dims[buffer.dimensions++] = {0, static_cast<int32_t>(extent), static_cast<int32_t>(stride), 0};
  };
  if (layout == Layout::channels_last) add(v.shape[1], v.strides[1]);
  if (flat) {
    add(v.plane(), v.plane_step(layout));
  } else {
    for (int i = v.rank - 1; i >= 2; --i) add(v.shape[i], v.strides[i]);
  }
  if (layout == Layout::contiguous) add(v.shape[1], v.strides[1]);
  add(v.shape[0], v.strides[0]);
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

namespace {

// Copies rows of the innermost dimension with element type T (an integer of the dtype's width).
template <typename T>
void copy_rows(const View& from, const View& to) {
  const int last = from.rank - 1;
  const int64_t n = from.shape[last], fs = from.strides[last], ts = to.strides[last];
  int64_t index[5] = {};
  const auto* src = static_cast<const T*>(from.data);
  auto* dst = static_cast<T*>(to.data);
  while (true) {
    int64_t f = 0, t = 0;
    for (int i = 0; i < last; ++i) {
      f += index[i] * from.strides[i];
      t += index[i] * to.strides[i];
    }
    for (int64_t k = 0; k < n; ++k) dst[t + k * ts] = src[f + k * fs];
    int i = last - 1;
    while (i >= 0 && ++index[i] == from.shape[i]) index[i--] = 0;
    if (i < 0) return;
  }
}

}  // namespace

void copy_elements(const View& from, const View& to) {
  if (from.elements() == 0) return;
  switch (dtype_size(from.dtype)) {
    case 1: return copy_rows<uint8_t>(from, to);
    case 2: return copy_rows<uint16_t>(from, to);
    case 4: return copy_rows<uint32_t>(from, to);
    default: return copy_rows<uint64_t>(from, to);
  }
}

}  // namespace poolgen::detail
