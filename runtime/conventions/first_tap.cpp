// MaxRule::first_tap, ONNX Runtime's and TensorFlow's scan: the window's first tap, replaced only
// by a greater one. It differs from PyTorch's (greater or NaN) only on windows holding a NaN, and
// those are the windows whose PyTorch maximum is NaN: the kernels compute PyTorch's scan, and this
// pass rescans just those windows. It costs a read of the values where no NaN is (no kernel
// variant per rule, nothing added to the footprint of programs that keep PyTorch's rule).
#include "conventions/first_tap.hpp"

#include "core/float16.hpp"
#include "validate/views.hpp"

#include <cmath>
#include <cstring>

namespace poolgen::detail {
namespace {

// Element `offset` of a float view, widened (exactly) to double.
double widened(const View& v, int64_t offset) {
  const char* at = static_cast<const char*>(v.data) + offset * element_size(v.dtype);
  switch (v.dtype) {
    case DType::f32: {
      float f;
      std::memcpy(&f, at, sizeof f);
      return f;
    }
    case DType::f64: {
      double d;
      std::memcpy(&d, at, sizeof d);
      return d;
    }
    case DType::f16:
    case DType::bf16: {
      uint16_t b;
      std::memcpy(&b, at, sizeof b);
      return v.dtype == DType::f16 ? f16_to_float(b) : bf16_to_float(b);
    }
    default: return 0;
  }
}

// NaN tests: floats by comparison, the 16-bit floats by their bits (exponent all ones, mantissa
// not zero: above the infinity's bits once the sign is off).
template <typename T, uint16_t kInfinity = 0>
bool nan_at(const T* at, int64_t j) {
  if constexpr (kInfinity != 0) {
    return (at[j] & 0x7fff) > kInfinity;
  } else {
    return at[j] != at[j];
  }
}

// Whether any of `count` elements from `at`, `step` apart, is NaN: a plain loop per type, as this
// scan is all the rule costs where no NaN is.
template <typename T, uint16_t kInfinity = 0>
bool any_nan_in(const T* at, int64_t step, int64_t count) {
  int found = 0;  // an int, not a bool: GCC vectorizes the f32 and 16-bit loops then
  if (step == 1) {  // a loop of its own: it vectorizes
    for (int64_t j = 0; j < count; ++j) found |= nan_at<T, kInfinity>(at, j);
  } else {
    for (int64_t j = 0; j < count; ++j) found |= nan_at<T, kInfinity>(at, j * step);
  }
  return found != 0;
}

bool row_has_nan(const View& v, int64_t offset, int64_t step, int64_t count) {
  switch (v.dtype) {
    case DType::f32: return any_nan_in(static_cast<const float*>(v.data) + offset, step, count);
    case DType::f64: return any_nan_in(static_cast<const double*>(v.data) + offset, step, count);
    case DType::f16:
      return any_nan_in<uint16_t, 0x7c00>(static_cast<const uint16_t*>(v.data) + offset, step,
                                          count);
    case DType::bf16:
      return any_nan_in<uint16_t, 0x7f80>(static_cast<const uint16_t*>(v.data) + offset, step,
                                          count);
    default: return false;
  }
}

// Rescans the window of the values' element at row-major `position` (memory offset `at`) by the
// first-tap rule and writes its value and plane offset.
void rescan(const View& input, const View& values, const View& indices, const Window& w,
            int64_t position, int64_t at) {
  const int nd = w.nd;
  // The element's (n, c, o...) from its row-major position.
  int64_t o[3] = {}, rest = position;
  for (int i = nd - 1; i >= 0; --i) {
    o[i] = rest % values.shape[2 + i];
    rest /= values.shape[2 + i];
  }
  const int64_t c = rest % values.shape[1], n = rest / values.shape[1];
  const int64_t base = n * input.strides[0] + c * input.strides[1];
  // Taps in row-major order: the first in the plane is taken, later ones only when greater.
  int64_t tap[3] = {}, best_offset = -1, best_index = 0;
  double best = 0;
  for (bool more = true; more;) {
    int64_t offset = base, index = 0;
    bool inside = true;
    for (int i = 0; i < nd; ++i) {
      const int64_t x = o[i] * w.stride[i] - w.padding[i] + tap[i] * w.dilation[i];
      inside = inside && x >= 0 && x < input.shape[2 + i];
      offset += x * input.strides[2 + i];
      index = index * input.shape[2 + i] + x;
    }
    if (inside) {
      const double v = widened(input, offset);
      if (best_offset < 0 || v > best) best = v, best_offset = offset, best_index = index;
    }
    int i = nd - 1;
    while (i >= 0 && ++tap[i] == w.kernel[i]) tap[i--] = 0;
    more = i >= 0;
  }
  if (best_offset < 0) return;  // an empty window keeps PyTorch's answer
  const int64_t width = element_size(values.dtype);
  std::memcpy(static_cast<char*>(values.data) + at * width,
              static_cast<const char*>(input.data) + best_offset * width, width);
  // The indices share the values' shape; their offset is found the same way.
  int64_t index_at = 0;
  rest = position;
  for (int d = values.rank - 1; d >= 0; --d) {
    index_at += rest % values.shape[d] * indices.strides[d];
    rest /= values.shape[d];
  }
  if (indices.dtype == DType::i32) {
    static_cast<int32_t*>(indices.data)[index_at] = static_cast<int32_t>(best_index);
  } else {
    static_cast<int64_t*>(indices.data)[index_at] = best_index;
  }
}

// Whether v's elements fill one block of memory, packed in either layout (extents of 1 aside,
// whose strides are never stepped along).
bool packed_in_some_layout(const View& v) {
  for (const Layout layout : {Layout::contiguous, Layout::channels_last}) {
    const View p = packed(v, layout, v.data);
    bool same = true;
    for (int d = 0; d < v.rank; ++d) {
      same = same && (v.shape[d] == 1 || v.strides[d] == p.strides[d]);
    }
    if (same) return true;
  }
  return false;
}

}  // namespace

void apply_first_tap_rule(const View& input, const View& values, const View& indices,
                          const Window& w) {
  if (!is_float_dtype(values.dtype) || values.elements() == 0) return;
  // Most results hold no NaN: one scan in memory order says so, where the rows below would
  // step across channels-last memory (measured 1.7 ms against 0.2 at 8x64x56x56 f32).
  if (packed_in_some_layout(values) && !row_has_nan(values, 0, 1, values.elements())) return;
  // Row by row of the innermost dimension; only rows holding a NaN are looked at element by
  // element.
  const int last = values.rank - 1;
  const int64_t length = values.shape[last], step = values.strides[last];
  const int64_t rows = values.elements() / length;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, offset = 0;
    for (int d = last - 1; d >= 0; --d) {
      offset += rest % values.shape[d] * values.strides[d];
      rest /= values.shape[d];
    }
    if (!row_has_nan(values, offset, step, length)) continue;
    for (int64_t j = 0; j < length; ++j) {
      if (std::isnan(widened(values, offset + j * step))) {
        rescan(input, values, indices, w, r * length + j, offset + j * step);
      }
    }
  }
}

}  // namespace poolgen::detail
