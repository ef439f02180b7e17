// The runtime's internal pieces on their own, where a wrong answer would show end to end only
// on some machine or some shape: the magic divisors GPU kernels divide by, a launch's account of
// how its kernel ended (declined or failed) and of the region it would touch, the spans the
// overlap check keeps, piece splitting and the scatter's group sizing; and the runtime's
// hand-written kernels (execute/memory.hpp, the first-tap rescan, the index rewrites, the gather
// beyond a kernel's buffers) against plain loops (docs/design.md, "Hand-written compute").
#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/view.hpp"
#include "dispatch/kernel_table.hpp"
#include "dispatch/launch.hpp"
#include "conventions/first_tap.hpp"
#include "core/float16.hpp"
#include "conventions/index_formats.hpp"
#include "execute/gather.hpp"
#include "execute/memory.hpp"
#include "execute/scatter.hpp"
#include "execute/staging.hpp"
#include "parallel/settings.hpp"
#include "validate/views.hpp"

// The build's generated lists (POOLGEN_NARROW_VARIANTS, POOLGEN_AVX512_TARGET), not its rows.
#define POOLGEN_KERNEL(...)
#include "generated/kernel_table.inc"
#undef POOLGEN_KERNEL

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

// The kernel of `table` named `name`, or null where this build's matrix lacks it.
const Kernel* built_kernel(const KernelTable& table, const std::string& name) {
  for (const Kernel& k : table.kernels()) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

const Kernel& kernel_named(const KernelTable& table, const std::string& name) {
  if (const Kernel* k = built_kernel(table, name)) return *k;
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
    l.add_scalar(0);  // the indices' plane stride: plane offsets
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

// The scatter's groups: contiguous ones hold 16 KiB to scatter_group_bytes() of output (fewer
// planes where the cores want more groups); channels-last ones whole images, split into blocks
// of whole cache lines only for unpooling calls of 4 to 16 MiB with fewer images than cores.
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
  // Planes of 64 KiB on one core: as many as half the L2 holds, 4 to 16.
  const int64_t group = scatter_group_bytes();
  EXPECT_GE(group, kLeastScatterGroupBytes);
  EXPECT_LE(group, kMostScatterGroupBytes);
  EXPECT_EQ(planes_per_group(output({1, 64, 128, 128}), Layout::contiguous,
                             ScatterMode::accumulate, 1, 0),
            group / (64 << 10));
  // 4096 planes of 1 KiB on two cores: 512 a group (eight groups), fewer where half the L2 is
  // less than 512 KiB.
  EXPECT_EQ(planes_per_group(output({64, 64, 16, 16}), Layout::contiguous,
                             ScatterMode::accumulate, 2, 8 * MiB),
            std::min<int64_t>(512, group / 1024));
  const View image = dense(nullptr, DType::f32, {1, 64, 64, 64}, Layout::channels_last);
  EXPECT_EQ(planes_per_group(image, Layout::channels_last, ScatterMode::store, 2, 4 * MiB), 32);
  EXPECT_EQ(planes_per_group(image, Layout::channels_last, ScatterMode::store, 2, MiB), 64);
  EXPECT_EQ(planes_per_group(image, Layout::channels_last, ScatterMode::store, 2, 4 * MiB - 1), 64);
  EXPECT_EQ(planes_per_group(image, Layout::channels_last, ScatterMode::store, 2, 32 * MiB), 64);
  EXPECT_EQ(planes_per_group(image, Layout::channels_last, ScatterMode::accumulate, 2, 4 * MiB),
            64);
  EXPECT_EQ(planes_per_group(image, Layout::channels_last, ScatterMode::store, 1, 4 * MiB), 64);
}

// Where copy_streaming has non-temporal stores (x86-64), outputs stream from the largest cache
// the processor lists, at most 64 MiB: a VM lists its host's socket-wide L3 (480 MiB on an Intel
// Xeon VM, where a 134 MB output streamed ran 1.2x faster); elsewhere none streams.
TEST(Settings, StreamingAndOutOfCacheThresholds) {
  const int64_t bytes = default_streaming_bytes();
#if defined(__x86_64__) || defined(_M_X64)
  EXPECT_GT(bytes, 0);
  EXPECT_LE(bytes, int64_t{64} << 20);
#else
  EXPECT_EQ(bytes, std::numeric_limits<int64_t>::max());
#endif
  // The kernels that pay only out of every cache start from the listed cache itself, uncapped,
  // or from the setting where one is made.
  EXPECT_EQ(out_of_cache_bytes(), listed_cache_bytes());
  EXPECT_GE(listed_cache_bytes(), bytes);
  set_streaming_bytes(12345);
  EXPECT_EQ(out_of_cache_bytes(), 12345);
  EXPECT_EQ(streaming_bytes(), 12345);
  set_streaming_bytes(-1);
  EXPECT_EQ(streaming_bytes(), bytes);
}

// The scatters' prefetches run by their flag: the contiguous kernels' where the processor gains
// from them (element_prefetches_pay, whatever the call's size), the channels-last ones' out of
// cache. Either way the kernel's results are the same: unpooling's (the later duplicate wins)
// and pooling's gradient (duplicates add), over a tail shorter than a step of the loop.
TEST(Scatter, PrefetchesRunByTheirFlagAndChangeNoResult) {
  const int64_t planes = 3, cells = 517, slots = 4 * cells;  // 517: not a whole step of 8
  std::mt19937 rng(11);
  std::vector<float> values(static_cast<size_t>(planes * cells));
  std::vector<int64_t> indices(values.size());
  for (size_t j = 0; j < values.size(); ++j) {
    values[j] = static_cast<float>(rng() % 1000) - 500.0f;
    indices[j] = rng() % (cells / 2);  // duplicates in every plane
  }
  for (const char* name : {"max_unpool_scatter_b32_i64", "max_pool_backward_scatter_f32_i64"}) {
    SCOPED_TRACE(name);
    const Kernel* found = built_kernel(forward_kernels(), name);
    if (!found) found = built_kernel(backward_kernels(), name);
    ASSERT_NE(found, nullptr);
    const Kernel& k = *found;
    const bool adds = k.op != Op::unpool_scatter;
    // The default knobs prefetch (prefetch_elements): else the flag below would not reach it.
    EXPECT_TRUE(k.prefetches);
    EXPECT_EQ(scatter_prefetches(k, 0), element_prefetches_pay());
    EXPECT_EQ(scatter_prefetches(k, int64_t{1} << 40), scatter_prefetches(k, 0));
    std::vector<float> want(static_cast<size_t>(planes * slots), 0.0f);
    for (int64_t q = 0; q < planes; ++q) {
      for (int64_t j = 0; j < cells; ++j) {
        float& slot = want[q * slots + indices[q * cells + j]];
        slot = adds ? slot + values[q * cells + j] : values[q * cells + j];
      }
    }
    for (const bool prefetch : {false, true}) {
      std::vector<float> got(want.size(), 0.0f);
      ScatterLaunch launch(k, dense(values.data(), DType::f32, {1, planes, cells}, k.layout),
                           dense(indices.data(), DType::i64, {1, planes, cells}, k.layout),
                           dense(got.data(), DType::f32, {1, planes, slots}, k.layout), 0, 0,
                           prefetch);
      ASSERT_TRUE(launch.run(0, nullptr).ok());
      EXPECT_EQ(got, want) << (prefetch ? "prefetching" : "not prefetching");
    }
  }
  for (const Kernel& k : backward_kernels().kernels()) {
    if (k.op != Op::pool_backward_scatter || k.layout != Layout::channels_last) continue;
    for (const int64_t bytes : {int64_t{0}, out_of_cache_bytes()}) {  // in cache and out
      EXPECT_EQ(scatter_prefetches(k, bytes), prefetch_pays(bytes)) << k.name << ", " << bytes;
    }
  }
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

// ---------------------------------------------------------------------------------------------
// The hand-written kernels.

// copy_elements between any two views of one shape: every layout pair, a strided source, every
// element width (4 and 8 bytes take the vector transpose on x86-64), extents that leave ragged
// blocks, ranks 3 to 5.
TEST(MemoryKernels, CopyElementsAnyStrides) {
  for (DType dtype : {DType::u8, DType::i16, DType::f32, DType::i64}) {
    for (const Ints& shape : {Ints{2, 3, 5, 7}, Ints{1, 9, 6, 10}, Ints{2, 5, 3, 4, 6},
                              Ints{3, 8, 13}, Ints{2, 1, 4, 4}}) {
      const size_t width = dtype_size(dtype);
      int64_t n = 1;
      for (int64_t e : shape) n *= e;
      std::vector<uint8_t> from(static_cast<size_t>(2 * n) * width), to(from.size());
      for (size_t k = 0; k < from.size(); ++k) from[k] = static_cast<uint8_t>(k * 7 + k / 251);
      const int rank = static_cast<int>(shape.size());
      for (Layout a : {Layout::contiguous, Layout::channels_last}) {
        for (Layout b : {Layout::contiguous, Layout::channels_last}) {
          View src = dense(from.data(), dtype, shape, a);
          if (a == Layout::contiguous) {  // every other element
            for (int i = 0; i < rank; ++i) src.strides[i] *= 2;
          }
          const View dst = dense(to.data(), dtype, shape, b);
          std::fill(to.begin(), to.end(), uint8_t{0xEE});
          copy_elements(src, dst);
          for_each_element(src, [&](int64_t position, int64_t offset) {
            int64_t rest = position, at = 0;
            for (int i = rank - 1; i >= 0; --i) {
              at += rest % shape[i] * dst.strides[i];
              rest /= shape[i];
            }
            ASSERT_EQ(std::memcmp(&to[static_cast<size_t>(at) * width],
                                  &from[static_cast<size_t>(offset) * width], width),
                      0)
                << dtype_name(dtype) << " rank " << rank << " element " << position;
          });
          // Nothing past the destination's elements (it is packed: they are its first n).
          EXPECT_TRUE(std::all_of(to.begin() + n * static_cast<int64_t>(width), to.end(),
                                  [](uint8_t v) { return v == 0xEE; }));
        }
      }
    }
  }
}

// copy_elements_shared (a call's packed copies, on the threads its bytes share) gives
// copy_elements' bytes: calls large enough to share, transposing both ways, with more rows than
// tasks and fewer.
TEST(MemoryKernels, CopyElementsSharedMatchesCopyElements) {
  for (const Ints& shape : {Ints{4, 64, 56, 56}, Ints{3, 61, 53, 55}, Ints{1, 2, 3, 200000}}) {
    const int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    std::vector<float> from(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) from[static_cast<size_t>(k)] = static_cast<float>(k);
    for (Layout a : {Layout::contiguous, Layout::channels_last}) {
      const Layout b = a == Layout::contiguous ? Layout::channels_last : Layout::contiguous;
      std::vector<float> serial(from.size(), -1.0f), shared(from.size(), -2.0f);
      const View src = dense(from.data(), DType::f32, shape, a);
      ASSERT_TRUE(worth_sharing(2 * src.bytes())) << "the call would not share its threads";
      copy_elements(src, dense(serial.data(), DType::f32, shape, b));
      copy_elements_shared(src, dense(shared.data(), DType::f32, shape, b));
      EXPECT_TRUE(serial == shared) << "shape " << shape[3] << " from layout " << int(a);
    }
  }
}

// zero_elements_shared on two threads: a packed view large enough to share, zeroed whole by
// runs (whose bounds fall inside elements), and a strided one as zero_elements does; nothing
// outside either.
TEST(MemoryKernels, ZeroElementsSharedZeroesTheViewOnly) {
  set_num_threads(2);
  const Ints shape{1, 3, 701, 301};
  const int64_t n = shape[1] * shape[2] * shape[3];
  std::vector<float> memory(static_cast<size_t>(2 * n), 5.0f);
  const View packed_view = dense(memory.data(), DType::f32, shape, Layout::contiguous);
  ASSERT_GT(sharing_threads(packed_view.bytes()), 1) << "the view would not share its threads";
  zero_elements_shared(packed_view, Layout::contiguous);
  for (int64_t k = 0; k < 2 * n; ++k) {
    ASSERT_EQ(memory[static_cast<size_t>(k)], k < n ? 0.0f : 5.0f) << k;
  }
  std::fill(memory.begin(), memory.end(), 5.0f);
  View strided = packed_view;
  for (int i = 0; i < 4; ++i) strided.strides[i] *= 2;
  zero_elements_shared(strided, Layout::contiguous);
  for (int64_t k = 0; k < 2 * n; ++k) {
    ASSERT_EQ(memory[static_cast<size_t>(k)], k % 2 ? 5.0f : 0.0f) << k;
  }
  set_num_threads(0);
}

// zero_elements: packed (one memset) and strided, nothing outside the view.
TEST(MemoryKernels, ZeroElementsOnlyTheView) {
  std::vector<float> memory(2 * 3 * 4 * 4 * 2, 5.0f);
  const View packed_view = dense(memory.data(), DType::f32, {2, 3, 4, 4}, Layout::contiguous);
  zero_elements(packed_view, Layout::contiguous);
  for (size_t k = 0; k < memory.size(); ++k) EXPECT_EQ(memory[k], k < 96 ? 0.0f : 5.0f) << k;
  std::fill(memory.begin(), memory.end(), 5.0f);
  View strided = packed_view;
  for (int i = 0; i < 4; ++i) strided.strides[i] *= 2;
  zero_elements(strided, Layout::contiguous);
  for (size_t k = 0; k < memory.size(); ++k) EXPECT_EQ(memory[k], k % 2 ? 5.0f : 0.0f) << k;
}

// copy_streaming: every alignment of head and tail.
TEST(MemoryKernels, CopyStreamingEveryAlignment) {
  std::vector<uint8_t> from(300), to(300);
  for (size_t k = 0; k < from.size(); ++k) from[k] = static_cast<uint8_t>(k * 13 + 5);
  for (size_t start = 0; start < 17; ++start) {
    for (size_t bytes : {0, 1, 15, 16, 17, 64, 100, 255}) {
      std::fill(to.begin(), to.end(), uint8_t{0xEE});
      copy_streaming(to.data() + start, from.data() + 3, bytes);
      for (size_t k = 0; k < to.size(); ++k) {
        const bool inside = k >= start && k < start + bytes;
        ASSERT_EQ(to[k], inside ? from[3 + k - start] : 0xEE) << start << " " << bytes << " " << k;
      }
    }
  }
}

// add_to_indices on strided i32 and i64 views; indices_within at its bounds, any count.
TEST(MemoryKernels, IndexShiftsAndRangeChecks) {
  std::vector<int64_t> i64(24);
  std::vector<int32_t> i32(24);
  for (int k = 0; k < 24; ++k) i64[k] = i32[k] = k;
  View v64 = dense(i64.data(), DType::i64, {1, 1, 12}, Layout::contiguous);
  View v32 = dense(i32.data(), DType::i32, {1, 1, 12}, Layout::contiguous);
  v64.strides[2] = v32.strides[2] = 2;
  add_to_indices(v64, 100);
  add_to_indices(v32, -3);
  for (int k = 0; k < 24; ++k) {
    EXPECT_EQ(i64[k], k % 2 ? k : k + 100) << k;
    EXPECT_EQ(i32[k], k % 2 ? k : k - 3) << k;
  }
  for (int count = 0; count <= 13; ++count) {
    std::vector<int64_t> w64(static_cast<size_t>(count));
    std::vector<int32_t> w32(static_cast<size_t>(count));
    for (int k = 0; k < count; ++k) w64[k] = w32[k] = 10 + k;
    EXPECT_TRUE(indices_within(w64.data(), DType::i64, count, 10, 10 + count));
    EXPECT_TRUE(indices_within(w32.data(), DType::i32, count, 10, 10 + count));
    for (int bad = 0; bad < count; ++bad) {
      for (int64_t value : {int64_t{9}, int64_t{10} + count, int64_t{-1}, int64_t{1} << 40}) {
        std::vector<int64_t> b64 = w64;
        std::vector<int32_t> b32 = w32;
        b64[bad] = value;
        b32[bad] = static_cast<int32_t>(value);
        EXPECT_FALSE(indices_within(b64.data(), DType::i64, count, 10, 10 + count));
        if (value == static_cast<int32_t>(value)) {
          EXPECT_FALSE(indices_within(b32.data(), DType::i32, count, 10, 10 + count));
        }
      }
    }
  }
}

// The first-tap rescan (ONNX Runtime's and TensorFlow's rule): a window whose maximum PyTorch's
// scan found NaN starts again from its first tap, replaced only by strictly greater values (a
// NaN tap never is); a NaN first tap stays. Other windows keep PyTorch's result.
TEST(HandWrittenKernels, FirstTapRescanOfNanWindows) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> input{1, 2, 5, 6, nan, 9,  //
                           3, nan, 7, 8, 4, 2};
  std::vector<float> values{nan, 8, nan};  // PyTorch's: a NaN wins
  std::vector<int64_t> indices{7, 9, 4};
  Window w;
  w.nd = 2;
  for (int i = 0; i < 2; ++i) {
    w.kernel[i] = w.stride[i] = 2;
    w.padding[i] = w.padding_end[i] = 0;
    w.dilation[i] = 1;
  }
  apply_first_tap_rule(dense(input.data(), DType::f32, {1, 1, 2, 6}, Layout::contiguous),
                       dense(values.data(), DType::f32, {1, 1, 1, 3}, Layout::contiguous),
                       dense(indices.data(), DType::i64, {1, 1, 1, 3}, Layout::contiguous), w);
  EXPECT_EQ(indices[0], 6);  // taps 1, 2, 3, NaN: 3
  EXPECT_EQ(values[0], 3.0f);
  EXPECT_EQ(indices[1], 9);  // no NaN: PyTorch's
  EXPECT_EQ(values[1], 8.0f);
  EXPECT_EQ(indices[2], 4);  // a NaN first tap stays
  EXPECT_TRUE(std::isnan(values[2]));
}

// The index rewrites: plane offsets to ONNX's (offsets in the whole tensor, row-major) and back.
TEST(HandWrittenKernels, IndexRewritesRoundTrip) {
  const Ints frame{2, 3, 4, 4}, pooled{2, 3, 2, 2};
  std::vector<int64_t> plane(24), onnx(24), back(24);
  for (int k = 0; k < 24; ++k) plane[k] = (k * 5) % 16;
  const View p = dense(plane.data(), DType::i64, pooled, Layout::contiguous);
  const View o = dense(onnx.data(), DType::i64, pooled, Layout::contiguous);
  const View b = dense(back.data(), DType::i64, pooled, Layout::contiguous);
  ASSERT_TRUE(rewrite_indices(2, frame, nullptr, p, IndexFormat::plane, o, IndexFormat::onnx, false)
                  .ok());
  for (int k = 0; k < 24; ++k) EXPECT_EQ(onnx[k], plane[k] + (k / 4) * 16) << k;
  ASSERT_TRUE(rewrite_indices(2, frame, nullptr, o, IndexFormat::onnx, b, IndexFormat::plane, false)
                  .ok());
  EXPECT_EQ(back, plane);
}

// The scatter beyond a kernel's buffers: stored (the latest duplicate wins, the first invalid
// index named, nothing written then) and added (bf16 in its own arithmetic, indices outside the
// plane dropped), in channels-last.
TEST(HandWrittenKernels, ScatterLargeStoresAndAdds) {
  std::vector<float> values{1, 2, 3, 4, 5, 6, 7, 8}, out(2 * 9, -1.0f);
  std::vector<int64_t> indices{0, 4, 4, 8, 1, 1, 2, 3};  // (c, p) in channels-last: c fastest
  const Layout cl = Layout::channels_last;
  const View v = dense(values.data(), DType::f32, {1, 2, 2, 2}, cl);
  const View i = dense(indices.data(), DType::i64, {1, 2, 2, 2}, cl);
  const View o = dense(out.data(), DType::f32, {1, 2, 3, 3}, cl);
  ASSERT_TRUE(scatter_large(ScatterMode::store, v, i, o, cl).ok());
  // Channel 0 takes values 1, 3, 5, 7 at 0, 4, 1, 2; channel 1 values 2, 4, 6, 8 at 4, 8, 1, 3.
  std::vector<float> expected(18, 0.0f);
  for (auto [c, p, x] : {std::tuple{0, 0, 1.0f}, {0, 4, 3.0f}, {0, 1, 5.0f}, {0, 2, 7.0f},
                         {1, 4, 2.0f}, {1, 8, 4.0f}, {1, 1, 6.0f}, {1, 3, 8.0f}}) {
    expected[static_cast<size_t>(p * 2 + c)] = x;
  }
  EXPECT_EQ(out, expected);
  indices[3] = 9;  // channel 1's second value: element 5 in input order
  std::fill(out.begin(), out.end(), -1.0f);
  const Status st = scatter_large(ScatterMode::store, v, i, o, cl);
  EXPECT_EQ(st.code(), Code::index_out_of_range);
  EXPECT_NE(st.message().find("got 9 at element 5"), std::string::npos) << st.message();
  EXPECT_EQ(out, std::vector<float>(18, -1.0f));

  std::vector<uint16_t> grads(8, float_to_bf16(0.1f)), sums(18, 0xFFFF);
  const View g = dense(grads.data(), DType::bf16, {1, 2, 2, 2}, cl);
  const View s = dense(sums.data(), DType::bf16, {1, 2, 3, 3}, cl);
  indices = {0, 0, 0, 0, -1, 9, 0, 0};  // each channel: three at slot 0, one outside its plane
  ASSERT_TRUE(scatter_large(ScatterMode::accumulate, g, i, s, cl).ok());
  const float tenth = bf16_to_float(float_to_bf16(0.1f));
  const uint16_t two = float_to_bf16(tenth + tenth);
  const uint16_t three = float_to_bf16(bf16_to_float(two) + tenth);  // rounded at each addition
  EXPECT_EQ(sums[0], three);
  EXPECT_EQ(sums[1], three);
  for (size_t k = 2; k < sums.size(); ++k) EXPECT_EQ(sums[k], 0) << k;
}

// The spatial coordinates (outermost first) of position j of a plane of an (N, C, spatial...)
// `shape`, counted in memory order.
std::vector<int64_t> plane_coords(int64_t j, const Ints& shape) {
  std::vector<int64_t> at(shape.size() - 2);
  for (size_t d = at.size(); d-- > 0;) {
    at[d] = j % shape[2 + d];
    j /= shape[2 + d];
  }
  return at;
}

// gather_pays on a 2-D call whose output rows hold `row` slots: 1x64 cells of half its extents
// unpooled into 1x64x2xrow slots, in the kernel's layout.
bool pays(const Kernel& k, int64_t bytes, int64_t row) {
  return gather_pays(k, bytes, dense(nullptr, DType::f32, {1, 64, 1, (row + 1) / 2}, k.layout),
                     dense(nullptr, DType::f32, {1, 64, 2, row}, k.layout));
}

Kernel fixed_kernel(Op op, int nd, int k, int s, int p, Layout layout, bool cells) {
  return Kernel{op, nd, k, s, p, layout, DType::f32, DType::i64, Device::cpu, 0, cells, false,
                nullptr, ""};
}

// When a fixed-window CPU gather is tried before the scatter (gather_pays): channels-last ones
// of windows that do not overlap from their small calls up (below); contiguous ones scheduled by
// vectors of cells (their table row says so) from 4 MiB with output rows of 64 slots (2-D
// pooling's gradient from 512 KiB); the other contiguous ones, and unpooling's gradient by
// windows, from streaming_bytes() on rows of fewer than 512 slots; every one when
// streaming_bytes() is 0.
TEST(Gather, PaysByLayoutWindowSizeAndRow) {
  const Kernel tiled = fixed_kernel(Op::unpool_gather, 2, 2, 2, 0, Layout::contiguous, true);
  const Kernel tiled_3d =
      fixed_kernel(Op::pool_backward_gather, 3, 2, 2, 0, Layout::contiguous, true);
  const Kernel tiled_gradient =
      fixed_kernel(Op::pool_backward_gather, 2, 2, 2, 0, Layout::contiguous, true);
  const Kernel overlapping =
      fixed_kernel(Op::unpool_gather, 2, 3, 2, 1, Layout::contiguous, false);
  const Kernel one_d = fixed_kernel(Op::unpool_gather, 1, 2, 2, 0, Layout::contiguous, false);
  const Kernel windows = fixed_kernel(Op::unpool_backward, 2, 2, 2, 0, Layout::contiguous, false);
  const Kernel cl = fixed_kernel(Op::unpool_gather, 2, 2, 2, 0, Layout::channels_last, true);
  const int64_t mib = int64_t{1} << 20, streaming = 64 * mib;
  set_streaming_bytes(streaming);
  for (const Kernel* k : {&tiled, &tiled_3d}) {
    EXPECT_TRUE(pays(*k, 4 * mib, 64));
    EXPECT_FALSE(pays(*k, 4 * mib - 1, 64));
    EXPECT_FALSE(pays(*k, streaming, 63));
  }
  EXPECT_TRUE(pays(tiled_gradient, 512 << 10, 64));
  EXPECT_FALSE(pays(tiled_gradient, (512 << 10) - 1, 64));
  EXPECT_FALSE(pays(tiled_gradient, streaming, 63));
  for (const Kernel* k : {&overlapping, &one_d, &windows}) {
    EXPECT_FALSE(pays(*k, streaming - 1, 1));
    EXPECT_TRUE(pays(*k, streaming, 1));
    EXPECT_TRUE(pays(*k, streaming, 511));
    EXPECT_FALSE(pays(*k, streaming, 512));
  }
  EXPECT_TRUE(pays(cl, 1, 2));
  set_streaming_bytes(0);
  for (const Kernel* k :
       {&tiled, &tiled_3d, &tiled_gradient, &overlapping, &one_d, &windows, &cl}) {
    EXPECT_TRUE(pays(*k, 1, 1));
  }
  set_streaming_bytes(-1);
}

// The channels-last gathers of windows that do not overlap leave to the scatter, on one thread,
// the calls of 16 channels of 32-bit values under 256 KiB and the planes of fewer than 32
// windows that leave a border outside every window (odd sides); where threads share a call, or
// for unpooling's gradient (whose fallback is the gather by index), they take every call.
TEST(Gather, SmallChannelsLastCallsTakeTheScatter) {
  const Layout cl = Layout::channels_last;
  const Kernel unpool = fixed_kernel(Op::unpool_gather, 2, 2, 2, 0, cl, true);
  const Kernel gradient = fixed_kernel(Op::pool_backward_gather, 3, 2, 2, 0, cl, true);
  const Kernel windows = fixed_kernel(Op::unpool_backward, 2, 2, 2, 0, cl, false);
  struct Call {
    Ints cells, slots;
    bool gather;  // on one thread
  };
  const Call calls[] = {
      {{1, 16, 3, 3}, {1, 16, 7, 7}, false},          // narrow and bordered
      {{1, 16, 7, 7}, {1, 16, 14, 14}, false},        // narrow
      {{1, 16, 28, 28}, {1, 16, 56, 56}, true},       // narrow, 343 KiB
      {{1, 32, 7, 7}, {1, 32, 14, 14}, true},         // 32 channels
      {{1, 64, 3, 3}, {1, 64, 7, 7}, false},          // a border around 9 windows
      {{1, 512, 3, 3}, {1, 512, 7, 7}, false},        // 152 KiB: shared by two threads
      {{1, 64, 6, 6}, {1, 64, 13, 13}, true},         // a border around 36 windows
      {{1, 64, 3, 3}, {1, 64, 6, 6}, true},           // 9 windows, no border
      {{1, 64, 2, 3, 3}, {1, 64, 4, 7, 7}, false},    // 3-D, 18 windows and a border
  };
  set_streaming_bytes(int64_t{64} << 20);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Call& c : calls) {
      const View cells = dense(nullptr, DType::f32, c.cells, cl);
      const View slots = dense(nullptr, DType::f32, c.slots, cl);
      // The unpooling's: f32 values, i64 indices, the output.
      const int64_t bytes = cells.elements() * 12 + slots.bytes();
      SCOPED_TRACE(std::to_string(threads) + " threads, slots " + std::to_string(slots.elements()) +
                   " x " + std::to_string(slots.rank - 2) + "-D");
      const bool shared = sharing_threads(bytes) > 1;
      EXPECT_EQ(gather_pays(c.cells.size() == 5 ? gradient : unpool, bytes, cells, slots),
                c.gather || shared);
      EXPECT_TRUE(gather_pays(windows, bytes, cells, slots));
    }
    // 16 channels of 16-bit values, unpooled: the gather.
    const View cells = dense(nullptr, DType::bf16, {1, 16, 7, 7}, cl);
    const View slots = dense(nullptr, DType::bf16, {1, 16, 14, 14}, cl);
    EXPECT_TRUE(gather_pays(unpool, cells.elements() * 10 + slots.bytes(), cells, slots));
  }
  set_num_threads(0);
  set_streaming_bytes(-1);
}

// The AVX-512-only channels-last gather with overlapping windows (POOLGEN_AVX512_ONLY_FAMILIES)
// on CPUs whose masked loads miss slowly: only calls shared by threads and below the cache,
// where the scatter would keep to one thread; elsewhere from 1 MiB shared (4 MiB on one).
TEST(Gather, AvxOnlyGatherFollowsTheMaskedLoads) {
  if (std::string(POOLGEN_AVX512_TARGET).empty()) {
    GTEST_SKIP() << "no AVX-512 variants in this build (the rule asks for none of its CPU)";
  }
  Kernel k{Op::pool_backward_window_gather, 2, 3, 2, 1, Layout::channels_last, DType::f32,
           DType::i64, Device::cpu, 0, false, false, nullptr, ""};
  k.avx512_only = true;
#if defined(__x86_64__)
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512cd");
#else
  const bool avx512 = false;
#endif
  const int64_t mib = int64_t{1} << 20, cache = 64 * mib, in_cache = 8 * mib;
  set_streaming_bytes(cache);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    SCOPED_TRACE(threads);
    const bool shared = sharing_threads(in_cache) > 1;
    if (!avx512) {
      EXPECT_FALSE(pays(k, in_cache, 2));
    } else if (masked_loads_miss_slowly()) {
      EXPECT_EQ(pays(k, in_cache, 2), shared);
      EXPECT_FALSE(pays(k, cache, 2));
      // An image of half the cache (32 MiB of f32 here) or more, whatever the call.
      auto image = [&](int64_t side) {
        const Ints cells{2, 64, side / 2, side / 2}, slots{2, 64, side, side};
        return gather_pays(k, cache, dense(nullptr, DType::f32, cells, k.layout),
                           dense(nullptr, DType::f32, slots, k.layout));
      };
      EXPECT_TRUE(image(364));
      EXPECT_FALSE(image(360));
      // Below 1 MiB, shared calls whose image it splits: 128 KiB or more of one image, with 32
      // channels or more and 24 rows or more.
      auto split = [&](int64_t channels, int64_t side) {
        const Ints cells{1, channels, side / 2, side / 2}, slots{1, channels, side, side};
        const View c = dense(nullptr, DType::f32, cells, k.layout),
                   s = dense(nullptr, DType::f32, slots, k.layout);
        return gather_pays(k, s.bytes() + 3 * c.bytes(), c, s);
      };
      EXPECT_EQ(split(64, 24), shared);
      EXPECT_EQ(split(32, 32), shared);
      EXPECT_FALSE(split(48, 24));   // 110 KiB
      EXPECT_FALSE(split(16, 64));   // 16 channels
      EXPECT_FALSE(split(256, 14));  // 14 rows
    } else {
      EXPECT_TRUE(pays(k, in_cache, 2));
      EXPECT_TRUE(pays(k, cache, 2));
    }
  }
  set_num_threads(0);
  set_streaming_bytes(-1);
}

// The AVX-512 variants that lose on narrow vectors (POOLGEN_AVX512_NARROW) hand calls of fewer
// lanes to the next variant's own entry, found under the name Halide gives it (a weak symbol: a
// wrong name would leave the wrapper serving them, unseen but for this test), where the CPU
// runs that variant; calls of more lanes keep the multitarget wrapper. Those that pay in cache
// only (POOLGEN_AVX512_IN_CACHE) hand it the calls out of cache where masked loads miss slowly.
TEST(Variants, NarrowCallsRunTheNextVariant) {
  std::vector<std::string> listed, in_cache;
#define POOLGEN_NARROW_VARIANT(name, symbol, lanes, cached) \
  listed.push_back(#name);                                  \
  if (cached) in_cache.push_back(#name);
  POOLGEN_NARROW_VARIANTS
#undef POOLGEN_NARROW_VARIANT
#if defined(__x86_64__)
  const bool runs_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  const bool runs_avx2 = false;  // no narrow variants off x86
#endif
  size_t found = 0;
  const int64_t out_of_cache = out_of_cache_bytes();
  std::vector<Kernel> kernels = forward_kernels().kernels();  // and the gradients' (a gather)
  kernels.insert(kernels.end(), backward_kernels().kernels().begin(),
                 backward_kernels().kernels().end());
  for (const Kernel& k : kernels) {
    const bool is_listed = std::find(listed.begin(), listed.end(), k.name) != listed.end();
    SCOPED_TRACE(k.name);
    EXPECT_EQ(k.narrow_entry != nullptr, is_listed);
    if (!is_listed) {
      EXPECT_EQ(variant_for(k, 1, out_of_cache), k.entry);
      continue;
    }
    ++found;
    EXPECT_NE(k.narrow_entry, k.entry);
    const bool cached = std::find(in_cache.begin(), in_cache.end(), k.name) != in_cache.end();
    EXPECT_EQ(k.in_cache_only, cached);
    if (k.narrow_lanes > 0) {
      EXPECT_GT(k.narrow_lanes, 1);
      EXPECT_EQ(variant_for(k, k.narrow_lanes, 0), k.entry);
      EXPECT_EQ(variant_for(k, k.narrow_lanes - 1, 0), runs_avx2 ? k.narrow_entry : k.entry);
    } else {
      EXPECT_TRUE(cached);  // listed for one reason or the other
    }
    const int64_t wide = std::max(k.narrow_lanes, 1);
    EXPECT_EQ(variant_for(k, wide, out_of_cache - 1), k.entry);
    EXPECT_EQ(variant_for(k, wide, out_of_cache),
              cached && runs_avx2 && masked_loads_miss_slowly() ? k.narrow_entry : k.entry);
  }
  EXPECT_EQ(found, listed.size());
#if defined(__x86_64__)
  // The default x86 build's: 3-D k2s2p0 f32, rows of fewer than 16 outputs; the 2-D k2s2p0
  // channels-last pooling gradient, fewer than 16 channels.
  if (std::string(POOLGEN_AVX512_TARGET).find("avx512") != std::string::npos) {
    for (const char* name : {"max_pool3d_k2s2p0_f32_i64", "max_pool2d_backward_k2s2p0_cl_f32_i64"}) {
      EXPECT_NE(std::find(listed.begin(), listed.end(), name), listed.end()) << name;
    }
  }
#endif
}

// An unpooling gather reads ONNX's global offsets (plane q of the call counts from q * the
// output's plane) when given that stride: it serves them, with the plane offsets' result, and
// declines them as plane offsets (every plane past the first names slots outside its cells).
TEST(Gather, ServesGlobalOffsetsGivenThePlaneStride) {
  for (const char* name : {"max_unpool2d_k2s2p0_cl_b32_i64", "max_unpool2d_k2s2p0_b32_i64",
                           "max_unpool2d_k2s2p0_b32_i32"}) {
    const Kernel* k = built_kernel(forward_kernels(), name);
    if (!k) continue;  // not in this build's matrix
    SCOPED_TRACE(name);
    const int64_t n = 2, c = 16, h = 4, w = 32, plane = 4 * h * w;
    std::vector<float> values(static_cast<size_t>(n * c * h * w));
    std::vector<int64_t> offsets(values.size());
    std::mt19937 rng(3);
    for (size_t j = 0; j < values.size(); ++j) values[j] = static_cast<float>(rng() % 1000);
    // SegNet indices in contiguous element order: a random tap of each cell's 2x2 window.
    for (int64_t q = 0; q < n * c; ++q) {
      for (int64_t y = 0; y < h; ++y) {
        for (int64_t x = 0; x < w; ++x) {
          offsets[(q * h + y) * w + x] = (2 * y + rng() % 2) * 2 * w + 2 * x + rng() % 2;
        }
      }
    }
    // The plane offsets' output, and the global offsets', in the kernel's layout and index type.
    std::vector<float> want(static_cast<size_t>(n * c * plane)), got(want.size());
    for (int64_t q = 0; q < n * c; ++q) {
      for (int64_t j = 0; j < h * w; ++j) want[q * plane + offsets[q * h * w + j]] = values[q * h * w + j];
    }
    const Ints in_shape = {n, c, h, w}, out_shape = {n, c, 2 * h, 2 * w};
    std::vector<float> laid_values(values.size());
    std::vector<int64_t> global(values.size());
    std::vector<int32_t> global32(values.size());
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t j = 0; j < h * w; ++j) {
          const int64_t from = (b * c + ch) * h * w + j;
          const int64_t to = k->layout == Layout::channels_last ? (b * h * w + j) * c + ch : from;
          laid_values[to] = values[from];
          global[to] = (b * c + ch) * plane + offsets[from];
          global32[to] = static_cast<int32_t>(global[to]);
        }
      }
    }
    void* index_data = k->index == DType::i64 ? static_cast<void*>(global.data()) : global32.data();
    const Views views{dense(laid_values.data(), DType::f32, in_shape, k->layout),
                      dense(index_data, k->index, in_shape, k->layout),
                      dense(got.data(), DType::f32, out_shape, k->layout)};
    bool served = false;
    ASSERT_TRUE(gather_if_served(*k, views, 0, &served, 0).ok());
    EXPECT_FALSE(served) << "global offsets taken for plane offsets";
    ASSERT_TRUE(gather_if_served(*k, views, 0, &served, plane).ok());
    ASSERT_TRUE(served);
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t j = 0; j < plane; ++j) {
          const int64_t at = k->layout == Layout::channels_last ? (b * plane + j) * c + ch
                                                                : (b * c + ch) * plane + j;
          ASSERT_EQ(got[at], want[(b * c + ch) * plane + j]) << "plane " << b * c + ch << " slot " << j;
        }
      }
    }
  }
}

// The window gathers' check, exhaustively: one cell (a corner, the far corner, a cell on an
// edge) takes each slot of its plane as its index (and one each side of the plane), every other
// cell its window's first tap inside the plane. A gather must serve exactly the indices that
// name a slot of their cell's window inside the plane, with the scatter's result (unpooling:
// the latest cell naming a slot wins; pooling's gradient: sums in cell order), and decline
// every other, for the scatter to serve.
TEST(Gather, ServesExactlyTheIndicesInsideTheirWindows) {
  int tested = 0;
  for (const KernelTable* table : {&forward_kernels(), &backward_kernels()}) {
    for (const Kernel& k : table->kernels()) {
      if ((k.op != Op::unpool_gather && k.op != Op::pool_backward_gather) ||
          k.device != Device::cpu || k.kernel == 0 || k.nd < 2 ||
          (k.value != DType::f32 && k.value != DType::i32)) {
        continue;
      }
      SCOPED_TRACE(k.name);
      const int nd = k.nd;
      const bool cl = k.layout == Layout::channels_last;
      const int64_t c = 16;
      // Cells per dimension (outermost first, as in shapes): k3s2p1's five reach the padding on
      // both sides of nine slots; contiguous gathers take rows of whole vectors.
      std::vector<int64_t> cells_at(static_cast<size_t>(nd), k.kernel == 3 ? 5 : 3);
      if (!cl) cells_at.back() = 16;
      Ints cell_shape{1, c}, slot_shape{1, c};
      int64_t cells = 1, slots = 1;
      for (int64_t e : cells_at) {
        const int64_t slot_extent = k.kernel == 3 ? 2 * e - 1 : 2 * e;
        cell_shape.push_back(e);
        slot_shape.push_back(slot_extent);
        cells *= e;
        slots *= slot_extent;
      }
      auto in_window = [&](int64_t cell, int64_t p) {
        if (p < 0 || p >= slots) return false;
        const std::vector<int64_t> at = plane_coords(cell, cell_shape);
        const std::vector<int64_t> slot = plane_coords(p, slot_shape);
        for (int d = 0; d < nd; ++d) {
          const int64_t tap = slot[d] - (at[d] * k.stride - k.padding);
          if (tap < 0 || tap >= k.kernel) return false;
        }
        return true;
      };
      auto first_tap = [&](int64_t cell) {
        const std::vector<int64_t> at = plane_coords(cell, cell_shape);
        int64_t p = 0;
        for (int d = 0; d < nd; ++d) {
          p = p * slot_shape[2 + d] + std::max<int64_t>(0, at[d] * k.stride - k.padding);
        }
        return p;
      };
      std::vector<float> values(static_cast<size_t>(c * cells));
      std::vector<float> out(static_cast<size_t>(c * slots));
      std::vector<int64_t> indices(values.size());
      std::vector<int32_t> indices32(values.size());
      // Element (channel, position) of a plane-major count in the kernel's layout.
      auto at = [&](int64_t channel, int64_t position, int64_t plane) {
        return cl ? position * c + channel : channel * plane + position;
      };
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t j = 0; j < cells; ++j) {
          values[at(ch, j, cells)] = static_cast<float>(1 + (ch * cells + j) % 97) * 0.375f;
        }
      }
      const Views views{dense(values.data(), k.value, cell_shape, k.layout),
                        dense(k.index == DType::i64 ? static_cast<void*>(indices.data())
                                                    : indices32.data(),
                              k.index, cell_shape, k.layout),
                        dense(out.data(), k.value, slot_shape, k.layout)};
      bool takes = false;
      ASSERT_TRUE(gather_takes(k, views, &takes).ok());
      if (!takes) continue;
      ++tested;
      // A corner, the far corner, and the last cell of a middle row (an edge).
      const int64_t edge = cell_shape[2 + nd - 1] * (cells_at[0] / 2 + 1) - 1;
      for (const int64_t probe : {int64_t{0}, cells - 1, edge}) {
        for (int64_t p = -1; p <= slots; ++p) {
          for (int64_t ch = 0; ch < c; ++ch) {
            for (int64_t j = 0; j < cells; ++j) {
              indices[at(ch, j, cells)] = j == probe && ch == c / 2 ? p : first_tap(j);
              indices32[at(ch, j, cells)] = static_cast<int32_t>(indices[at(ch, j, cells)]);
            }
          }
          std::fill(out.begin(), out.end(), -1.0f);
          bool served = false;
          ASSERT_TRUE(gather_if_served(k, views, 0, &served).ok());
          ASSERT_EQ(served, in_window(probe, p)) << "cell " << probe << ", index " << p;
          if (!served) continue;
          std::vector<float> want(out.size(), 0.0f);
          for (int64_t ch = 0; ch < c; ++ch) {
            for (int64_t j = 0; j < cells; ++j) {
              float& slot = want[at(ch, indices[at(ch, j, cells)], slots)];
              const float v = values[at(ch, j, cells)];
              slot = k.op == Op::pool_backward_gather ? slot + v : v;
            }
          }
          ASSERT_EQ(out, want) << "cell " << probe << ", index " << p;
        }
      }
    }
  }
  EXPECT_GT(tested, 0) << "no window gather built";
}

// Unpooling's gradient by windows: each cell reads its k2s2p0 window and keeps the slot its
// index names, the gather by index's result; an index outside its cell's window (here the next
// cell's slot) declines, for the gather by index to serve.
TEST(Gather, UnpoolGradientReadsEachCellsWindow) {
  for (const char* name : {"max_unpool2d_backward_k2s2p0_b32_i64",
                           "max_unpool2d_backward_k2s2p0_cl_b32_i32",
                           "max_unpool3d_backward_k2s2p0_b32_i64"}) {
    const Kernel* k = built_kernel(backward_kernels(), name);
    if (!k) continue;  // not in this build's matrix
    SCOPED_TRACE(name);
    const int nd = k->nd;
    const int64_t c = 16, h = nd == 3 ? 3 : 4, w = 32, cells = h * w * (nd == 3 ? 2 : 1);
    const Ints cell_shape = nd == 3 ? Ints{2, c, 2, h, w} : Ints{2, c, h, w};
    Ints slot_shape = cell_shape;
    for (int d = 0; d < nd; ++d) slot_shape[2 + d] *= 2;
    const int64_t planes = 2 * c, slots = cells << nd;
    std::mt19937 rng(7);
    std::vector<float> grad(static_cast<size_t>(planes * slots));
    for (float& g : grad) g = static_cast<float>(rng() % 1000);
    // SegNet offsets (plane order: the views below are dense in the kernel's layout, so the
    // test lays out nothing; it only reads through the same coordinates).
    std::vector<int64_t> offsets(static_cast<size_t>(planes * cells));
    const View g = dense(grad.data(), DType::f32, slot_shape, k->layout);
    std::vector<int64_t> index64(offsets.size());
    std::vector<int32_t> index32(offsets.size());
    std::vector<float> got(offsets.size()), want(offsets.size());
    const View i = dense(k->index == DType::i64 ? static_cast<void*>(index64.data()) : index32.data(),
                         k->index, cell_shape, k->layout);
    const View o = dense(got.data(), DType::f32, cell_shape, k->layout);
    // Element (q, cell) of a dense view in either layout, through its strides.
    const auto at = [&](const View& v, int64_t q, int64_t cell) {
      int64_t pos = (q / c) * v.strides[0] + (q % c) * v.strides[1];
      for (int d = v.rank - 1; d >= 2; --d) {
        pos += (cell % v.shape[d]) * v.strides[d];
        cell /= v.shape[d];
      }
      return pos;
    };
    for (int64_t q = 0; q < planes; ++q) {
      for (int64_t cell = 0; cell < cells; ++cell) {
        int64_t slot = 0, scale = 1;  // the cell's window start, then a random tap
        const std::vector<int64_t> coord = plane_coords(cell, cell_shape);
        for (int d = nd - 1; d >= 0; --d) {
          slot += (2 * coord[d] + static_cast<int64_t>(rng() % 2)) * scale;
          scale *= slot_shape[2 + d];
        }
        index64[at(i, q, cell)] = slot;
        index32[at(i, q, cell)] = static_cast<int32_t>(slot);
        want[at(o, q, cell)] = grad[at(g, q, slot)];
      }
    }
    bool served = false;
    ASSERT_TRUE(gather_if_served(*k, {g, i, o}, 0, &served).ok());
    ASSERT_TRUE(served);
    EXPECT_EQ(got, want);
    const int64_t broken = at(i, 1, 5);
    index64[broken] += 2;  // the next cell's first slot along the row
    index32[broken] += 2;
    ASSERT_TRUE(gather_if_served(*k, {g, i, o}, 0, &served).ok());
    EXPECT_FALSE(served) << "an index outside its window served";
  }
}

// The gather beyond a kernel's buffers (64-bit offsets, one thread): output[j] =
// values[indices[j]] per plane, the first invalid index named.
TEST(HandWrittenKernels, GatherLargeOnSmallPlanes) {
  std::vector<float> values(2 * 9), out(2 * 4);
  for (int k = 0; k < 18; ++k) values[k] = static_cast<float>(k);
  std::vector<int64_t> indices{8, 0, 4, 3, 1, 2, 6, 7};
  const View v = dense(values.data(), DType::f32, {1, 2, 3, 3}, Layout::contiguous);
  const View i = dense(indices.data(), DType::i64, {1, 2, 2, 2}, Layout::contiguous);
  const View o = dense(out.data(), DType::f32, {1, 2, 2, 2}, Layout::contiguous);
  ASSERT_TRUE(gather_large(v, i, o, Layout::contiguous, 0).ok());
  const std::vector<float> expected{8, 0, 4, 3, 10, 11, 15, 16};
  EXPECT_EQ(out, expected);
  indices[5] = 9;
  const Status st = gather_large(v, i, o, Layout::contiguous, 0);
  EXPECT_EQ(st.code(), Code::index_out_of_range);
  EXPECT_NE(st.message().find("got 9 at element 5"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace poolgen::detail
