// The runtime's internal pieces on their own, where a wrong answer would show end to end only
// on some machine: the magic divisors GPU kernels divide by (runtime/dispatch/launch.hpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "dispatch/launch.hpp"

namespace poolgen::detail {
namespace {

// n / d for the numerators that stress a divisor: its neighbourhood of multiples, the ends of
// [0, 2^31) and random ones.
void check_divisor(int64_t d, std::mt19937_64& rng) {
  const MagicDivisor m(d);
  ASSERT_LE(m.shift, 62u) << d;
  std::vector<int64_t> numerators = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d,
                                     (int64_t{1} << 31) - 1, (int64_t{1} << 31) - d};
  const int64_t top = ((int64_t{1} << 31) - 1) / d;
  for (int k = 0; k < 40; ++k) {
    const int64_t q = std::uniform_int_distribution<int64_t>(0, top)(rng);
    numerators.push_back(q * d);
    numerators.push_back(q * d - 1);
    numerators.push_back(std::uniform_int_distribution<int64_t>(0, (int64_t{1} << 31) - 1)(rng));
  }
  for (int64_t n : numerators) {
    if (n < 0 || n >= (int64_t{1} << 31)) continue;
    ASSERT_EQ(m.divide(n), n / d) << n << " / " << d;
  }
}

TEST(MagicDivisor, DividesEveryNumeratorBelow2To31Exactly) {
  std::mt19937_64 rng(5);
  for (int64_t d = 1; d <= 4096; ++d) check_divisor(d, rng);
  for (int shift = 12; shift <= 30; ++shift) {
    for (int64_t d : {(int64_t{1} << shift) - 1, int64_t{1} << shift, (int64_t{1} << shift) + 1}) {
      check_divisor(d, rng);
    }
  }
  check_divisor((int64_t{1} << 31) - 1, rng);
  for (int k = 0; k < 2000; ++k) {
    check_divisor(std::uniform_int_distribution<int64_t>(1, (int64_t{1} << 31) - 1)(rng), rng);
  }
}

TEST(MagicDivisor, SmallNumeratorsExhaustively) {
  for (int64_t d = 1; d <= 300; ++d) {
    const MagicDivisor m(d);
    for (int64_t n = 0; n < 70000; ++n) ASSERT_EQ(m.divide(n), n / d) << n << " / " << d;
  }
}

}  // namespace
}  // namespace poolgen::detail
