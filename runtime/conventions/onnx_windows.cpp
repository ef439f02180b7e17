#include "conventions/onnx_windows.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>


namespace poolgen::detail {
namespace {

// Whether pooled coordinate o of spatial dimension i has a tap in [0, extent): its first tap at
// or past 0 is before the end.
bool has_tap(const Window& w, int i, int64_t o, int64_t extent) {
  const int64_t start = o * w.stride[i] - w.padding[i], d = w.dilation[i];
  const int64_t skipped = start >= 0 ? 0 : (-start + d - 1) / d;
  return skipped < w.kernel[i] && start + skipped * d < extent;
}

// The lowest finite value of `dtype`, as its bytes.
void lowest_bytes(DType dtype, unsigned char* out) {
  const auto put = [&](auto v) { std::memcpy(out, &v, sizeof v); };
  switch (dtype) {
    case DType::f32: return put(std::numeric_limits<float>::lowest());
    case DType::f64: return put(std::numeric_limits<double>::lowest());
    case DType::f16: return put(uint16_t{0xfbff});  // -65504
    case DType::bf16: return put(uint16_t{0xff7f});
    case DType::i8: return put(std::numeric_limits<int8_t>::lowest());
    case DType::u8: return put(uint8_t{0});
    case DType::i16: return put(std::numeric_limits<int16_t>::lowest());
    case DType::i32: return put(std::numeric_limits<int32_t>::lowest());
    case DType::i64: return put(std::numeric_limits<int64_t>::lowest());
  }
}

// Calls f(i64 element) on every index of `v` (i32 or i64, any strides), in place.
template <typename F>
void for_each_index(const View& v, F f) {
  int64_t at[5] = {};
  const int64_t count = v.elements();
  for (int64_t e = 0; e < count; ++e) {
    int64_t offset = 0, rest = e;
    for (int d = v.rank - 1; d >= 0; --d) {
      at[d] = rest % v.shape[d];
      rest /= v.shape[d];
      offset += at[d] * v.strides[d];
    }
    if (v.dtype == DType::i32) {
      int32_t& x = static_cast<int32_t*>(v.data)[offset];
      x = static_cast<int32_t>(f(x));
    } else {
      int64_t& x = static_cast<int64_t*>(v.data)[offset];
      x = f(x);
    }
  }
}

}  // namespace

void uncrop_plane_offsets(const View& indices, int nd, const int64_t* cropped,
                          const int64_t* crop, const int64_t* extent) {
  for_each_index(indices, [&](int64_t q) {
    int64_t x[3], p = 0;
    for (int i = nd - 1; i >= 0; --i) {
      x[i] = q % cropped[i] + crop[i];
      q /= cropped[i];
    }
    for (int i = 0; i < nd; ++i) p = p * extent[i] + x[i];
    return p;
  });
}

bool has_empty_windows(const Window& w, const Ints& input_shape, const Ints& output_shape,
                       int* dim) {
  const size_t first = input_shape.size() - w.nd;
  for (int64_t e : output_shape) {
    if (e == 0) return false;  // no window at all
  }
  for (int i = 0; i < w.nd; ++i) {
    // A window starting inside the input holds its first tap: only those starting before it
    // (o*s < p) or past its end (o*s >= in + p) can hold none, a few at each edge. Visiting
    // every window would walk extents of up to 2^59.
    const int64_t out = output_shape[first + i], in = input_shape[first + i];
    const int64_t s = w.stride[i], p = w.padding[i];
    const int64_t before = std::min(out, p > 0 ? (p + s - 1) / s : 0);
    const int64_t past = std::max(before, (in + p + s - 1) / s);
    const auto none_in = [&](int64_t from, int64_t to) {
      for (int64_t o = from; o < to; ++o) {
        if (!has_tap(w, i, o, in)) return true;
      }
      return false;
    };
    if (none_in(0, before) || none_in(past, out)) {
      *dim = i;
      return true;
    }
  }
  return false;
}

void fill_empty_windows(const View& values, const View& indices, const Window& w,
                        const Ints& frame_shape, IndexFormat format, bool placeholder,
                        int64_t n0, int64_t c0) {
  const int nd = w.nd;
  const size_t lead = frame_shape.size() - nd;
  const int64_t channels = lead == 2 ? frame_shape[1] : frame_shape[0];
  int64_t extent[3] = {1, 1, 1}, plane = 1;
  std::vector<char> empty[3];  // per spatial dimension: which pooled coordinates have no tap
  for (int i = 0; i < nd; ++i) {
    extent[i] = frame_shape[lead + i];
    plane *= extent[i];
    empty[i].resize(values.shape[2 + i]);
    for (int64_t o = 0; o < values.shape[2 + i]; ++o) empty[i][o] = !has_tap(w, i, o, extent[i]);
  }
  // Coordinates all -1: the plane offset -(1 + W + W*H...) row-major, -(1 + H + H*W...) in
  // ONNX's column-major order.
  int64_t row_major = 0, column_major = 0, step = 1;
  for (int i = nd - 1; i >= 0; --i) row_major -= step, step *= extent[i];
  step = 1;
  for (int i = 0; i < nd; ++i) column_major -= step, step *= extent[i];
  unsigned char lowest[8];
  lowest_bytes(values.dtype, lowest);
  const int64_t width = element_size(values.dtype);
  int64_t o[3] = {};
  for (int64_t n = 0; n < values.shape[0]; ++n) {
    for (int64_t c = 0; c < values.shape[1]; ++c) {
      const int64_t image = n0 + n, channel = c0 + c, frame_plane = image * channels + channel;
      int64_t index = 0;
      if (!placeholder) {
        switch (format) {
          case IndexFormat::onnx: index = frame_plane * plane + row_major; break;
          case IndexFormat::onnx_column_major: index = frame_plane * plane + column_major; break;
          case IndexFormat::tensorflow: index = row_major * channels + channel; break;
          case IndexFormat::tensorflow_with_batch:
            index = (image * plane + row_major) * channels + channel;
            break;
          default: index = row_major; break;
        }
      }
      const int64_t pooled = values.plane();
      for (int64_t q = 0; q < pooled; ++q) {
        int64_t rest = q;
        bool none = false;
        for (int i = nd - 1; i >= 0; --i) {
          o[i] = rest % values.shape[2 + i];
          rest /= values.shape[2 + i];
          none = none || empty[i][o[i]];
        }
        if (!none) continue;
        int64_t at_value = n * values.strides[0] + c * values.strides[1];
        int64_t at_index = n * indices.strides[0] + c * indices.strides[1];
        for (int i = 0; i < nd; ++i) {
          at_value += o[i] * values.strides[2 + i];
          at_index += o[i] * indices.strides[2 + i];
        }
        std::memcpy(static_cast<char*>(values.data) + at_value * width, lowest, width);
        if (indices.dtype == DType::i32) {
          static_cast<int32_t*>(indices.data)[at_index] = static_cast<int32_t>(index);
        } else {
          static_cast<int64_t*>(indices.data)[at_index] = index;
        }
      }
    }
  }
}

}  // namespace poolgen::detail
