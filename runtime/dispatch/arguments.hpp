// A kernel's arguments: Halide buffers over views, the limits of what such a buffer addresses,
// the window's scalars and the magic pairs GPU kernels divide by, and how a CUDA call treats
// each buffer.
#pragma once

#include "core/inline_vector.hpp"
#include "core/limits.hpp"
#include "core/status.hpp"
#include "core/view.hpp"
#include "dispatch/kernel_table.hpp"

#include <HalideRuntime.h>

namespace poolgen::detail {

// A halide_buffer_t over a View of `layout` (Halide's dimension order: innermost first), typed
// as `type` (unpooling kernels move any dtype of their width). With flat, the spatial
// dimensions are presented as one (flat_planes(layout) must hold). fits_kernel must hold. The
// buffer points into the object, which stays where it is made.
struct HalideView {
  halide_buffer_t buffer{};
  halide_dimension_t dims[5]{};
  HalideView(const View& view, Layout layout, DType type, bool flat = false);
  HalideView(const HalideView&) = delete;
  HalideView& operator=(const HalideView&) = delete;
};

// Whether a kernel of `layout` can address `v` (with flat planes, if asked): Halide's buffers
// hold 32-bit extents and strides and, without its large_buffers feature, span less than 2 GiB.
// Larger calls are split into pieces that fit.
bool fits_kernel(const View& v, Layout layout, bool flat = false);

// fits_kernel for every view of a call.
bool fits_kernel(const Views& views, Layout layout, bool flat = false);

// A kernel's argv: the user context, then its buffers and scalars (3-D pooling backward's CUDA
// window gather has the most: 35, with its magic pairs).
using KernelArgs = InlineVector<void*, 35>;

// The pair that divides every numerator in [0, 2^31) by d (1 <= d < 2^31) with a multiply and a
// shift, as GPU kernels divide by runtime values (generators/window.h, Divisor): with
// l = ceil(log2 d), multiplier = ceil(2^(31+l) / d) (below 2^32) and shift = 31 + l,
// n / d == (n * multiplier) >> shift.
struct MagicDivisor {
  uint32_t multiplier, shift;
  explicit MagicDivisor(int64_t d) {
    int l = 0;
    while ((int64_t{1} << l) < d) ++l;
    shift = static_cast<uint32_t>(31 + l);
    multiplier = static_cast<uint32_t>(((uint64_t{1} << shift) + d - 1) / d);
  }
  int64_t divide(int64_t n) const {
    return static_cast<int64_t>((static_cast<uint64_t>(n) * multiplier) >> shift);
  }
};

// The magic pairs of up to three divisors, for a kernel's arguments (MagicInputs: per
// dimension, multiplier then shift). The object holds the values while the kernel runs.
struct MagicArgs {
  uint32_t pairs[3][2];
  // Sets the pairs of divisors[0, count) and appends them to `args`.
  void append(const int64_t* divisors, int count, KernelArgs* args);
};

// A window's scalars as max_pool's generator declares them: per spatial dimension, innermost
// first, kernel, stride, padding and dilation; for a GPU kernel then the strides' and the
// dilations' magic pairs. The object holds the values while the kernel runs.
struct WindowArgs {
  int32_t params[3][4];
  MagicArgs stride_magic, dilation_magic;
  void append(const Window& window, const Kernel& kernel, KernelArgs* args);
};

// One buffer of a CUDA call: its data is a device pointer (on_device) or host memory; outputs
// in host memory are copied back after the kernel.
struct CudaBuffer {
  halide_buffer_t* buffer;
  bool on_device;
  bool output;
  // An output the kernel may leave partly unwritten (a gated kernel's): in host memory, its data
  // goes to the device first, so that what the kernel leaves comes back unchanged.
  bool kept = false;
};
// A call's buffers, held in place (at most eight: the winner unpooling's).
using CudaBuffers = InlineVector<CudaBuffer, 8>;

}  // namespace poolgen::detail
