#include "tensors.hpp"

#include "shapes.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace poolgen::detail {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::i64: return "i64";
  }
  return "unknown";
}

size_t dtype_size(DType dtype) { return dtype == DType::i64 ? 8 : 4; }

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

bool View::dense_planes() const {
  int64_t expected = 1;
  for (int i = rank - 1; i >= 2; --i) {
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

Status check_value_dtype(const char* argument, DType dtype) {
  if (dtype != DType::f32) {
    return fail(Code::unsupported, argument, ": dtype ", dtype_name(dtype),
                " is not supported by this build (expected f32)");
  }
  return {};
}

Status check_view(const char* argument, const TensorView& view, DType dtype, const Ints& shape,
                  int nd, View* out) {
  if (view.device != Device::cpu) {
    return fail(Code::unsupported, argument, ": expected a CPU tensor, got device ",
                static_cast<int>(view.device));
  }
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
  const int64_t elements = v.elements();
  if (elements > 0 && view.data == nullptr) {
    return fail(Code::invalid_argument, argument, ": data is null for a tensor of shape ",
                format_shape(shape));
  }
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  for (int i = 0; i < v.rank; ++i) {
    if (v.shape[i] > kMax || v.strides[i] > kMax || v.strides[i] < 0) {
      return fail(Code::unsupported, argument, ": extents and strides must lie in [0, 2^31), got ",
                  "extent ", v.shape[i], " stride ", v.strides[i], " in dimension ", i - missing);
    }
  }
  if (elements > 0 && v.strides[v.rank - 1] != 1 && v.shape[v.rank - 1] > 1) {
    return fail(Code::unsupported, argument, ": expected the innermost stride to be 1, got ",
                v.strides[v.rank - 1]);
  }
  v.strides[v.rank - 1] = 1;
  *out = v;
  return {};
}

HalideView::HalideView(const View& v, bool flat_planes) {
  buffer.host = static_cast<uint8_t*>(v.data);
  buffer.type = v.dtype == DType::i64 ? halide_type_t(halide_type_int, 64)
                                      : halide_type_t(halide_type_float, 32);
  buffer.dim = dims;
  int d = 0;
  if (flat_planes) {
    dims[d++] = {0, static_cast<int32_t>(v.plane()), 1, 0};
  } else {
    for (int i = v.rank - 1; i >= 2; --i) {
      dims[d++] = {0, static_cast<int32_t>(v.shape[i]), static_cast<int32_t>(v.strides[i]), 0};
    }
  }
  for (int i = 1; i >= 0; --i) {
    dims[d++] = {0, static_cast<int32_t>(v.shape[i]), static_cast<int32_t>(v.strides[i]), 0};
  }
  buffer.dimensions = d;
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

void pack(const View& v, void* packed) {
  const size_t size = dtype_size(v.dtype);
  for_each_element(v, [&](int64_t position, int64_t offset) {
    std::memcpy(static_cast<char*>(packed) + position * size,
                static_cast<const char*>(v.data) + offset * size, size);
  });
}

void unpack(const void* packed, const View& v) {
  const size_t size = dtype_size(v.dtype);
  for_each_element(v, [&](int64_t position, int64_t offset) {
    std::memcpy(static_cast<char*>(v.data) + offset * size,
                static_cast<const char*>(packed) + position * size, size);
  });
}

}  // namespace poolgen::detail
