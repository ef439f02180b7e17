// Element values of every dtype for the tests: bits, NaN-aware comparison, printing, extremes,
// and the byte patterns guard and sentinel elements hold.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>

#include "dtypes.hpp"
#include "poolgen/poolgen.hpp"

namespace poolgen::test::values {


template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, f16_t> || std::is_same_v<T, bf16_t>;
template <typename T>
constexpr bool kIsFloat = kIsHalf<T> || std::is_floating_point_v<T>;

template <typename T>
bool is_nan_value(T v) {
  if constexpr (std::is_same_v<T, f16_t>) {
    return (v.bits & 0x7c00) == 0x7c00 && (v.bits & 0x03ff) != 0;
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    return (v.bits & 0x7f80) == 0x7f80 && (v.bits & 0x007f) != 0;
  } else if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    (void)v;
    return false;
  }
}

template <typename T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Bit-identical, except that any NaN equals any NaN.
template <typename T>
bool same_value(T a, T b) {
  return (is_nan_value(a) && is_nan_value(b)) || same_bits(a, b);
}

template <typename T>
T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));  // little-endian: the low bytes
  return v;
}

template <typename T>
uint64_t bits_of(T v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}

// A float-like T from a double (rounded to nearest even).
template <typename T>
T from_double(double x) {
  if constexpr (std::is_same_v<T, f16_t>) {
    return test::to_f16(static_cast<float>(x));
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    return test::to_bf16(static_cast<float>(x));
  } else {
    return static_cast<T>(x);
  }
}

template <typename T>
double as_double(T v) {
  if constexpr (kIsHalf<T>) {
    return test::to_float(v);
  } else {
    return static_cast<double>(v);
  }
}

template <typename T>
std::string show(T v) {
  std::ostringstream os;
  if constexpr (kIsFloat<T>) {
    os << as_double(v) << " (0x" << std::hex << bits_of(v) << ")";
  } else {
    os << static_cast<int64_t>(v);
  }
  return os.str();
}

// f16_t / bf16_t: the value with bits `f16` / `bf16`; any other type: `other`.
template <typename T>
T half_bits_or(uint16_t f16, uint16_t bf16, T other) {
  if constexpr (std::is_same_v<T, f16_t>) {
    return f16_t{f16};
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    return bf16_t{bf16};
  } else {
    return other;
  }
}

// The largest and smallest finite value (floats) or the type's range (integers).
template <typename T>
T highest() {
  return half_bits_or<T>(0x7bff, 0x7f7f, std::numeric_limits<T>::max());
}

template <typename T>
T lowest() {
  return half_bits_or<T>(0xfbff, 0xff7f, std::numeric_limits<T>::lowest());
}

// A value that would win any window (a quiet NaN, an integer type's highest): what input bytes
// outside a view hold.
template <typename T>
T winning_value() {
  using L = std::numeric_limits<T>;
  return half_bits_or<T>(0x7e00, 0x7fc0, L::has_quiet_NaN ? L::quiet_NaN() : L::max());
}

template <typename T>
T byte_pattern(unsigned char byte) {
  T v;
  std::memset(&v, byte, sizeof v);
  return v;
}

template <typename T>
T guard_value() {  // output bytes outside a view
  return byte_pattern<T>(0xa5);
}

template <typename T>
T sentinel_value() {  // output elements inside a view before a call
  return byte_pattern<T>(0x5a);
}

}  // namespace poolgen::test::values
