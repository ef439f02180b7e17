// Small helpers shared by the poolgen tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "poolgen/poolgen.hpp"

namespace poolgen::test {

inline uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Bit-identical (no NaN exception).
template <typename T>
bool bits_equal(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Bit-identical, except that any NaN equals any NaN.
inline bool same_float(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return bits_of(a) == bits_of(b);
}

inline std::string str(const Ints& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

inline std::string float_str(float f) {
  std::ostringstream os;
  os << f << " (0x" << std::hex << bits_of(f) << ")";
  return os.str();
}

// Compares arrays element by element with `equal`; reports the first few mismatches, each
// element shown by `show`, under the name `what`.
template <typename T, typename Equal, typename Show>
::testing::AssertionResult same_elements(const std::vector<T>& expected,
                                         const std::vector<T>& actual, const char* what,
                                         Equal equal, Show show) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure()
           << "size " << actual.size() << ", expected " << expected.size();
  }
  std::ostringstream os;
  int bad = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!equal(expected[i], actual[i])) {
      if (bad < 8) {
        os << "\n  [" << i << "] got " << show(actual[i]) << ", expected " << show(expected[i]);
      }
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << expected.size() << " " << what
                                       << " differ:" << os.str();
}

// Floats compare by bit pattern, any NaN equal to any NaN.
inline ::testing::AssertionResult same_floats(const std::vector<float>& expected,
                                              const std::vector<float>& actual) {
  return same_elements(expected, actual, "values", same_float, float_str);
}

inline ::testing::AssertionResult same_ints(const std::vector<int64_t>& expected,
                                            const std::vector<int64_t>& actual) {
  return same_elements(
      expected, actual, "indices", [](int64_t a, int64_t b) { return a == b; },
      [](int64_t v) { return v; });
}

inline int64_t numel(const Ints& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

}  // namespace poolgen::test
