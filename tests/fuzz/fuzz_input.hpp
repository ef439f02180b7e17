// Decoding libFuzzer's bytes into choices. Every choice consumes a fixed number of bytes from the
// front; an exhausted input reads as zeros, and zero always decodes to the most ordinary choice
// (so a short input is a plain valid call and the fuzzer adds oddities by growing it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace poolgen::fuzz {

// A small deterministic generator for bulk data (values, indices): the input picks its seed.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int64_t below(int64_t n) { return n <= 0 ? 0 : static_cast<int64_t>(next() % uint64_t(n)); }

 private:
  uint64_t state_;
};

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(byte()) << (8 * i);
    return v;
  }
  bool boolean() { return byte() & 1; }
  // True with roughly `percent` percent of the byte values; byte 0 (exhausted) reads false.
  bool chance(int percent) {
    const uint8_t b = byte();
    return b != 0 && (b - 1) * 100 < percent * 255;
  }
  // An integer in [lo, hi] (inclusive): one byte for spans below 256, else eight. Byte 0: lo.
  int64_t range(int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    const uint64_t span = uint64_t(hi) - uint64_t(lo);  // hi - lo, without signed overflow
    const uint64_t raw = span < 255 ? byte() : u64();
    if (span == std::numeric_limits<uint64_t>::max()) return int64_t(uint64_t(lo) + raw);
    return int64_t(uint64_t(lo) + raw % (span + 1));
  }
  // One entry of a list; byte 0 picks the first.
  template <typename T, size_t N>
  const T& pick(const T (&list)[N]) {
    return list[byte() % N];
  }

  bool exhausted() const { return pos_ >= size_; }
  size_t remaining() const { return pos_ < size_ ? size_ - pos_ : 0; }

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
};

// Integers that break shape arithmetic: 0, signs, the int32 and int64 edges, powers of two that
// overflow when multiplied or doubled.
inline constexpr int64_t kEdgeInts[] = {
    0,
    -1,
    1,
    2,
    -2,
    std::numeric_limits<int32_t>::max(),
    int64_t(std::numeric_limits<int32_t>::max()) + 1,
    std::numeric_limits<int32_t>::min(),
    int64_t(1) << 32,
    int64_t(1) << 40,
    int64_t(1) << 62,
    (int64_t(1) << 62) + 1,
    std::numeric_limits<int64_t>::max(),
    std::numeric_limits<int64_t>::max() - 1,
    std::numeric_limits<int64_t>::min(),
    -(int64_t(1) << 62),
    3037000499,  // floor(sqrt(INT64_MAX)): its square fits, one more does not
    3037000500,
    46341,  // the same for int32
    1 << 20,
    -(int64_t(1) << 40),
};

inline int64_t edge_int(FuzzInput& in) {
  int64_t v = in.pick(kEdgeInts);
  // Sometimes a neighbour (without overflowing the fuzzer itself).
  static constexpr int kDeltas[] = {0, 1, -1, 2, -2};
  const int delta = in.pick(kDeltas);
  if (delta > 0 && v <= std::numeric_limits<int64_t>::max() - delta) v += delta;
  if (delta < 0 && v >= std::numeric_limits<int64_t>::min() - delta) v += delta;
  return v;
}

}  // namespace poolgen::fuzz
