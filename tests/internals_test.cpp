// The runtime's internal pieces on their own, where a wrong answer would show end to end only
// on some machine or some shape: the magic divisors GPU kernels divide by, a launch's account of
// how its kernel ended (declined or failed) and of the region it would touch, the spans the
// overlap check keeps, piece splitting and the scatter's group sizing.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/view.hpp"
#include "dispatch/kernel_table.hpp"
#include "dispatch/launch.hpp"
#include "execute/gather.hpp"
#include "execute/scatter.hpp"
#include "execute/staging.hpp"
#include "validate/views.hpp"

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

// A dense view of `shape` (N, C, spatial...) in `layout` at `data`.
View dense(void* data, DType dtype, const Ints& shape, Layout layout) {
  View v;
  v.dtype = dtype;
  v.rank = static_cast<int>(shape.size());
  for (int i = 0; i < v.rank; ++i) v.shape[i] = shape[i];
  return packed(v, layout, data);
}

const Kernel& kernel_named(const KernelTable& table, const std::string& name) {
  for (const Kernel& k : table.kernels()) {
    if (name == k.name) return k;
  }
  ADD_FAILURE() << name << " is not in the table";
  return table.kernels().front();
}

// The CPU unpooling gradient stops at an invalid index (its generator's require): a launch with
// `declined` reports that as no error; without, as an internal error naming the kernel.
TEST(Launch, ARequirementDeclinesAndOnlyWhereAsked) {
  const Kernel& k = kernel_named(backward_kernels(), "max_unpool_backward_b32_i64");
  std::vector<float> grad(16, 1.0f), out(4, 0.0f);
  std::vector<int64_t> indices{0, 5, 10, 15};
  const Views views{dense(grad.data(), DType::f32, {1, 1, 4, 4}, k.layout),
                    dense(indices.data(), DType::i64, {1, 1, 2, 2}, k.layout),
                    dense(out.data(), DType::f32, {1, 1, 2, 2}, k.layout)};
  auto launch = [&](bool* declined) {
    Launch l(k, true);
    l.add_view(views[0], k.value, Access::read);
    l.add_view(views[1], k.index, Access::read);
    l.add_view(views[2], k.value, Access::write);
    return l.run(0, declined);
  };
  bool declined = true;
  ASSERT_TRUE(launch(&declined).ok());
  EXPECT_FALSE(declined);
  indices[2] = 16;  // outside the 4x4 plane
  const Status asked = launch(&declined);
  EXPECT_TRUE(asked.ok()) << asked.message();
  EXPECT_TRUE(declined);
  const Status failed = launch(nullptr);
  EXPECT_EQ(failed.code(), Code::internal);
  EXPECT_EQ(failed.kind(), ErrorKind::internal);
  EXPECT_NE(failed.message().find(k.name), std::string::npos) << failed.message();
}

// A gather's vectors run along the channels in channels-last: the bounds query says whether a
// call's views hold the region the kernel touches (fewer channels than its lanes do not), and
// leaves the views as they were.
TEST(Launch, BoundsQueryFindsRegionsPastTheViews) {
  const Kernel& k = kernel_named(forward_kernels(), "max_unpool2d_k2s2p0_cl_b32_i64");
  ASSERT_EQ(k.layout, Layout::channels_last);
  for (int64_t channels : {2, 64}) {
    std::vector<float> values(static_cast<size_t>(channels * 16)), out(values.size() * 4);
    std::vector<int64_t> indices(values.size());
    const Views views{dense(values.data(), DType::f32, {1, channels, 4, 4}, k.layout),
                      dense(indices.data(), DType::i64, {1, channels, 4, 4}, k.layout),
                      dense(out.data(), DType::f32, {1, channels, 8, 8}, k.layout)};
    bool takes = false;
    ASSERT_TRUE(gather_takes(k, views, &takes).ok());
    EXPECT_EQ(takes, channels == 64) << channels << " channels";
    Launch l(k);
    l.add_view(views[0], k.value, Access::read);
    l.add_view(views[1], k.index, Access::read);
    l.add_view(views[2], k.value, Access::write);
    const halide_buffer_t before = l.view_buffer(2);
    halide_dimension_t dims[4];
    std::memcpy(dims, before.dim, sizeof dims);
    bool within = false;
    ASSERT_TRUE(l.within_views(&within).ok());
    EXPECT_EQ(within, channels == 64);
    EXPECT_EQ(l.view_buffer(2).host, before.host);
    EXPECT_EQ(std::memcmp(l.view_buffer(2).dim, dims, sizeof dims), 0);
  }
}

// KeptSpans decides as check_views_apart does, for views in call order with one output (the
// last) or two, at random places in one buffer.
TEST(KeptSpans, AgreesWithTheOverlapCheck) {
  std::vector<float> memory(256);
  std::mt19937_64 rng(3);
  const char* const names[3] = {"a", "b", "c"};
  for (int outputs : {1, 2}) {
    for (int trial = 0; trial < 2000; ++trial) {
      View views[3];
      for (View& v : views) {
        const int64_t extent = std::uniform_int_distribution<int64_t>(0, 40)(rng);
        v = dense(memory.data() + std::uniform_int_distribution<int>(0, 200)(rng), DType::f32,
                  {1, 1, extent}, Layout::contiguous);
      }
      const KeptSpans kept(Views{views[0], views[1], views[2]}, outputs);
      const bool apart = kept.apart({views[0].data, views[1].data, views[2].data});
      EXPECT_EQ(apart, check_views_apart(names, views, outputs).ok()) << trial;
    }
  }
}

// Pieces of whole planes, in order, as many as `fits` allows; a plane that fits alone in none
// goes to run_plane.
TEST(Pieces, SplitPlanesInOrderAndHandOverLonePlanes) {
  std::vector<float> memory(2 * 5 * 4);
  const View v = dense(memory.data(), DType::f32, {2, 5, 2, 2}, Layout::contiguous);
  for (int64_t most : {1, 2, 3, 5, 10}) {
    std::vector<int64_t> firsts, counts;
    const Status st = split_pieces(
        {v},
        [&](const Views& p) { return p[0].shape[0] * p[0].shape[1] <= most; },
        [&](const Views& p, int64_t first) {
          firsts.push_back(first);
          counts.push_back(p[0].shape[0] * p[0].shape[1]);
          return Status();
        },
        [&](const Views&, int64_t) { return Status(Code::internal, "no lone plane expected"); });
    ASSERT_TRUE(st.ok()) << st.message();
    int64_t next = 0;
    for (size_t k = 0; k < firsts.size(); ++k) {
      EXPECT_EQ(firsts[k], next) << most;
      EXPECT_LE(counts[k], most);
      next += counts[k];
    }
    EXPECT_EQ(next, 10) << most;
  }
  int lone = 0;
  ASSERT_TRUE(split_pieces(
                  {v}, [](const Views&) { return false; },
                  [](const Views&, int64_t) { return Status(Code::internal, "none fits"); },
                  [&](const Views& p, int64_t) {
                    lone += static_cast<int>(p[0].shape[0] * p[0].shape[1]);
                    return Status();
                  })
                  .ok());
  EXPECT_EQ(lone, 10);
  EXPECT_EQ(largest_fitting(100, [](int64_t n) { return n * n <= 1000; }), 31);
  EXPECT_EQ(largest_fitting(100, [](int64_t) { return false; }), 0);
}

// The scatter's groups: contiguous ones hold 16 KiB to 1 MiB of output (fewer planes where the
// cores want more groups); channels-last ones whole images, split into blocks of whole cache
// lines only for unpooling calls of 2 to 16 MiB with fewer images than cores.
TEST(ScatterGroups, SizedForTheCacheAndTheCores) {
  auto output = [](Ints shape) { return dense(nullptr, DType::f32, shape, Layout::contiguous); };
  const int64_t MiB = 1 << 20;
  // 64 planes of 256 bytes: one group of all (16 KiB at least) on one core.
  EXPECT_EQ(planes_per_group(output({1, 64, 8, 8}), Layout::contiguous, ScatterMode::store, 1, 0),
            64);
  // Planes of 1 MiB: one a group.
  EXPECT_EQ(planes_per_group(output({1, 8, 512, 512}), Layout::contiguous, ScatterMode::store, 2,
                             8 * MiB),
            1);
  // 4096 planes of 1 KiB on two cores: 512 a group (eight groups), within 16 KiB and 1 MiB.
  EXPECT_EQ(planes_per_group(output({64, 64, 16, 16}), Layout::contiguous,
                             ScatterMode::accumulate, 2, 8 * MiB),
            512);
  const View image = dense(nullptr, DType::f32, {1, 64, 64, 64}, Layout::channels_last);
  EXPECT_EQ(planes_per_group(image, Layout::channels_last, ScatterMode::store, 2, 4 * MiB), 32);
  EXPECT_EQ(planes_per_group(image, Layout::channels_last, ScatterMode::store, 2, MiB), 64);
  EXPECT_EQ(planes_per_group(image, Layout::channels_last, ScatterMode::store, 2, 32 * MiB), 64);
  EXPECT_EQ(planes_per_group(image, Layout::channels_last, ScatterMode::accumulate, 2, 4 * MiB),
            64);
  EXPECT_EQ(planes_per_group(image, Layout::channels_last, ScatterMode::store, 1, 4 * MiB), 64);
}

// packed_like: the leading view's batch and channels, another dtype and spatial extents,
// packed in the layout.
TEST(Views, PackedLikeTakesTheOtherTensorsExtents) {
  const View v = dense(nullptr, DType::f32, {2, 3, 4, 5}, Layout::channels_last);
  const View like = packed_like(v, DType::i32, {7, 3, 8, 10}, 2, Layout::channels_last);
  EXPECT_EQ(like.dtype, DType::i32);
  EXPECT_EQ(like.data, nullptr);
  const int64_t shape[4] = {2, 3, 8, 10}, strides[4] = {240, 1, 30, 3};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(like.shape[i], shape[i]) << i;
    EXPECT_EQ(like.strides[i], strides[i]) << i;
  }
}

}  // namespace
}  // namespace poolgen::detail
