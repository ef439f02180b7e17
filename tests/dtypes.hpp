// Element types in tests: the C++ type of each DType, the 16-bit float conversions, and a visitor
// that calls a generic lambda with a value of the right C++ type.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "poolgen/poolgen.hpp"

namespace poolgen::test {

inline float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// bf16 is the top half of an f32: widening is exact.
inline float to_float(bf16_t v) { return bits_to_float(static_cast<uint32_t>(v.bits) << 16); }

// f16 widens exactly to f32 (subnormals become normal f32s).
inline float to_float(f16_t v) {
  const uint32_t sign = (v.bits & 0x8000u) << 16, exp = (v.bits >> 10) & 0x1f, man = v.bits & 0x3ff;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));  // inf, NaN
  if (exp != 0) return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
  const float magnitude = std::ldexp(static_cast<float>(man), -24);  // zero, subnormal: exact
  return sign ? -magnitude : magnitude;
}

// Rounds to nearest even; every NaN becomes 0x7fc0, as c10::BFloat16 rounds it.
inline bf16_t to_bf16(float f) {
  uint32_t b = float_to_bits(f);
  if (std::isnan(f)) return bf16_t{0x7fc0};
  b += 0x7fff + ((b >> 16) & 1);
  return bf16_t{static_cast<uint16_t>(b >> 16)};
}

// Rounds to nearest even by searching the f16 whose widening is nearest; tests only.
inline f16_t to_f16(float f) {
  if (std::isnan(f)) {  // as x86's F16C narrows it (c10::Half): sign, quiet bit, payload's top
    const uint32_t b = float_to_bits(f);
    return f16_t{static_cast<uint16_t>(((b >> 16) & 0x8000) | 0x7e00 | ((b >> 13) & 0x3ff))};
  }
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const float a = std::fabs(f);
  uint16_t lo = 0, hi = 0x7c00;  // 0 .. inf
  while (hi - lo > 1) {  // largest magnitude whose value is <= a
    const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    (to_float(f16_t{mid}) <= a ? lo : hi) = mid;
  }
  // Past the largest finite f16 the next step is 2^16, which rounds to infinity (IEEE 754):
  // 65520 and above overflow.
  const float below = to_float(f16_t{lo}), above = hi == 0x7c00 ? 65536.0f : to_float(f16_t{hi});
  uint16_t pick = lo;
  if (a - below > above - a || (a - below == above - a && (lo & 1))) pick = hi;
  if (a == below) pick = lo;
  return f16_t{static_cast<uint16_t>(sign | pick)};
}

// A value of T from a float that T holds exactly (small integers, for integer types).
template <typename T>
T from_float(float x) {
  if constexpr (std::is_same_v<T, f16_t>) {
    return to_f16(x);
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    return to_bf16(x);
  } else {
    return static_cast<T>(x);
  }
}

template <typename T>
constexpr bool is_float_type() {
  return std::is_floating_point_v<T> || std::is_same_v<T, f16_t> || std::is_same_v<T, bf16_t>;
}

template <typename T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<f16_t>() { return DType::f16; }
template <> constexpr DType dtype_of<bf16_t>() { return DType::bf16; }
template <> constexpr DType dtype_of<int8_t>() { return DType::i8; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<int16_t>() { return DType::i16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8,
                                       DType::u8,  DType::i16, DType::i32, DType::i64};

// Calls f(T{}) with T the C++ type of `dtype`.
template <typename F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::f16: return f(f16_t{});
    case DType::bf16: return f(bf16_t{});
    case DType::i8: return f(int8_t{});
    case DType::u8: return f(uint8_t{});
    case DType::i16: return f(int16_t{});
    case DType::i32: return f(int32_t{});
    case DType::i64: break;
  }
  return f(int64_t{});
}

// The gradient dtypes (the backward ops' float types).
inline constexpr DType kGradientDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

// Calls f(T{}) with T the C++ type of a gradient dtype and returns true; false for any other
// dtype (f is not instantiated for the other types: the reference has no backward for them).
template <typename F>
bool visit_gradient_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: f(float{}); return true;
    case DType::f64: f(double{}); return true;
    case DType::f16: f(f16_t{}); return true;
    case DType::bf16: f(bf16_t{}); return true;
    default: return false;
  }
}

}  // namespace poolgen::test
