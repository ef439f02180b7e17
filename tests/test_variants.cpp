// Every CPU variant of every fat kernel gives the reference's results. Each run of this binary
// forces one variant (POOLGEN_FORCE_TARGET = avx512_skylake, or the build's other AVX-512
// feature set, | avx2 | sse41 | baseline) through Halide's can-use-target-features hook; ctest
// runs it once per variant, one process each. Every compiled value type, index type and layout
// goes through a pool + unpool round trip, and every gradient type through both backward ops
// (every compiled backward kernel).
#include "poolgen/poolgen.hpp"
#include "dtypes.hpp"
#include "random_cases.hpp"
#include "reference.hpp"
#include "values.hpp"

#include <HalideRuntime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using namespace poolgen;

bool has(const uint64_t* features, int feature) {
  return (features[feature >> 6] >> (feature & 63)) & 1;
}

// The instruction-set features of this architecture's variants, richest first; a variant may use
// its own and those after it. POOLGEN_FORCE_TARGET names one of them, or "baseline" (none).
#if defined(__aarch64__)
const int kIsa[] = {halide_target_feature_sve2, halide_target_feature_arm_fp16,
                    halide_target_feature_arm_dot_prod};
const char* const kIsaNames[] = {"sve2", "arm_fp16", "arm_dot_prod"};
#else
// (The AVX-512 variant's feature set is POOLGEN_AVX512_FEATURE: Skylake's by default.)
const int kIsa[] = {halide_target_feature_avx512_zen5,
                    halide_target_feature_avx512_zen4,
                    halide_target_feature_avx512_sapphirerapids,
                    halide_target_feature_avx512_cannonlake,
                    halide_target_feature_avx512_skylake,
                    halide_target_feature_avx512,
                    halide_target_feature_avx2,
                    halide_target_feature_fma,
                    halide_target_feature_f16c,
                    halide_target_feature_sse41};
const char* const kIsaNames[] = {"avx512_zen5", "avx512_zen4", "avx512_sapphirerapids",
                                 "avx512_cannonlake", "avx512_skylake", "avx512", "avx2", "fma",
                                 "f16c", "sse41"};
#endif
constexpr int kBaseline = static_cast<int>(std::size(kIsa));

int first_allowed_isa() {
  const char* forced = std::getenv("POOLGEN_FORCE_TARGET");
  for (int i = 0; forced && i < kBaseline; ++i) {
    if (std::strcmp(forced, kIsaNames[i]) == 0) return i;
  }
  return kBaseline;
}

// The build's floor: the last CPU target of its kernels.
std::string floor_target() {
  for (const KernelInfo& k : compiled_kernels()) {
    if (k.device == Device::cpu) return k.targets.back();
  }
  return "";
}

// The richest instruction-set feature the floor names (kBaseline: none).
int floor_isa() {
  const std::string target = floor_target();
  for (int i = 0; i < kBaseline; ++i) {
    const std::string tag = std::string("-") + kIsaNames[i];
    const size_t at = target.find(tag);
    if (at != std::string::npos &&
        (at + tag.size() == target.size() || target[at + tag.size()] == '-')) {
      return i;
    }
  }
  return kBaseline;
}

int g_allowed = kBaseline;
// Each fat kernel asks the hook about its variants once, on its first call, and keeps the
// richest one accepted. This records the richest ISA rank the hook ever accepted.
int g_richest_accepted = kBaseline + 1;

int force_variant(int count, const uint64_t* features) {
  int richest = kBaseline;
  for (int i = kBaseline - 1; i >= 0; --i) {
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
    if (g_allowed < kBaseline) wanted[kIsa[g_allowed] >> 6] |= uint64_t(1) << (kIsa[g_allowed] & 63);
    if (!halide_default_can_use_target_features(kWords, wanted)) {
      GTEST_SKIP() << "this CPU cannot run the " << std::getenv("POOLGEN_FORCE_TARGET")
                   << " variant";
    }
    halide_set_custom_can_use_target_features(force_variant);
  }
};

// Small integers (many ties) that every type holds, and a NaN in float types.
template <typename T>
std::vector<T> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(std::is_unsigned_v<T> ? 0 : -8, 8);
  std::vector<T> v(n);
  for (T& x : v) x = test::from_float<T>(static_cast<float>(small(rng)));
  if constexpr (test::is_float_type<T>()) v[n / 3] = test::from_float<T>(NAN);
  return v;
}

using test::values::same_value;

// A kernel's elements against the reference's, in logical order; `same` decides equality.
template <typename T, typename Same>
void expect_elements(const std::vector<T>& got, const std::vector<T>& want, Same same) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(same(got[i], want[i]))
        << "element " << i << ": got " << test::values::show(got[i]) << ", expected "
        << test::values::show(want[i]);
  }
}

// The (nd, shape) cases every kernel runs on, forward and backward.
const std::pair<int, Ints> kShapes[] = {
    {1, {2, 5, 37}},
    {1, {1, 20, 9}},  // rows narrower than a vector: vectors across rows (f32)
    {1, {1, 3, 64}},  // windows that tile a row of whole vectors of cells: 1-D k2s2p0 gathers
    {2, {2, 19, 11, 13}},
    {2, {2, 19, 6, 7}},  // rows of 3 outputs: vectors across channels (k2s2p0)
    // Rows of 4, 8 and 13 outputs, one or two whole vectors by the variant (k2s2p0 short_rows);
    // even extents, so that ceil_mode leaves them to that kernel.
    {2, {1, 3, 4, 8}},
    {2, {1, 3, 6, 16}},
    {2, {1, 2, 6, 26}},
    {2, {1, 3, 10, 15}},  // rows of 7, then 5 outputs: a vector spanning each row (exact_rows)
    {2, {1, 2, 4, 11}},
    // Rows of 12 to 15 (by window and ceil_mode): exact vectors on AVX-512 (k2s2p0, k3s2p1).
    {2, {1, 2, 3, 24}},
    {2, {1, 2, 4, 28}},
    {2, {1, 2, 2, 31}},
    // 7x7 planes, pooled over flat planes (k2s2p0 f32 NCHW) in whole steps of 16 planes: one
    // step, three (AVX-512's tasks; AVX2's and SSE4.1's take 8 and 4 planes); 18 planes keep the
    // k2s2p0 kernel.
    {2, {2, 8, 7, 7}},
    {2, {1, 48, 7, 7}},
    {2, {2, 9, 7, 7}},
    // Planes of even sides, whole runs of rows and vectors (i64 indices): vectors whose lanes
    // take 2 to 4 rows of 7 outputs, or 2 rows of 14 (and below, 2 rows of 8 at side 16).
    {2, {1, 16, 14, 14}},
    {2, {1, 4, 28, 28}},
    // Planes of 16 over flat planes (both windows), k3s2p1's of 32 too, and of 56 and 112 by
    // bands of rows: above the floor's widest side, 14, so that the SSE4.1 variant's calls keep
    // the fixed window there.
    {2, {1, 2, 16, 16}},
    {2, {1, 1, 32, 32}},
    {2, {1, 1, 56, 56}},
    {2, {1, 1, 112, 112}},
    {3, {1, 3, 7, 9, 11}},
    {3, {1, 2, 3, 4, 14}},  // rows of 7, and of 15: exact rows in 3-D
    {3, {1, 2, 2, 4, 30}},
    {3, {1, 2, 4, 4, 32}},  // rows of 16 cells: the 3-D k2s2p0 windows' kernels (opt-in)
    // Channel counts of 1, 2 or 4 whole vectors (by the variant and value width), which the
    // channels-last scatter zeroes with stores of their own, and 64, which most variants zero
    // as before (schedules/cpu_schedules.cpp).
    {2, {1, 16, 9, 10}},
    {3, {1, 8, 5, 6, 7}},
    {2, {1, 64, 5, 6}},
    // Planes the windows tile, with whole vectors of channels: unpooling's gradient by windows in
    // channels-last (max_unpool2d_backward_k2s2p0_cl, whose vectors run across channels).
    {2, {1, 32, 4, 6}},
    // Channel counts past the vectors of several registers that channels-last pooling's AVX-512
    // variants run (schedules/x86-64-linux-avx512_skylake/tuned.txt: 64 lanes in 2-D k3s2p1 and
    // the general 3-D kernel, 128 in the general 2-D one), whose last vector shifts back over
    // the one before it: 100 = 64 + 36, 200 = 128 + 72, 3-D 80 = 64 + 16.
    {2, {1, 100, 5, 6}},
    {2, {1, 200, 4, 5}},
    {3, {1, 80, 3, 4, 5}},
};

// A tensor of `shape` in `layout`, holding `logical` (row-major order) at the view's offsets.
template <typename T>
struct Tensor {
  std::vector<T> data;
  TensorView view;
  Tensor(const Ints& shape, Layout layout, const std::vector<T>& logical = {})
      : data(ref::numel(shape)) {
    view = layout == Layout::channels_last ? channels_last(data.data(), shape)
                                           : contiguous(data.data(), shape);
    if (!logical.empty()) set(logical);
  }
  // Offset of each element, in row-major order of the shape.
  std::vector<int64_t> offsets() const {
    const Ints& s = view.shape;
    Ints strides = view.strides;
    if (strides.empty()) {
      strides.assign(s.size(), 1);
      for (size_t d = s.size() - 1; d-- > 0;) strides[d] = strides[d + 1] * s[d + 1];
    }
    std::vector<int64_t> out;
    Ints index(s.size(), 0);
    for (size_t e = 0; e < data.size(); ++e) {
      int64_t offset = 0;
      for (size_t d = 0; d < s.size(); ++d) offset += index[d] * strides[d];
      out.push_back(offset);
      for (size_t d = s.size(); d-- > 0;) {
        if (++index[d] < s[d]) break;
        index[d] = 0;
      }
    }
    return out;
  }
  void set(const std::vector<T>& logical) {
    const std::vector<int64_t> at = offsets();
    for (size_t i = 0; i < at.size(); ++i) data[at[i]] = logical[i];
  }
  std::vector<T> logical() const {
    std::vector<T> out;
    for (int64_t offset : offsets()) out.push_back(data[offset]);
    return out;
  }
};

template <typename T, typename Index>
void check_round_trip(int nd, const Ints& shape, const PoolOptions& pool, Layout layout,
                      uint32_t seed) {
  const std::vector<T> input = random_values<T>(ref::numel(shape), seed);
  Ints out_shape;
  std::vector<T> want_values;
  std::vector<int64_t> want_indices;
  ASSERT_TRUE(ref::max_pool(nd, shape, input, pool, &out_shape, &want_values, &want_indices).ok());

  Tensor<T> in(shape, layout, input), values(out_shape, layout);
  Tensor<Index> indices(out_shape, layout);
  Status s = max_pool(nd, in.view, values.view, indices.view, pool);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::vector<T> got_values = values.logical();
  const std::vector<Index> got_indices = indices.logical();
  for (size_t i = 0; i < got_values.size(); ++i) {
    ASSERT_EQ(got_indices[i], want_indices[i]) << i;
    ASSERT_TRUE(same_value(got_values[i], want_values[i])) << i;
  }

  UnpoolOptions unpool;
  unpool.kernel_size = pool.kernel_size;
  unpool.stride = pool.stride;
  unpool.padding = pool.padding;
  unpool.output_size = Ints(shape.end() - nd, shape.end());
  // Automatic in cache and as if out of it (check_backward's reason).
  for (const auto& [path, out_of_cache] : {std::pair{Path::automatic, false},
                                           std::pair{Path::automatic, true},
                                           std::pair{Path::general, false}}) {
    unpool.path = path;
    Ints unpooled_shape;
    std::vector<T> want;
    ASSERT_TRUE(ref::max_unpool(nd, out_shape, want_values, want_indices, unpool,
                                &unpooled_shape, &want)
                    .ok());
    Tensor<T> got(unpooled_shape, layout);
    set_streaming_bytes(out_of_cache ? 0 : -1);
    s = max_unpool(nd, values.view, indices.view, got.view, unpool);
    set_streaming_bytes(-1);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_NO_FATAL_FAILURE(expect_elements(got.logical(), want, same_value<T>));
  }
}

// Every kernel settled on the forced variant: nothing richer was accepted, and it was (the
// last variant is the wrappers' fallback, which they never ask about; the runtime's floor
// check asks for it unless it is the baseline, and then nothing was accepted).
void expect_forced_variant_ran() {
  EXPECT_EQ(g_richest_accepted, g_allowed < kBaseline ? g_allowed : kBaseline + 1)
      << "the forced variant did not run";
}

TEST_F(Variant, EveryKernelMatchesTheReference) {
  std::set<std::pair<DType, DType>> built;  // (value, index) with pooling kernels
  for (const KernelInfo& k : compiled_kernels()) {
    if (k.op == "pool") built.insert({k.value_dtype, k.index_dtype});
  }
  ASSERT_FALSE(built.empty());
  if (g_allowed > floor_isa()) {
    GTEST_SKIP() << "the forced CPU is below the build's floor (CpusBelowTheFloorAreRefused)";
  }
  uint32_t seed = 1;
  for (const auto& types : built) {
    const DType value = types.first, index = types.second;  // lambdas cannot capture bindings
    test::visit_dtype(value, [&](auto tag) {
      using T = decltype(tag);
      for (Layout layout : {Layout::contiguous, Layout::channels_last}) {
        SCOPED_TRACE(std::string(dtype_name(value)) + " values, " + dtype_name(index) +
                     " indices, " + (layout == Layout::contiguous ? "contiguous" : "channels_last"));
        for (const auto& [k, s, p] :
             {std::tuple{2, 2, 0}, std::tuple{3, 2, 1}, std::tuple{3, 1, 1}}) {
          PoolOptions o;
          o.kernel_size = {k};
          o.stride = {s};
          o.padding = {p};
          o.ceil_mode = (seed & 1) != 0;
          const auto run = [&](int nd, const Ints& shape) {
            SCOPED_TRACE("nd=" + std::to_string(nd) + " seed=" + std::to_string(seed));
            if (index == DType::i64) {
              check_round_trip<T, int64_t>(nd, shape, o, layout, seed++);
            } else {
              check_round_trip<T, int32_t>(nd, shape, o, layout, seed++);
            }
          };
          for (const auto& [nd, shape] : kShapes) run(nd, shape);
        }
      }
    });
  }
  expect_forced_variant_ran();
}

// Both backward ops after a pooling: max_pool_backward of order-dependent gradients
// (random_cases.hpp) at the pooled indices on every path (automatic takes the window gathers
// where built, winner the CPU twin of CUDA's), and max_unpool_backward onto the pooling input's extents. Records the kernels
// the calls name in `named`.
template <typename T, typename Index>
void check_backward(int nd, const Ints& shape, const PoolOptions& pool, Layout layout,
                    uint32_t seed, std::set<std::string>* named) {
  const std::vector<T> input = random_values<T>(ref::numel(shape), seed);
  Ints out_shape;
  std::vector<T> pooled;
  std::vector<int64_t> indices64;
  ASSERT_TRUE(ref::max_pool(nd, shape, input, pool, &out_shape, &pooled, &indices64).ok());
  test::Rng rng(seed);
  const auto make = [](double x) { return test::from_float<T>(static_cast<float>(x)); };
  const std::vector<T> grad = test::random_gradients<T>(rng, ref::numel(out_shape), make);
  const DType index = std::is_same_v<Index, int32_t> ? DType::i32 : DType::i64;
  const Tensor<T> g(out_shape, layout, grad);
  const Tensor<Index> indices(out_shape, layout,
                              std::vector<Index>(indices64.begin(), indices64.end()));

  std::vector<T> want;
  ASSERT_TRUE(ref::max_pool_backward(nd, shape, grad, indices64, pool, &want).ok());
  // Path::winner: CUDA's window gather on its CPU twin where built, else the scatter. Automatic
  // twice: in cache, and as if out of it (streaming_bytes 0), where the contiguous gathers run.
  for (const auto& [path, out_of_cache] :
       {std::pair{Path::automatic, false}, std::pair{Path::automatic, true},
        std::pair{Path::general, false}, std::pair{Path::winner, false}}) {
    set_streaming_bytes(out_of_cache ? 0 : -1);
    PoolOptions o = pool;
    o.path = path;
    std::string name;
    ASSERT_TRUE(max_pool_backward_kernel_name(nd, g.view, index, shape, o, &name).ok());
    named->insert(name);
    SCOPED_TRACE(name + (out_of_cache ? " out of cache" : ""));
    Tensor<T> got(shape, layout);
    const Status s = max_pool_backward(nd, g.view, indices.view, got.view, o);
    set_streaming_bytes(-1);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_NO_FATAL_FAILURE(expect_elements(got.logical(), want, same_value<T>));
  }

  UnpoolOptions unpool;
  unpool.kernel_size = pool.kernel_size;
  unpool.stride = pool.stride;
  unpool.padding = pool.padding;
  unpool.output_size = Ints(shape.end() - nd, shape.end());
  const std::vector<T> unpooled_grad = test::random_gradients<T>(rng, ref::numel(shape), make);
  ASSERT_TRUE(
      ref::max_unpool_backward(nd, out_shape, unpooled_grad, indices64, unpool, &want).ok());
  const Tensor<T> unpooled(shape, layout, unpooled_grad);
  // Path::winner: the CPU twin of CUDA's kernel, where the build has one for these views; out
  // of cache, the contiguous window's kernel.
  for (const auto& [path, out_of_cache] :
       {std::pair{Path::automatic, false}, std::pair{Path::automatic, true},
        std::pair{Path::winner, false}}) {
    unpool.path = path;
    set_streaming_bytes(out_of_cache ? 0 : -1);
    std::string name;
    const Status named_status =
        max_unpool_backward_kernel_name(nd, unpooled.view, index, out_shape, unpool, &name);
    if (path == Path::winner && named_status.code() == Code::unsupported) continue;
    ASSERT_TRUE(named_status.ok()) << named_status.message();
    named->insert(name);
    SCOPED_TRACE(name + (out_of_cache ? " out of cache" : ""));
    Tensor<T> got(out_shape, layout);
    const Status s = max_unpool_backward(nd, unpooled.view, indices.view, got.view, unpool);
    set_streaming_bytes(-1);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_NO_FATAL_FAILURE(expect_elements(got.logical(), want, test::values::same_bits<T>));
  }
}

TEST_F(Variant, EveryBackwardKernelMatchesTheReference) {
  std::set<std::pair<DType, DType>> built;  // (gradient, index) with backward kernels
  std::set<std::string> compiled;           // every CPU kernel of the backward ops
  for (const KernelInfo& k : compiled_kernels()) {
    if (k.device != Device::cpu || k.op.find("backward") == std::string::npos) continue;
    compiled.insert(k.name);
    if (k.op == "pool_backward_scatter") built.insert({k.value_dtype, k.index_dtype});
  }
  if (built.empty()) GTEST_SKIP() << "this build has no gradient dtype (POOLGEN_VALUE_TYPES)";
  if (g_allowed > floor_isa()) {
    GTEST_SKIP() << "the forced CPU is below the build's floor (CpusBelowTheFloorAreRefused)";
  }
  std::set<std::string> named;
  uint32_t seed = 1000;
  for (const auto& types : built) {
    const DType value = types.first, index = types.second;  // lambdas cannot capture bindings
    test::visit_gradient_dtype(value, [&](auto tag) {
      using T = decltype(tag);
      for (Layout layout : {Layout::contiguous, Layout::channels_last}) {
        const char* layout_name = layout == Layout::contiguous ? "contiguous" : "channels_last";
        SCOPED_TRACE(std::string(dtype_name(value)) + " gradients, " + dtype_name(index) +
                     " indices, " + layout_name);
        for (const auto& [k, s, p] :
             {std::tuple{2, 2, 0}, std::tuple{3, 2, 1}, std::tuple{3, 1, 1}}) {
          PoolOptions o;
          o.kernel_size = {k};
          o.stride = {s};
          o.padding = {p};
          o.ceil_mode = s == 1;  // the fixed windows' kernels take no overhanging window
          const auto run = [&](int nd, const Ints& shape) {
            SCOPED_TRACE("nd=" + std::to_string(nd) + " seed=" + std::to_string(seed));
            if (index == DType::i64) {
              check_backward<T, int64_t>(nd, shape, o, layout, seed++, &named);
            } else {
              check_backward<T, int32_t>(nd, shape, o, layout, seed++, &named);
            }
          };
          for (const auto& [nd, shape] : kShapes) run(nd, shape);
        }
      }
    });
  }
  for (const std::string& kernel : compiled) {
    EXPECT_EQ(named.count(kernel), 1u) << kernel << " was not reached";
  }
  expect_forced_variant_ran();
}

// Every kernel assumes the instruction sets of the build's last CPU target (its floor; SSE4.1
// by default on x86): a CPU forced below it is refused with an error naming that target, before
// any kernel runs; at or above it, calls go ahead.
TEST_F(Variant, CpusBelowTheFloorAreRefused) {
  const std::string floor = floor_target();
  ASSERT_FALSE(floor.empty());
  float in[16] = {}, values[4];
  int64_t indices[4];
  PoolOptions o;
  o.kernel_size = {2};
  const Status s = max_pool(2, contiguous(in, {1, 1, 4, 4}), contiguous(values, {1, 1, 2, 2}),
                            contiguous(indices, {1, 1, 2, 2}), o);
  if (g_allowed > floor_isa()) {
    ASSERT_EQ(s.code(), Code::unsupported) << s.message();
    EXPECT_NE(s.message().find("CPU: expected the instruction sets of this build's least CPU "
                               "target, " + floor + ", got a CPU without them"),
              std::string::npos)
        << s.message();
  } else {
    EXPECT_TRUE(s.ok() || s.code() == Code::unsupported) << s.message();
    EXPECT_EQ(s.message().find("CPU:"), std::string::npos) << s.message();
  }
}

}  // namespace
