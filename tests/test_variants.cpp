// Every CPU variant of the fat kernels gives the reference's results. Each run of this binary
// forces one variant (POOLGEN_FORCE_TARGET = avx512_skylake | avx2 | sse41 | baseline) through
// Halide's can-use-target-features hook; ctest runs it once per variant, one process each.
#include "poolgen/poolgen.hpp"
#include "reference.hpp"

#include <HalideRuntime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace poolgen;

bool has(const uint64_t* features, int feature) {
  return (features[feature >> 6] >> (feature & 63)) & 1;
}

// The instruction-set features, richest first; a variant may use its own and those after it.
const int kIsa[] = {halide_target_feature_avx512_skylake, halide_target_feature_avx512,
                    halide_target_feature_avx2,           halide_target_feature_fma,
                    halide_target_feature_f16c,           halide_target_feature_sse41};

int first_allowed_isa() {
  const char* forced = std::getenv("POOLGEN_FORCE_TARGET");
  const std::string name = forced ? forced : "";
  if (name == "avx512_skylake") return 0;
  if (name == "avx2") return 2;
  if (name == "sse41") return 5;
  return 6;  // baseline: none
}

int g_allowed = 6;
// Each fat kernel asks the hook about its variants once, on its first call, and keeps the
// richest one accepted. This records the richest ISA rank the hook ever accepted.
int g_richest_accepted = 7;

int force_variant(int count, const uint64_t* features) {
  int richest = 6;
  for (int i = 5; i >= 0; --i) {
    if (has(features, kIsa[i])) richest = i;
  }
  if (richest < g_allowed) return 0;
  if (!halide_default_can_use_target_features(count, features)) return 0;
  g_richest_accepted = std::min(g_richest_accepted, richest);
  return 1;
}

class Variant : public ::testing::Test {
 protected:
  void SetUp() override {
    g_allowed = first_allowed_isa();
    constexpr int kWords = (halide_target_feature_end + 63) / 64;
    uint64_t wanted[kWords] = {};
    if (g_allowed < 6) wanted[kIsa[g_allowed] >> 6] |= uint64_t(1) << (kIsa[g_allowed] & 63);
    if (!halide_default_can_use_target_features(kWords, wanted)) {
      GTEST_SKIP() << "this CPU cannot run the " << std::getenv("POOLGEN_FORCE_TARGET")
                   << " variant";
    }
    halide_set_custom_can_use_target_features(force_variant);
  }
};

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-8, 8);
  std::vector<float> v(n);
  for (float& x : v) x = small(rng) * 0.5f;  // many ties
  v[n / 3] = NAN;
  return v;
}

bool same_bits(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

void check_round_trip(int nd, const Ints& shape, const PoolOptions& pool, uint32_t seed) {
  SCOPED_TRACE("nd=" + std::to_string(nd) + " seed=" + std::to_string(seed));
  const std::vector<float> input = random_values(ref::numel(shape), seed);
  Ints out_shape;
  std::vector<float> want_values;
  std::vector<int64_t> want_indices;
  ASSERT_TRUE(ref::max_pool(nd, shape, input, pool, &out_shape, &want_values, &want_indices).ok());

  std::vector<float> values(want_values.size());
  std::vector<int64_t> indices(want_indices.size());
  Status s = max_pool(nd, contiguous(input.data(), shape), contiguous(values.data(), out_shape),
                      contiguous(indices.data(), out_shape), pool);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(indices, want_indices);
  for (size_t i = 0; i < values.size(); ++i) ASSERT_TRUE(same_bits(values[i], want_values[i]));

  UnpoolOptions unpool;
  unpool.kernel_size = pool.kernel_size;
  unpool.stride = pool.stride;
  unpool.padding = pool.padding;
  unpool.output_size = Ints(shape.end() - nd, shape.end());
  for (Path path : {Path::automatic, Path::general}) {
    unpool.path = path;
    Ints unpooled_shape;
    std::vector<float> want;
    ASSERT_TRUE(
        ref::max_unpool(nd, out_shape, values, indices, unpool, &unpooled_shape, &want).ok());
    std::vector<float> got(want.size(), 123.0f);
    s = max_unpool(nd, contiguous(values.data(), out_shape), contiguous(indices.data(), out_shape),
                   contiguous(got.data(), unpooled_shape), unpool);
    ASSERT_TRUE(s.ok()) << s.message();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(same_bits(got[i], want[i])) << i;
  }
}

TEST_F(Variant, EveryKernelMatchesTheReference) {
  uint32_t seed = 1;
  for (const auto& [k, s, p] : {std::tuple{2, 2, 0}, std::tuple{3, 2, 1}, std::tuple{3, 1, 1}}) {
    PoolOptions o;
    o.kernel_size = {k};
    o.stride = {s};
    o.padding = {p};
    for (bool ceil_mode : {false, true}) {
      o.ceil_mode = ceil_mode;
      check_round_trip(1, {2, 3, 37}, o, seed++);
      check_round_trip(2, {2, 3, 19, 23}, o, seed++);
      check_round_trip(3, {1, 2, 7, 9, 11}, o, seed++);
    }
  }
  // Every kernel settled on the forced variant: nothing richer was accepted, and it was (the
  // baseline is the wrappers' fallback, never asked about, so then nothing was accepted).
  EXPECT_EQ(g_richest_accepted, g_allowed < 6 ? g_allowed : 7) << "the forced variant did not run";
}

}  // namespace
