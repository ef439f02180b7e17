// Small helpers shared by the poolgen tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dtypes.hpp"
#include "names.hpp"
#include "poolgen/poolgen.hpp"

namespace poolgen::test {

inline uint32_t bits_of(float f) { return float_to_bits(f); }

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

// Offsets of a view's elements (row-major logical order) from `start`; empty strides: row-major.
inline std::vector<int64_t> element_offsets(const Ints& shape, Ints strides, int64_t start) {
  const size_t rank = shape.size();
  if (strides.empty()) {
    strides.assign(rank, 1);
    for (int d = static_cast<int>(rank) - 2; d >= 0; --d) {
      strides[d] = strides[d + 1] * shape[d + 1];
    }
  }
  std::vector<int64_t> out;
  const int64_t n = numel(shape);
  out.reserve(static_cast<size_t>(n > 0 ? n : 0));
  std::vector<int64_t> idx(rank, 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = start;
    for (size_t d = 0; d < rank; ++d) off += idx[d] * strides[d];
    out.push_back(off);
    for (int d = static_cast<int>(rank) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// True when every element of `backing` not at one of `offsets` still has the bits of `outside`.
template <typename T>
bool outside_untouched(const std::vector<T>& backing, const std::vector<int64_t>& offsets,
                       T outside) {
  std::vector<char> in_view(backing.size(), 0);
  for (int64_t o : offsets) in_view[static_cast<size_t>(o)] = 1;
  for (size_t k = 0; k < backing.size(); ++k) {
    if (!in_view[k] && !bits_equal(backing[k], outside)) return false;
  }
  return true;
}

// While it lives, every call streams its outputs (set_streaming_bytes(0)): the non-temporal
// path, which the default keeps for outputs beyond the caches, runs on the tests' small shapes.
// Every call is shared among three threads too, so that an image alone (fewer images than
// threads) has its slabs split among tasks, in uneven shares.
struct StreamingEveryOutput {
  StreamingEveryOutput() {
    set_streaming_bytes(0);
    set_min_parallel_bytes(0);
    set_num_threads(3);
  }
  ~StreamingEveryOutput() {
    set_streaming_bytes(-1);
    set_min_parallel_bytes(-1);
    set_num_threads(0);
  }
  StreamingEveryOutput(const StreamingEveryOutput&) = delete;
  StreamingEveryOutput& operator=(const StreamingEveryOutput&) = delete;
};

}  // namespace poolgen::test
