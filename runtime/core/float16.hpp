// The 16-bit floats' arithmetic for the runtime's own loops (the fallback for planes beyond a
// kernel's buffers): widening to f32 is exact; narrowing rounds to nearest, ties to even, as
// c10::Half, c10::BFloat16 and the kernels (Halide) do. A NaN narrows as PyTorch's does
// (generators/window.h, pytorch_nan): to 0x7fc0 in bf16, keeping its sign and the payload's top
// bits, quiet, in f16 (x86's F16C).
#pragma once

#include <cstdint>
#include <cstring>

namespace poolgen::detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float bf16_to_float(uint16_t b) { return bits_float(uint32_t{b} << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;
  // Adding just under half of the dropped part, plus the kept part's lowest bit, carries into
  // the kept bits exactly when rounding to nearest (ties to even) rounds up.
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16, exponent = (h >> 10) & 0x1fu,
                 mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Subnormal (or zero): mantissa * 2^-24, exact in f32.
  const float magnitude = static_cast<float>(mantissa) * bits_float(0x33800000u);
  return sign ? -magnitude : magnitude;
}

inline uint16_t float_to_f16(float f) {
  uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((u >> 13) & 0x3ffu);
  if (u >= 0x47800000u) return sign | 0x7c00u;  // 2^16 and above, infinity: infinity
  if (u < 0x38800000u) {
    // Below f16's smallest normal (2^-14): adding 0.5 makes the f32 addition itself round the
    // value to a multiple of 2^-24 (ties to even), which lands in the low mantissa bits.
    return sign | static_cast<uint16_t>(float_bits(bits_float(u) + 0.5f) - 0x3f000000u);
  }
  // Rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits as float_to_bf16
  // does; a carry out of the mantissa steps the exponent, up to infinity.
  u += 0xc8000000u + 0x0fffu + ((u >> 13) & 1u);
  return sign | static_cast<uint16_t>(u >> 13);
}

}  // namespace poolgen::detail
