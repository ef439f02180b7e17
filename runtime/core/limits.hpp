// The limits every shape, window and kernel buffer is checked against, and overflow-free
// multiplication within them.
#pragma once

#include <cstdint>

namespace poolgen::detail {

// The most elements a tensor may have: its byte size (8 bytes an element at most) and every
// offset into it stay far from int64's limit, so shape and offset arithmetic cannot overflow.
constexpr int64_t kMaxElements = int64_t{1} << 59;
// The most a window parameter (kernel_size, stride, padding, dilation) may be: the kernels take
// them as 32-bit scalars.
constexpr int64_t kMaxWindowParameter = (int64_t{1} << 31) - 1;
// The most a pooling window may reach (span + stride + 2 * padding), and the longest dimension a
// kernel's buffer may have: the kernels' 32-bit coordinates (at most their sum) cannot overflow.
constexpr int64_t kMaxWindowReach = int64_t{1} << 29;
// The most taps a pooling window may have (the product of its dilated spans): the general
// kernel's boundary handling holds a window's footprint in memory.
constexpr int64_t kMaxWindowVolume = int64_t{1} << 26;
constexpr int64_t kMaxKernelExtent = int64_t{1} << 30;

// a * b for a, b >= 0, false (and *out untouched) when it would exceed `limit`. Inline: operands
// in [0, 2^31), nearly every call's, multiply without overflow and without a division (tens of
// cycles, several times a call).
bool multiply_within_slow(int64_t a, int64_t b, int64_t limit, int64_t* out);
inline bool multiply_within(int64_t a, int64_t b, int64_t limit, int64_t* out) {
  if (((a | b) >> 31) != 0) return multiply_within_slow(a, b, limit, out);
  if (a * b > limit) return false;
  *out = a * b;
  return true;
}


}  // namespace poolgen::detail
