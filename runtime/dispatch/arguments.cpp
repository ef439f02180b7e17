#include "dispatch/arguments.hpp"

#include <limits>

namespace poolgen::detail {

void WindowArgs::append(const Window& window, const Kernel& kernel, KernelArgs* args) {
  int64_t strides[3], dilations[3];  // innermost first
  for (int i = 0; i < window.nd; ++i) {
    const int d = window.nd - 1 - i;
    params[i][0] = static_cast<int32_t>(window.kernel[d]);
    params[i][1] = static_cast<int32_t>(window.stride[d]);
    params[i][2] = static_cast<int32_t>(window.padding[d]);
    params[i][3] = static_cast<int32_t>(window.dilation[d]);
    for (int32_t& p : params[i]) args->push_back(&p);
    strides[i] = window.stride[d];
    dilations[i] = window.dilation[d];
  }
  if (kernel.device == Device::cuda) {
    stride_magic.append(strides, window.nd, args);
    dilation_magic.append(dilations, window.nd, args);
  }
}

namespace {

// The dimensions of `v` as a kernel of `layout` sees them, innermost first: (extent, stride).
int halide_dims(const View& v, Layout layout, bool flat, int64_t (*dims)[2]) {
  int count = 0;
  auto add = [&](int64_t extent, int64_t stride) {
    // An extent of 1 is never stepped along: a stride whose span Halide would refuse (over
    // 2 GiB at 8 bytes an element) is irrelevant.
    constexpr int64_t kLargest = std::numeric_limits<int32_t>::max() / 8;
    dims[count][0] = extent;
    dims[count++][1] = extent == 1 && stride > kLargest ? 0 : stride;
  };
  if (layout == Layout::channels_last) add(v.shape[1], v.strides[1]);
  if (flat) {
    add(v.plane(), v.plane_step(layout));
  } else {
    for (int i = v.rank - 1; i >= 2; --i) add(v.shape[i], v.strides[i]);
  }
  if (layout == Layout::contiguous) add(v.shape[1], v.strides[1]);
  add(v.shape[0], v.strides[0]);
  return count;
}

}  // namespace

bool fits_kernel(const View& v, Layout layout, bool flat) {
  // Nearly every call's views are far below the limits: with fewer than 2^30 bytes of elements
  // and of offsets, every extent is below 2^30 and every stride, and each dimension's span
  // (at most the last element's offset plus one stride), below 2^31 bytes. Extents of 1, whose
  // strides are free, reach Halide at most 2^31 / 8 (halide_dims).
  constexpr int64_t kSmall = int64_t{1} << 30;
  int64_t count = 1, last = 0;
  for (int i = 0; i < v.rank; ++i) {
    count *= v.shape[i];
    last += (v.shape[i] - 1) * v.strides[i];
  }
  const int64_t bytes = element_size(v.dtype);
  if (count > 0 && count * bytes < kSmall && (last + 1) * bytes < kSmall) return true;
  // Without Halide's large_buffers feature a buffer's extents, strides, the span of each
  // dimension and its element count must stay below 2^31 (bytes, for the last two); extents
  // stay below 2^30 so that coordinates plus a window's reach do too.
  // Extents and strides are tested against 2^30 and 2^31 before they multiply, so no product
  // overflows 64 bits: elements stays below 2^31 * 2^30, a span below 2^30 * 8 * 2^31.
  constexpr uint64_t kLimit = std::numeric_limits<int32_t>::max();
  const auto size = static_cast<uint64_t>(bytes);
  int64_t dims[5][2];
  uint64_t elements = size;
  const int dimensions = halide_dims(v, layout, flat, dims);
  for (int d = 0; d < dimensions; ++d) {
    const auto extent = static_cast<uint64_t>(dims[d][0]);
    const auto stride = static_cast<uint64_t>(dims[d][1]);
    if (extent > kMaxKernelExtent || stride > kLimit) return false;
    elements *= extent;
    if (elements > kLimit || extent * size * stride > kLimit) return false;
  }
  return true;
}

bool fits_kernel(const Views& views, Layout layout, bool flat) {
  for (const View& v : views) {
    if (!fits_kernel(v, layout, flat)) return false;
  }
  return true;
}

HalideView::HalideView(const View& v, Layout layout, DType type, bool flat) {
  static const halide_type_t kTypes[] = {
      {halide_type_float, 32}, {halide_type_int, 64},  {halide_type_float, 64},
      {halide_type_float, 16}, {halide_type_bfloat, 16}, {halide_type_int, 8},
      {halide_type_uint, 8},   {halide_type_int, 16},  {halide_type_int, 32}};
  buffer.host = static_cast<uint8_t*>(v.data);
  buffer.type = kTypes[static_cast<int>(type)];
  buffer.dim = dims;
  int64_t extents[5][2];
  buffer.dimensions = halide_dims(v, layout, flat, extents);
  for (int d = 0; d < buffer.dimensions; ++d) {
    dims[d] = {0, static_cast<int32_t>(extents[d][0]), static_cast<int32_t>(extents[d][1]), 0};
  }
}

}  // namespace poolgen::detail
