// Typed differential tests: every value dtype (f32 f64 f16 bf16 i8 u8 i16 i32 i64), both index
// dtypes (i64, i32), and three input layouts (contiguous, channels-last, any other strided view:
// permuted spatial memory order, innermost stride 2), with outputs sometimes in another layout,
// against the reference (tests/reference.cpp), bit for bit (any NaN equals any NaN when pooling;
// unpooling moves bits, so its outputs must be bit-identical). Every buffer sits in a bigger
// backing with guard elements; nothing outside a view may change, inputs must be unchanged, and
// input bytes outside a view hold values that would win (NaN, the type's highest) or invalid
// indices (-1), so reading them shows.
//
// Also: contiguous vs channels-last results identical on bigger shapes, kernel choice by layout,
// dtype, index dtype and path, and duplicate unpool indices on several thread counts.
//
// Seeds are fixed; each parameterized test draws its own sequence.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "built_kernels.hpp"
#include "dtypes.hpp"
#include "guarded_buffer.hpp"
#include "lib_util.hpp"
#include "poolgen/poolgen.h"
#include "poolgen/poolgen.hpp"
#include "random_cases.hpp"
#include "reference.hpp"
#include "test_util.hpp"
#include "typed_views.hpp"
#include "values.hpp"

namespace poolgen {
namespace {

using test::any_pool_kernel;
using test::describe;
using test::path_name;
using test::plane_size;
using test::pool_kernel_built;
using test::random_pool_config;
using test::random_unpool_mode;
using test::random_window;
using test::Rng;
using test::str;
using test::unpool_kernel_built;

// The framework (layouts, Buf, random values, parameters, seeds): tests/typed_views.hpp.
using namespace test::typed;
// Element values: tests/values.hpp.
using namespace test::values;

constexpr int kPoolConfigs = 96;    // per dtype x index dtype x layout x rank
constexpr int kUnpoolConfigs = 96;  // likewise

// Empty when the build has kernels for the combination; otherwise why the test is skipped.
std::string missing_kernels(DType value, DType index, bool unpool) {
  if (!any_pool_kernel(value)) {
    return std::string("value dtype ") + dtype_name(value) +
           " is not compiled in this build (POOLGEN_VALUE_TYPES)";
  }
  if (!pool_kernel_built(value, index)) {
    return std::string("index dtype ") + dtype_name(index) +
           " is not compiled in this build (POOLGEN_INDEX_TYPES)";
  }
  if (unpool && !unpool_kernel_built(value, index)) {
    return std::string("no unpooling kernel of ") + std::to_string(8 * dtype_size(value)) +
           "-bit elements with " + dtype_name(index) + " indices in this build";
  }
  return "";
}

// Calls f(T{}, I{}) for the parameter's value and index dtypes; skips the test when the build
// has no kernels for them (unpool: the unpooling kernels too).
template <typename F>
void run_param(const Param& p, bool unpool, F&& f) {
  const std::string missing = missing_kernels(p.value, p.index, unpool);
  if (!missing.empty()) GTEST_SKIP() << missing;
  visit_dtypes(p.value, p.index, f);
}

// ---------------------------------------------------------------------------------------------
// Pooling.

template <typename T, typename I>
void pool_configs(const Param& p) {
  const int nd = p.nd;
  Rng rng(seed_of(p.value, p.index, p.kind, nd, 1));
  int failures = 0, fast_hits = 0, configs = 0;
  for (int iter = 0; iter < kPoolConfigs && failures < kMaxReportedFailures; ++iter) {
    const int fast = random_window(rng, 0.45);
    Ints shape;
    PoolOptions o;
    random_pool_config(rng, nd, fast, pool_config_kinds(), &shape, &o);
    const std::vector<T> input = random_values<T>(rng, test::numel(shape));
    Ints out_shape;
    std::vector<T> expected_values;
    std::vector<int64_t> expected_indices64;
    Status rs =
        ref::max_pool<T>(nd, shape, input, o, &out_shape, &expected_values, &expected_indices64);
    ASSERT_TRUE(rs.ok()) << rs.message();
    const std::vector<I> expected_indices(expected_indices64.begin(), expected_indices64.end());

    const bool gaps = rng.chance(0.5);
    Buf<T> in(make_layout(rng, nd, shape, p.kind, gaps), winning_value<T>());
    in.set(input);
    const Kind vk = rng.chance(0.6) ? p.kind : random_kind(rng);
    const Kind ik = rng.chance(0.6) ? vk : random_kind(rng);
    Buf<T> vals(make_layout(rng, nd, out_shape, vk, rng.chance(0.5)), guard_value<T>());
    Buf<I> idxs(make_layout(rng, nd, out_shape, ik, rng.chance(0.5)), guard_value<I>());
    ++configs;
    {
      std::string automatic, general;
      PoolOptions q = o;
      q.path = Path::general;
      if (max_pool_kernel_name(nd, in.view(), p.index, o, &automatic).ok() &&
          max_pool_kernel_name(nd, in.view(), p.index, q, &general).ok() && automatic != general) {
        ++fast_hits;
      }
    }
    const std::vector<T> in_before = in.data;
    for (Path path : {Path::automatic, Path::general}) {
      o.path = path;
      vals.reset(guard_value<T>(), sentinel_value<T>());
      idxs.reset(guard_value<I>(), sentinel_value<I>());
      const Status st = max_pool(nd, in.view(), vals.view(), idxs.view(), o);
      const std::string value_diff =
          st.ok() ? mismatches(out_shape, expected_values, vals.get(), same_value<T>) : "";
      const std::string index_diff =
          st.ok() ? mismatches(out_shape, expected_indices, idxs.get(), same_bits<I>) : "";
      const bool values_outside = vals.outside_is(guard_value<T>());
      const bool indices_outside = idxs.outside_is(guard_value<I>());
      const bool input_same = in.bytes_equal(in_before);
      if (!st.ok() || !value_diff.empty() || !index_diff.empty() || !values_outside ||
          !indices_outside || !input_same) {
        ++failures;
        std::string kernel;
        max_pool_kernel_name(nd, in.view(), p.index, o, &kernel);
        ADD_FAILURE() << "config " << iter << ": max_pool" << nd << "d values "
                      << dtype_name(p.value) << " indices " << dtype_name(p.index) << " path "
                      << path_name(path) << " kernel " << kernel << "\n  " << describe(o)
                      << "\n  input   " << in.layout.describe() << "\n  values  "
                      << vals.layout.describe() << "\n  indices " << idxs.layout.describe()
                      << "\n  status: " << (st.ok() ? "ok" : st.message())
                      << "\n  values: " << (value_diff.empty() ? "same" : value_diff)
                      << "\n  indices: " << (index_diff.empty() ? "same" : index_diff)
                      << "\n  bytes outside values view untouched: " << values_outside
                      << ", outside indices view: " << indices_outside
                      << ", input unchanged: " << input_same;
        break;
      }
    }
  }
  if (p.kind == Kind::contiguous && nd >= 2 && test::fixed_window_built(p.value, p.index)) {
    EXPECT_GT(fast_hits, test::min_fast_hits(nd, configs))
        << "too few window-kernel configurations";
  }
}

class TypedPool : public ::testing::TestWithParam<Param> {};

TEST_P(TypedPool, MatchesReference) {
  const Param p = GetParam();
  run_param(p, false, [&](auto v, auto i) { pool_configs<decltype(v), decltype(i)>(p); });
}

INSTANTIATE_TEST_SUITE_P(, TypedPool, ::testing::ValuesIn(all_params(test::kAllDTypes)),
                         param_name);

// ---------------------------------------------------------------------------------------------
// Unpooling.

// streaming: the calls run with streaming_bytes 0, so that every call is out of cache, as the
// contiguous gathers need (runtime/dispatch/kernel_table.hpp, gather_pays).
template <typename T, typename I>
void unpool_configs(const Param& p, bool streaming) {
  const int nd = p.nd;
  Rng rng(seed_of(p.value, p.index, p.kind, nd, 2));
  int failures = 0, errors = 0, gather_named = 0;
  // The contiguous gathers take only planes their windows tile, in rows of whole vectors (2-D,
  // 3-D): more long rows, of which random_pool_config makes such planes.
  test::UnpoolCaseOptions kinds = unpool_case_kinds();
  if (p.kind == Kind::contiguous) kinds.long_rows_percent = 45;
  for (int iter = 0; iter < kUnpoolConfigs && failures < kMaxReportedFailures; ++iter) {
    const int mode = random_unpool_mode(rng, {40, 70, 88});
    auto [shape, values, indices64, o] =
        test::random_unpool_case<T, I>(rng, nd, mode, kinds, random_values<T>);
    Ints out_shape;
    std::vector<T> expected;
    const Status ref_status =
        ref::max_unpool<T>(nd, shape, values, indices64, o, &out_shape, &expected);
    int64_t first_bad = 0;
    if (!ref_status.ok()) {
      ASSERT_EQ(ref_status.code(), Code::index_out_of_range) << ref_status.message();
      ASSERT_TRUE(ref::max_unpool_output_shape(nd, shape, o, &out_shape).ok());
      const int64_t plane = plane_size(nd, out_shape);
      for (int64_t i : indices64) {
        if (i < 0 || i >= plane) {
          first_bad = i;
          break;
        }
      }
      ++errors;
    }
    const std::vector<I> indices(indices64.begin(), indices64.end());

    Buf<T> v(make_layout(rng, nd, shape, p.kind, rng.chance(0.5)), winning_value<T>());
    v.set(values);
    const Kind ik = rng.chance(0.7) ? p.kind : random_kind(rng);
    const Kind ok = rng.chance(0.6) ? p.kind : random_kind(rng);
    Buf<I> ix(make_layout(rng, nd, shape, ik, rng.chance(0.5)), static_cast<I>(-1));
    ix.set(indices);
    Buf<T> out(make_layout(rng, nd, out_shape, ok, rng.chance(0.5)), guard_value<T>());
    const std::vector<T> v_before = v.data;
    const std::vector<I> ix_before = ix.data;
    std::string automatic;
    if (max_unpool_kernel_name(nd, v.view(), p.index, o, &automatic).ok() &&
        automatic.rfind("max_unpool_scatter", 0) != 0) {
      ++gather_named;
    }
    for (Path path : {Path::automatic, Path::general}) {
      o.path = path;
      out.reset(guard_value<T>(), sentinel_value<T>());
      const Status st = max_unpool(nd, v.view(), ix.view(), out.view(), o);
      bool good = st.code() == ref_status.code();
      std::string diff;
      if (good && ref_status.ok()) {
        diff = mismatches(out_shape, expected, out.get(), same_bits<T>);
        good = diff.empty();
      }
      if (good && !ref_status.ok()) {
        good = st.message().find("indices") != std::string::npos &&
               st.message().find(std::to_string(first_bad)) != std::string::npos;
      }
      const bool outside = out.outside_is(guard_value<T>());
      const bool inputs_same = v.bytes_equal(v_before) && ix.bytes_equal(ix_before);
      if (!good || !outside || !inputs_same) {
        ++failures;
        std::string kernel;
        max_unpool_kernel_name(nd, v.view(), p.index, o, &kernel);
        ADD_FAILURE() << "config " << iter << " (mode " << mode << "): max_unpool" << nd
                      << "d values " << dtype_name(p.value) << " indices " << dtype_name(p.index)
                      << " path " << path_name(path) << " kernel " << kernel << "\n  "
                      << describe(o) << "\n  values  " << v.layout.describe() << "\n  indices "
                      << ix.layout.describe() << "\n  output  " << out.layout.describe()
                      << "\n  indices (logical order) " << head(indices64)
                      << "\n  status: " << (st.ok() ? "ok" : st.message())
                      << "\n  expected status: " << (ref_status.ok() ? "ok" : ref_status.message())
                      << "\n  output: " << (diff.empty() ? "same (or not compared)" : diff)
                      << "\n  bytes outside output view untouched: " << outside
                      << ", inputs unchanged: " << inputs_same;
        break;
      }
    }
  }
  EXPECT_GT(errors, 0) << "no invalid-index configuration was generated";
  // Where this build has gather kernels for the values' layout, they must be reached on calls
  // out of cache, where every gather is tried: in cache these small draws take the scatter (the
  // contiguous gathers from 4 MiB, the channels-last ones above a few channels and windows:
  // gather_pays).
  const Layout layout = p.kind == Kind::channels_last ? Layout::channels_last : Layout::contiguous;
  bool gather_built = false;
  for (const KernelInfo& k : compiled_kernels()) {
    gather_built = gather_built || (k.op == "unpool_gather" && k.layout == layout &&
                                    dtype_size(k.value_dtype) == dtype_size(p.value) &&
                                    k.index_dtype == p.index && k.nd == nd);
  }
  if (gather_built && p.kind != Kind::strided && streaming) {
    EXPECT_GT(gather_named, 0) << "no configuration reached a gather kernel";
  }
}

class TypedUnpool : public ::testing::TestWithParam<Param> {};

TEST_P(TypedUnpool, MatchesReference) {
  const Param p = GetParam();
  run_param(p, true, [&](auto v, auto i) { unpool_configs<decltype(v), decltype(i)>(p, false); });
}

// The same calls with the output streamed (bypassing the caches from a scratch): the same bits,
// nothing written outside the output's view, whatever its alignment and layout.
TEST_P(TypedUnpool, MatchesReferenceStreaming) {
  const Param p = GetParam();
  const test::StreamingEveryOutput streaming;
  run_param(p, true, [&](auto v, auto i) { unpool_configs<decltype(v), decltype(i)>(p, true); });
}

INSTANTIATE_TEST_SUITE_P(, TypedUnpool, ::testing::ValuesIn(all_params(test::kAllDTypes)),
                         param_name);

// ---------------------------------------------------------------------------------------------
// Layout equivalence on bigger shapes: contiguous and channels-last inputs (through the view
// makers) give identical bytes, pooling (values and indices) and unpooling; both also match the
// reference.

template <typename T, typename I>
void layout_equivalence(DType index, Rng& rng) {
  const DType value = test::dtype_of<T>();
  // The last two are batch-less: channels_last() is told nd. The 2-D ones after the first pool
  // (k2s2p0) to rows of 3 in planes of many channels, which vectors across channels serve: a
  // partial vector of planes (19) and more than one task's (72); 70 channels, whose partial
  // vector would begin a task, take the scalar loop. Rows narrower than a vector (the 2-D
  // general kernel's; k3s2p1's up to 15 outputs) run across channels too, their staged rows
  // copied channels innermost: 24 channels (a partial AVX-512 vector), and the 3-D 1x24x4x6x7
  // (rows of 3 and 4), which the 3-D general and k2s2p0 kernels run so for f32, as the 1-D
  // kernel does rows of 6 and 7 (2x24x13); 70 rows of 9 keep the scalar loop.
  const std::pair<int, Ints> shapes[] = {{1, {3, 20, 101}},
                                         {1, {2, 24, 13}},
                                         {1, {1, 70, 9}},
                                         {2, {2, 24, 17, 19}},
                                         {2, {2, 19, 7, 6}},
                                         {2, {1, 72, 5, 7}},
                                         {2, {1, 70, 5, 7}},
                                         {3, {2, 16, 5, 9, 11}},
                                         {3, {1, 24, 4, 6, 7}},
                                         {2, {24, 17, 19}},
                                         {1, {20, 101}}};
  for (const auto& [nd, shape] : shapes) {
    const std::vector<T> input = random_values<T>(rng, test::numel(shape));
    for (PoolOptions o : equivalence_windows()) {
      Ints out_shape;
      std::vector<T> ref_values;
      std::vector<int64_t> ref_indices64;
      ASSERT_TRUE(
          ref::max_pool<T>(nd, shape, input, o, &out_shape, &ref_values, &ref_indices64).ok());
      const std::vector<I> ref_indices(ref_indices64.begin(), ref_indices64.end());
      const int64_t n_out = test::numel(out_shape);
      for (Path path : {Path::automatic, Path::general}) {
        o.path = path;
        SCOPED_TRACE(std::string(dtype_name(value)) + " indices " + dtype_name(index) + " " +
                     str(shape) + " " + describe(o) + " path " + path_name(path));
        // Contiguous everywhere.
        std::vector<T> c_values(n_out, sentinel_value<T>());
        std::vector<I> c_indices(n_out, sentinel_value<I>());
        Status st = max_pool(nd, contiguous(const_cast<T*>(input.data()), value, shape),
                             contiguous(c_values.data(), value, out_shape),
                             contiguous(c_indices.data(), index, out_shape), o);
        ASSERT_TRUE(st.ok()) << st.message();
        // Channels-last everywhere: the input's bytes permuted into (N, spatial..., C) order.
        std::vector<T> cl_input = to_channels_last(input, shape, nd);
        std::vector<T> l_values(n_out, sentinel_value<T>());
        std::vector<I> l_indices(n_out, sentinel_value<I>());
        st = max_pool(nd, channels_last(cl_input.data(), value, shape, nd),
                      channels_last(l_values.data(), value, out_shape, nd),
                      channels_last(l_indices.data(), index, out_shape, nd), o);
        ASSERT_TRUE(st.ok()) << st.message();
        const std::vector<T> cl_values = from_channels_last(l_values, out_shape, nd);
        const std::vector<I> cl_indices = from_channels_last(l_indices, out_shape, nd);
        std::string diff = mismatches(out_shape, ref_values, c_values, same_value<T>);
        EXPECT_TRUE(diff.empty()) << "contiguous values vs reference: " << diff;
        diff = mismatches(out_shape, ref_indices, c_indices, same_bits<I>);
        EXPECT_TRUE(diff.empty()) << "contiguous indices vs reference: " << diff;
        diff = mismatches(out_shape, c_values, cl_values, same_bits<T>);
        EXPECT_TRUE(diff.empty()) << "channels-last values vs contiguous (bytes): " << diff;
        diff = mismatches(out_shape, c_indices, cl_indices, same_bits<I>);
        EXPECT_TRUE(diff.empty()) << "channels-last indices vs contiguous (bytes): " << diff;

        // Unpooling the pooled result, with a few duplicates, both layouts.
        if (path == Path::general) continue;  // the unpool paths below cover both
        std::vector<I> u_indices = c_indices;
        const int64_t plane = plane_size(nd, shape);
        for (int c = 0; c < 20 && n_out > 0; ++c) {
          u_indices[rng.uniform(0, n_out - 1)] = static_cast<I>(rng.uniform(0, plane - 1));
        }
        if (o.dilation != Ints{1}) continue;  // unpooling has no dilation
        UnpoolOptions u;
        u.kernel_size = o.kernel_size;
        u.stride = o.stride;
        u.padding = o.padding;
        u.output_size = Ints(shape.end() - nd, shape.end());
        {
          // The input's extents as output_size, when in range (ceil_mode may leave them out).
          Ints def;
          UnpoolOptions d = u;
          d.output_size.clear();
          ref::PoolWindow w;
          ASSERT_TRUE(ref::expand_unpool_options(nd, d, &w).ok());
          ASSERT_TRUE(ref::max_unpool_output_shape(nd, out_shape, d, &def).ok());
          bool in_range = true;
          for (int i = 0; i < nd; ++i) {
            const int64_t e = shape[shape.size() - nd + i], df = def[def.size() - nd + i];
            in_range = in_range && df - w.stride[i] < e && e < df + w.stride[i];
          }
          if (!in_range) continue;
        }
        const std::vector<int64_t> u_indices64(u_indices.begin(), u_indices.end());
        std::vector<T> ref_out;
        Ints unpooled_shape;
        ASSERT_TRUE(
            ref::max_unpool<T>(nd, out_shape, c_values, u_indices64, u, &unpooled_shape, &ref_out)
                .ok());
        ASSERT_EQ(unpooled_shape, shape);
        for (Path upath : {Path::automatic, Path::general}) {
          u.path = upath;
          SCOPED_TRACE(std::string("unpool path ") + path_name(upath));
          std::vector<T> c_out(input.size(), sentinel_value<T>());
          st = max_unpool(nd, contiguous(c_values.data(), value, out_shape),
                          contiguous(u_indices.data(), index, out_shape),
                          contiguous(c_out.data(), value, shape), u);
          ASSERT_TRUE(st.ok()) << st.message();
          // Channels-last values and indices (the same logical tensors), channels-last output.
          std::vector<T> l_u_values = to_channels_last(c_values, out_shape, nd);
          std::vector<I> l_u_indices = to_channels_last(u_indices, out_shape, nd);
          std::vector<T> l_out(input.size(), sentinel_value<T>());
          st = max_unpool(nd, channels_last(l_u_values.data(), value, out_shape, nd),
                          channels_last(l_u_indices.data(), index, out_shape, nd),
                          channels_last(l_out.data(), value, shape, nd), u);
          ASSERT_TRUE(st.ok()) << st.message();
          const std::vector<T> cl_out = from_channels_last(l_out, shape, nd);
          diff = mismatches(shape, ref_out, c_out, same_bits<T>);
          EXPECT_TRUE(diff.empty()) << "contiguous unpool vs reference: " << diff;
          diff = mismatches(shape, c_out, cl_out, same_bits<T>);
          EXPECT_TRUE(diff.empty()) << "channels-last unpool vs contiguous (bytes): " << diff;
        }
      }
    }
  }
}

// One value dtype (printed by name in test listings).
struct ValueDType {
  DType value;
};

void PrintTo(const ValueDType& p, std::ostream* os) { *os << dtype_name(p.value); }

std::vector<ValueDType> all_value_dtypes() {
  std::vector<ValueDType> v;
  for (DType d : test::kAllDTypes) v.push_back({d});
  return v;
}

class TypedLayoutEquivalence : public ::testing::TestWithParam<ValueDType> {};

TEST_P(TypedLayoutEquivalence, ContiguousEqualsChannelsLast) {
  const DType value = GetParam().value;
  if (!any_pool_kernel(value)) {
    GTEST_SKIP() << "value dtype " << dtype_name(value) << " is not compiled in this build";
  }
  Rng rng(0xe9e9 + static_cast<uint64_t>(value));
  for (DType index : {DType::i64, DType::i32}) {
    if (!missing_kernels(value, index, true).empty()) {
      std::cout << "[ NOTE     ] " << missing_kernels(value, index, true) << "\n";
      continue;
    }
    visit_dtypes(value, index, [&](auto v, auto i) {
      layout_equivalence<decltype(v), decltype(i)>(index, rng);
    });
  }
}

INSTANTIATE_TEST_SUITE_P(, TypedLayoutEquivalence, ::testing::ValuesIn(all_value_dtypes()),
                         [](const ::testing::TestParamInfo<ValueDType>& info) {
                           return std::string(dtype_name(info.param.value));
                         });

// ---------------------------------------------------------------------------------------------
// The view makers.

TEST(TypedViews, ChannelsLastStrides) {
  float x = 0;
  EXPECT_EQ(channels_last(&x, {2, 3, 4, 5}).strides, (Ints{60, 1, 15, 3}));
  EXPECT_EQ(channels_last(&x, {2, 3, 4, 5}, 2).strides, (Ints{60, 1, 15, 3}));
  EXPECT_EQ(channels_last(&x, {3, 4, 5}, 2).strides, (Ints{1, 15, 3}));  // batch-less (C, H, W)
  EXPECT_EQ(channels_last(&x, {3, 4, 5}).strides, (Ints{20, 1, 4}));     // (N, C, L)
  EXPECT_EQ(channels_last(&x, {3, 4, 5}, 1).strides, (Ints{20, 1, 4}));
  EXPECT_EQ(channels_last(&x, {3, 4}, 1).strides, (Ints{1, 3}));  // batch-less (C, L)
  EXPECT_EQ(channels_last(&x, {2, 3, 4, 5, 6}, 3).strides, (Ints{360, 1, 90, 18, 3}));
  EXPECT_EQ(channels_last(&x, {3, 4, 5, 6}, 3).strides, (Ints{1, 90, 18, 3}));  // (C, D, H, W)
  const TensorView v = channels_last(static_cast<void*>(&x), DType::bf16, {0, 3, 4, 5});
  EXPECT_EQ(v.dtype, DType::bf16);
  EXPECT_EQ(v.shape, (Ints{0, 3, 4, 5}));
  EXPECT_EQ(v.data, static_cast<void*>(&x));
  const TensorView c = contiguous(static_cast<void*>(&x), DType::i8, {2, 3, 4, 5});
  EXPECT_EQ(c.dtype, DType::i8);
  EXPECT_TRUE(c.strides.empty() || c.strides == (Ints{60, 20, 5, 1})) << str(c.strides);
  EXPECT_EQ(contiguous(static_cast<const f16_t*>(nullptr), {1, 2}).dtype, DType::f16);
  EXPECT_EQ(channels_last(static_cast<const int64_t*>(nullptr), {1, 2, 3}).dtype, DType::i64);
}

// ---------------------------------------------------------------------------------------------
// Kernel choice: layout, dtypes and path decide the kernel's name (data is never read).

TEST(TypedKernelChoice, PoolNamesFollowLayoutDTypesAndPath) {
  const std::vector<KernelInfo> kernels = compiled_kernels();
  void* const fake = reinterpret_cast<void*>(uintptr_t{0x1000});  // never read
  int checked = 0;
  for (DType value : test::kAllDTypes) {
    for (DType index : {DType::i64, DType::i32}) {
      if (!pool_kernel_built(value, index)) continue;
      const std::string suffix = std::string("_") + dtype_name(value) + "_" + dtype_name(index);
      for (int nd = 1; nd <= 3; ++nd) {
        Ints shape{2, 5};
        for (int i = 0; i < nd; ++i) shape.push_back(8 + i);
        std::vector<PoolOptions> windows(3);
        windows[0].kernel_size = {3};
        windows[0].stride = {1};       // no window kernel
        windows[1].kernel_size = {2};  // k2s2p0
        windows[2].kernel_size = {3};  // k3s2p1
        windows[2].stride = {2};
        windows[2].padding = {1};
        const char* window_tag[] = {"", "_k2s2p0", "_k3s2p1"};
        const std::string base = "max_pool" + std::to_string(nd) + "d";
        for (int w = 0; w < 3; ++w) {
          SCOPED_TRACE(base + suffix + " window " + std::to_string(w));
          const TensorView c = contiguous(fake, value, shape);
          const TensorView cl = channels_last(fake, value, shape);
          const TensorView other = transposed_view(fake, value, shape, nd);
          const std::string window_kernel = base + window_tag[w] + suffix;
          const bool has_window = w > 0 && find_kernel(kernels, window_kernel) != nullptr;
          const std::string window_kernel_cl = base + window_tag[w] + "_cl" + suffix;
          const bool has_window_cl = w > 0 && find_kernel(kernels, window_kernel_cl) != nullptr;
          for (Path path : {Path::automatic, Path::general}) {
            PoolOptions o = windows[w];
            o.path = path;
            std::string name;
            Status st = max_pool_kernel_name(nd, c, index, o, &name);
            ASSERT_TRUE(st.ok()) << st.message();
            const std::string expect_c =
                path == Path::automatic && has_window ? window_kernel : base + suffix;
            EXPECT_EQ(name, expect_c) << "contiguous, path " << path_name(path);
            st = max_pool_kernel_name(nd, cl, index, o, &name);
            ASSERT_TRUE(st.ok()) << st.message();
            EXPECT_EQ(name, path == Path::automatic && has_window_cl ? window_kernel_cl
                                                                     : base + "_cl" + suffix)
                << "channels-last, path " << path_name(path);
            EXPECT_TRUE(contains(name, "_cl_"));
            st = max_pool_kernel_name(nd, other, index, o, &name);
            ASSERT_TRUE(st.ok()) << st.message();
            EXPECT_EQ(name, expect_c)
                << "strided " << str(other.strides) << " (packed first), path " << path_name(path);
            if (path == Path::general) {
              for (const TensorView* t :
                   std::initializer_list<const TensorView*>{&c, &cl, &other}) {
                ASSERT_TRUE(max_pool_kernel_name(nd, *t, index, o, &name).ok());
                EXPECT_FALSE(contains(name, "_k2s2p0") || contains(name, "_k3s2p1")) << name;
              }
            }
            if (index == DType::i32) {
              EXPECT_EQ(name.substr(name.size() - 4), "_i32") << name;
            }
            ++checked;
          }
          // Every named kernel is listed, with what it serves.
          for (const std::string& n : {base + suffix, base + "_cl" + suffix}) {
            const KernelInfo* k = find_kernel(kernels, n);
            ASSERT_NE(k, nullptr) << n << " is not in compiled_kernels()";
            EXPECT_EQ(k->op, "pool");
            EXPECT_EQ(k->nd, nd);
            EXPECT_EQ(k->layout, contains(n, "_cl_") ? Layout::channels_last : Layout::contiguous);
            EXPECT_EQ(k->value_dtype, value);
            EXPECT_EQ(k->index_dtype, index);
            EXPECT_FALSE(k->targets.empty());
          }
          if (nd >= 2 && w > 0 && value == DType::f32 && index == DType::i64) {
            // Contiguous 3-D k3s2p1 did not earn its code (cmake/PoolgenKernels.cmake).
            const bool skipped = nd == 3 && w == 2;
            EXPECT_EQ(has_window, !skipped) << window_kernel << (skipped ? " is" : " is not")
                                            << " compiled";
            EXPECT_TRUE(has_window_cl) << window_kernel_cl << " is not compiled";
          }
        }
        // Channels-last memory with C = 1, or a contiguous view whose innermost extent is 1:
        // the contiguous kernel (the rule looks at the innermost spatial stride first).
        {
          PoolOptions o;
          o.kernel_size = {1};
          Ints c1 = shape;
          c1[1] = 1;
          std::string name;
          ASSERT_TRUE(
              max_pool_kernel_name(nd, channels_last(fake, value, c1), index, o, &name).ok());
          EXPECT_EQ(name, base + suffix) << "channels-last memory with C = 1";
          Ints w1 = shape;
          w1.back() = 1;
          ASSERT_TRUE(
              max_pool_kernel_name(nd, channels_last(fake, value, w1), index, o, &name).ok());
          EXPECT_EQ(name, base + suffix) << "channels-last memory with innermost extent 1";
        }
      }
    }
  }
  EXPECT_GT(checked, 0) << "no pool kernel compiled";
}

// Fixed windows without padding are compiled without bounds tests: a window that reaches past
// the input's end (ceil_mode on an odd extent) takes the general kernel; padded ones keep theirs.
TEST(TypedKernelChoice, OverhangingWindowsLeaveUnpaddedKernels) {
  if (!pool_kernel_built(DType::f32, DType::i64)) GTEST_SKIP() << "no f32 pooling with i64 indices";
  const std::vector<KernelInfo> kernels = compiled_kernels();
  struct Case {
    int nd;
    Ints shape;
    int64_t kernel, padding;
    bool ceil_mode, fixed;  // fixed: the window's own kernel serves it
  };
  const Case cases[] = {
      {2, {1, 3, 8, 8}, 2, 0, true, true},   // ceil_mode without an overhang
      {2, {1, 3, 8, 7}, 2, 0, false, true},  // floor drops the last column
      {2, {1, 3, 8, 7}, 2, 0, true, false},
      {2, {1, 3, 7, 8}, 2, 0, true, false},
      {1, {1, 3, 9}, 2, 0, true, false},
      {3, {1, 3, 4, 5, 4}, 2, 0, true, false},
      {2, {1, 3, 8, 7}, 3, 1, true, true},  // padded: its kernel tests bounds
  };
  for (const Case& c : cases) {
    PoolOptions o;
    o.kernel_size = {c.kernel};
    o.stride = {2};
    o.padding = {c.padding};
    o.ceil_mode = c.ceil_mode;
    const std::string general = "max_pool" + std::to_string(c.nd) + "d_f32_i64";
    const std::string window = "max_pool" + std::to_string(c.nd) + "d_k" +
                               std::to_string(c.kernel) + "s2p" + std::to_string(c.padding) +
                               "_f32_i64";
    const bool window_built = find_kernel(kernels, window) != nullptr;
    std::string name;
    ASSERT_TRUE(max_pool_kernel_name(c.nd, c.shape, o, &name).ok());
    EXPECT_EQ(name, c.fixed && window_built ? window : general)
        << str(c.shape) << " kernel " << c.kernel << " ceil_mode " << c.ceil_mode;
  }
}

// Whether the sides above 14 go over flat planes here: the floor variant (SSE4.1) builds the
// sides up to 14 alone (POOLGEN_FLAT_PLANES_FLOOR_WIDEST and its k3s2p1 twin), and the runtime
// gives the wider ones to CPUs that run the variant above it (AVX2).
bool wide_sides_served() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2");
#else
  return true;
#endif
}

// Small square NCHW planes the build pools over flat planes (POOLGEN_FLAT_PLANES and
// POOLGEN_FLAT_PLANES_I32: 7, 14, 16 and 28 by default)
// run that kernel under PyTorch's rules; other sides, other layouts, the general path,
// overhanging windows and other frameworks' rules keep theirs.
TEST(TypedKernelChoice, SmallSquarePlanesRunOverFlatPlanes) {
  const std::vector<KernelInfo> kernels = compiled_kernels();
  void* const fake = reinterpret_cast<void*>(uintptr_t{0x1000});  // never read
  int checked = 0;
  for (DType index : {DType::i64, DType::i32}) {
    const std::string suffix = std::string("_f32_") + dtype_name(index);
    const KernelInfo* flat = find_kernel(kernels, "max_pool2d_k2s2p0_flat" + suffix);
    if (flat == nullptr) continue;
    EXPECT_EQ(flat->op, "pool_flat");
    EXPECT_EQ(flat->nd, 2);
    EXPECT_EQ(flat->layout, Layout::contiguous);
    const std::string fixed = "max_pool2d_k2s2p0" + suffix;
    const bool wide = wide_sides_served();
    struct Case {
      Ints shape;
      bool flat;
    };
    // Whole runs of outputs: of 7, whole steps of lcm(9, 16) outputs (16 planes: 1x64, 2x8,
    // 48 unbatched; not 2x3 nor 1x8); of even sides (both index types' default lists),
    // lcm(side / 2, 16): 1x16 and 1x64 planes of 14, 1x4 of 28, any count of 16 (64 outputs a
    // plane); not 1x3x14x14 nor 1x2x28x28.
    const Case cases[] = {{{1, 64, 7, 7}, true},     {{2, 8, 7, 7}, true},
                          {{48, 7, 7}, true},        {{2, 3, 7, 7}, false},
                          {{1, 8, 7, 7}, false},     {{1, 64, 7, 8}, false},
                          {{1, 64, 6, 6}, false},    {{1, 64, 14, 14}, true},
                          {{1, 16, 14, 14}, true},   {{1, 3, 14, 14}, false},
                          {{1, 4, 28, 28}, wide},    {{2, 32, 28, 28}, wide},
                          {{1, 2, 28, 28}, false},   {{1, 16, 14, 15}, false},
                          {{1, 64, 16, 16}, wide},   {{1, 3, 16, 16}, wide}};
    for (const Case& c : cases) {
      PoolOptions o;
      o.kernel_size = {2};
      std::string name;
      ASSERT_TRUE(max_pool_kernel_name(2, contiguous(fake, DType::f32, c.shape), index, o, &name).ok());
      EXPECT_EQ(name, c.flat ? flat->name : fixed) << str(c.shape);
      ++checked;
    }
    const Ints shape{1, 64, 7, 7};
    PoolOptions o;
    o.kernel_size = {2};
    std::string name;
    ASSERT_TRUE(max_pool_kernel_name(2, channels_last(fake, DType::f32, shape), index, o, &name).ok());
    EXPECT_EQ(name, "max_pool2d_k2s2p0_cl" + suffix);
    o.path = Path::general;
    ASSERT_TRUE(max_pool_kernel_name(2, contiguous(fake, DType::f32, shape), index, o, &name).ok());
    EXPECT_EQ(name, "max_pool2d" + suffix);
    o = PoolOptions();
    o.kernel_size = {2};
    o.index_format = IndexFormat::window;  // a pass over the kernel's results
    ASSERT_TRUE(max_pool_kernel_name(2, contiguous(fake, DType::f32, shape), index, o, &name).ok());
    EXPECT_EQ(name, fixed);
    o = PoolOptions();
    o.kernel_size = {2};
    o.ceil_mode = true;  // 7 pools to 4 windows, the last overhanging: the general kernel
    ASSERT_TRUE(max_pool_kernel_name(2, contiguous(fake, DType::f32, {1, 64, 7, 7}), index, o, &name).ok());
    EXPECT_EQ(name, "max_pool2d" + suffix);
  }
  if (checked == 0) GTEST_SKIP() << "no kernel over flat planes in this build";
}

// k3s2p1 likewise (POOLGEN_FLAT_PLANES_K3S2P1: 7 to 112 with i64 indices by default), for
// whole runs of lcm(out_side, 16) outputs and two planes at least on an odd side; ceil_mode
// keeps it on an odd side alone (an even one's ceil_mode adds an output row and column).
TEST(TypedKernelChoice, SmallSquarePlanesRunOverFlatPlanesK3s2p1) {
  const std::vector<KernelInfo> kernels = compiled_kernels();
  void* const fake = reinterpret_cast<void*>(uintptr_t{0x1000});  // never read
  int checked = 0;
  for (DType index : {DType::i64, DType::i32}) {
    const std::string suffix = std::string("_f32_") + dtype_name(index);
    const KernelInfo* flat = find_kernel(kernels, "max_pool2d_k3s2p1_flat" + suffix);
    if (flat == nullptr) continue;
    EXPECT_EQ(flat->op, "pool_flat");
    const std::string fixed = "max_pool2d_k3s2p1" + suffix;
    const bool wide = wide_sides_served();
    struct Case {
      Ints shape;
      bool ceil_mode, flat;
    };
    const Case cases[] = {{{1, 64, 7, 7}, false, true},    {{2, 1, 7, 7}, false, true},
                          {{1, 1, 7, 7}, false, false},    {{1, 64, 7, 7}, true, true},
                          {{1, 64, 14, 14}, false, true},  {{1, 16, 14, 14}, false, true},
                          {{1, 8, 14, 14}, false, false},  {{1, 64, 14, 14}, true, false},
                          {{1, 4, 28, 28}, false, wide},   {{1, 2, 28, 28}, false, false},
                          {{1, 64, 28, 29}, false, false}, {{1, 64, 6, 6}, false, false},
                          {{1, 64, 56, 56}, false, wide},  {{1, 4, 112, 112}, false, wide},
                          {{1, 1, 112, 112}, false, wide}, {{1, 64, 16, 16}, false, wide},
                          {{1, 1, 16, 16}, false, wide},   {{1, 64, 16, 16}, true, false},
                          {{1, 1, 32, 32}, false, wide},   {{2, 64, 32, 32}, false, wide},
                          {{1, 64, 22, 22}, false, false}};
    set_streaming_bytes(int64_t{1} << 30);  // every call above in cache, whatever this CPU's
    for (const Case& c : cases) {
      PoolOptions o;
      o.kernel_size = {3};
      o.stride = {2};
      o.padding = {1};
      o.ceil_mode = c.ceil_mode;
      std::string name;
      ASSERT_TRUE(max_pool_kernel_name(2, contiguous(fake, DType::f32, c.shape), index, o, &name).ok());
      EXPECT_EQ(name, c.flat ? flat->name : fixed) << str(c.shape) << " ceil_mode " << c.ceil_mode;
      ++checked;
    }
    // Out of cache too (with 64 KiB of cache, these calls of 0.4-1.2 MB are out of it): the
    // banded sides, 56 and 112, measured no slower there than the fixed window's kernel.
    set_streaming_bytes(64 << 10);
    PoolOptions o;
    o.kernel_size = {3};
    o.stride = {2};
    o.padding = {1};
    for (const Ints& shape : {Ints{1, 4, 112, 112}, Ints{1, 64, 56, 56}, Ints{1, 64, 28, 28}}) {
      std::string name;
      ASSERT_TRUE(max_pool_kernel_name(2, contiguous(fake, DType::f32, shape), index, o, &name).ok());
      EXPECT_EQ(name, wide ? flat->name : fixed) << str(shape) << " out of cache";
    }
    set_streaming_bytes(-1);
  }
  if (checked == 0) GTEST_SKIP() << "no k3s2p1 kernel over flat planes in this build";
}

// The kernels over flat planes pick each vector's input rows by lane (their unused rows never
// loaded; k3s2p1's stage reads a column past each row but the last): their calls read and write
// nothing outside their buffers, each flush against a PROT_NONE page at either end, and give the
// reference's results on ties and NaNs.
TEST(FlatPlanes, StayInsideTheirBuffers) {
  const std::vector<KernelInfo> kernels = compiled_kernels();
  struct Window {
    const char* name;
    int kernel, stride, padding;
  };
  int flat_calls = 0, built = 0;
  for (const Window& w : {Window{"k2s2p0", 2, 2, 0}, Window{"k3s2p1", 3, 2, 1}}) {
    for (DType index : {DType::i64, DType::i32}) {
      const std::string flat =
          std::string("max_pool2d_") + w.name + "_flat_f32_" + dtype_name(index);
      built += find_kernel(kernels, flat) != nullptr;
      for (const Ints& shape : std::vector<Ints>{{1, 64, 7, 7},
                                                 {2, 24, 7, 7},
                                                 {2, 1, 7, 7},
                                                 {1, 16, 14, 14},
                                                 {2, 32, 14, 14},
                                                 {1, 4, 28, 28},
                                                 {1, 64, 28, 28},
                                                 {1, 3, 16, 16},
                                                 {2, 5, 32, 32},
                                                 {1, 3, 56, 56},
                                                 {1, 2, 112, 112},
                                                 {2, 3, 112, 112}}) {
        for (const auto align :
             {test::GuardedBuffer::catch_overrun, test::GuardedBuffer::catch_underrun}) {
          const auto pooled_side = [&](int64_t side) {
            return (side + 2 * w.padding - w.kernel) / w.stride + 1;
          };
          const Ints pooled{shape[0], shape[1], pooled_side(shape[2]), pooled_side(shape[3])};
          const int64_t n = test::numel(shape), m = test::numel(pooled);
          std::vector<float> input(n);
          for (int64_t i = 0; i < n; ++i) input[i] = static_cast<float>((i * 37) % 11);  // ties
          for (int64_t i = 5; i < n; i += 97) input[i] = NAN;
          for (int64_t i = 50; i < n; i += 89) input[i] = -0.0f;
          PoolOptions o;
          o.kernel_size = {w.kernel};
          o.stride = {w.stride};
          o.padding = {w.padding};
          Ints ref_shape;
          std::vector<float> ref_values;
          std::vector<int64_t> ref_indices;
          ASSERT_TRUE(
              ref::max_pool(2, shape, input, o, &ref_shape, &ref_values, &ref_indices).ok());
          ASSERT_EQ(ref_shape, pooled);

          const size_t index_bytes = index == DType::i32 ? 4 : 8;
          test::GuardedBuffer in(n * sizeof(float), align), values(m * sizeof(float), align),
              indices(m * index_bytes, align);
          std::memcpy(in.data(), input.data(), n * sizeof(float));
          in.protect();
          const TensorView in_view = contiguous(in.data(), DType::f32, shape);
          std::string name;
          ASSERT_TRUE(max_pool_kernel_name(2, in_view, index, o, &name).ok());
          flat_calls += name == flat;
          ASSERT_TRUE(max_pool(2, in_view, contiguous(values.data(), DType::f32, pooled),
                               contiguous(indices.data(), index, pooled), o)
                          .ok())
              << str(shape) << " " << w.name;
          EXPECT_TRUE(values.check() && indices.check()) << str(shape) << " " << w.name;
          for (int64_t i = 0; i < m; ++i) {
            float v;
            std::memcpy(&v, values.data() + i * sizeof(float), sizeof(float));
            const int64_t at = index == DType::i32
                                   ? reinterpret_cast<const int32_t*>(indices.data())[i]
                                   : reinterpret_cast<const int64_t*>(indices.data())[i];
            ASSERT_TRUE(std::memcmp(&v, &ref_values[i], sizeof v) == 0 ||
                        (std::isnan(v) && std::isnan(ref_values[i])))
                << str(shape) << " " << name << " element " << i;
            ASSERT_EQ(at, ref_indices[i]) << str(shape) << " " << name << " element " << i;
          }
        }
      }
    }
  }
  if (built == 0) GTEST_SKIP() << "no kernel over flat planes in this build";
  EXPECT_GT(flat_calls, 0);
}

TEST(TypedKernelChoice, UnpoolNamesFollowWidthLayoutAndIndexDType) {
  const std::vector<KernelInfo> kernels = compiled_kernels();
  void* const fake = reinterpret_cast<void*>(uintptr_t{0x1000});
  int checked = 0;
  for (DType value : test::kAllDTypes) {
    if (!any_pool_kernel(value)) continue;
    for (DType index : {DType::i64, DType::i32}) {
      if (!unpool_kernel_built(value, index)) continue;
      const std::string bits = "_b" + std::to_string(8 * dtype_size(value)) + "_";
      for (int nd = 1; nd <= 3; ++nd) {
        Ints shape{2, 6};
        for (int i = 0; i < nd; ++i) shape.push_back(4 + i);
        for (bool cl : {false, true}) {
          const TensorView v =
              cl ? channels_last(fake, value, shape) : contiguous(fake, value, shape);
          for (Path path : {Path::automatic, Path::general}) {
            UnpoolOptions o;
            o.kernel_size = {2};
            o.path = path;
            std::string name;
            Status st = max_unpool_kernel_name(nd, v, index, o, &name);
            ASSERT_TRUE(st.ok()) << st.message();
            SCOPED_TRACE(std::string(dtype_name(value)) + " " + dtype_name(index) + " nd " +
                         std::to_string(nd) + (cl ? " channels-last" : " contiguous") + " path " +
                         path_name(path));
            if (path == Path::automatic && name.rfind("max_unpool_scatter", 0) != 0) {
              // A gather kernel: its layout and types follow the call too.
              const KernelInfo* k = find_kernel(kernels, name);
              ASSERT_NE(k, nullptr) << name << " is not in compiled_kernels()";
              EXPECT_EQ(k->op, "unpool_gather");
              EXPECT_EQ(k->layout, cl ? Layout::channels_last : Layout::contiguous) << name;
              EXPECT_EQ(dtype_size(k->value_dtype), dtype_size(value)) << name;
              EXPECT_EQ(k->index_dtype, index) << name;
              continue;
            }
            const std::string expect =
                std::string("max_unpool_scatter") + (cl ? "_cl" : "") + bits + dtype_name(index);
            EXPECT_EQ(name, expect);
            if (value == DType::f16 || value == DType::bf16 || value == DType::i16) {
              EXPECT_TRUE(contains(name, "_b16_")) << name;
            }
            const KernelInfo* k = find_kernel(kernels, name);
            ASSERT_NE(k, nullptr) << name << " is not in compiled_kernels()";
            EXPECT_EQ(k->op, "unpool_scatter");
            EXPECT_EQ(k->layout, cl ? Layout::channels_last : Layout::contiguous);
            EXPECT_EQ(dtype_size(k->value_dtype), dtype_size(value));
            EXPECT_EQ(k->index_dtype, index);
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0) << "no unpool kernel compiled";
}

// Unpooling by the indices alone (no kernel_size, as aten::max_unpool2d calls it) tries the fixed
// window its extents imply (kernel = stride = output / input extent): it names the kernel the same
// call with that window names, and the general scatter where an extent does not divide.
TEST(TypedKernelChoice, UnpoolByIndicesTriesTheImpliedWindow) {
  void* const fake = reinterpret_cast<void*>(uintptr_t{0x1000});
  int checked = 0;
  for (int nd = 1; nd <= 3; ++nd) {
    Ints shape{2, 6}, doubled{2, 6}, odd{2, 6};
    for (int i = 0; i < nd; ++i) {
      shape.push_back(4 + i);
      doubled.push_back(2 * (4 + i));
      odd.push_back(2 * (4 + i) + 1);
    }
    for (bool cl : {false, true}) {
      const TensorView v = cl ? channels_last(fake, DType::f32, shape)
                              : contiguous(fake, DType::f32, shape);
      SCOPED_TRACE("nd " + std::to_string(nd) + (cl ? " channels-last" : " contiguous"));
      UnpoolOptions windowed, alone, general;
      windowed.kernel_size = {2};
      alone.kernel_size = {};
      alone.output_size = doubled;
      general.kernel_size = {2};
      general.path = Path::general;
      std::string with_window, by_indices, scatter;
      ASSERT_TRUE(max_unpool_kernel_name(nd, v, DType::i64, windowed, &with_window).ok());
      ASSERT_TRUE(max_unpool_kernel_name(nd, v, DType::i64, general, &scatter).ok());
      const Status st = max_unpool_kernel_name(nd, v, DType::i64, alone, &by_indices);
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_EQ(by_indices, with_window);
      alone.output_size = odd;  // 2x+1: no window of kernel = stride implies it
      ASSERT_TRUE(max_unpool_kernel_name(nd, v, DType::i64, alone, &by_indices).ok());
      EXPECT_EQ(by_indices, scatter);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6);
}

// The contiguous k2s2p0 gathers (unpooling, pooling's gradient) are built for windows that tile
// their output (its extents are constraints), so an output one longer in every dimension is the
// scatter's from the plan on: a bounds query fills in a constrained extent, and the gather used
// to be named, launched and declined on every call.
TEST(TypedKernelChoice, TiledGathersOnlyWhereTheWindowsTile) {
  const std::vector<KernelInfo> kernels = compiled_kernels();
  void* const fake = reinterpret_cast<void*>(uintptr_t{0x1000});  // never read
  set_streaming_bytes(0);  // as if out of cache: the contiguous gathers pay for any size
  int checked = 0;
  for (int nd = 1; nd <= 3; ++nd) {
    const std::string rank = std::to_string(nd) + "d_";
    const std::string unpool = "max_unpool" + rank + "k2s2p0_b32_i64";
    const std::string gradient = "max_pool" + rank + "backward_k2s2p0_f32_i64";
    Ints cells{2, 8}, tiled, longer;  // rows of 32 cells: whole vectors on every target
    for (int i = 0; i < nd; ++i) cells.push_back(i == nd - 1 ? 32 : 4);
    for (int i = 0; i < nd; ++i) {
      tiled.push_back(2 * cells[2 + i]);
      longer.push_back(2 * cells[2 + i] + 1);
    }
    const TensorView v = contiguous(fake, DType::f32, cells);
    for (const Ints* out : {&tiled, &longer}) {
      SCOPED_TRACE(std::to_string(nd) + "-D onto " + str(*out));
      std::string name;
      if (find_kernel(kernels, unpool) != nullptr) {
        UnpoolOptions o;
        o.kernel_size = {2};
        o.output_size = *out;
        ASSERT_TRUE(max_unpool_kernel_name(nd, v, DType::i64, o, &name).ok());
        EXPECT_EQ(name, out == &tiled ? unpool : "max_unpool_scatter_b32_i64");
        ++checked;
      }
      if (find_kernel(kernels, gradient) != nullptr) {
        Ints input_shape{2, 8};
        input_shape.insert(input_shape.end(), out->begin(), out->end());
        PoolOptions o;
        o.kernel_size = {2};
        ASSERT_TRUE(max_pool_backward_kernel_name(nd, v, DType::i64, input_shape, o, &name).ok());
        EXPECT_EQ(name, out == &tiled ? gradient : "max_pool_backward_scatter_f32_i64");
        ++checked;
      }
    }
  }
  set_streaming_bytes(-1);
  if (checked == 0) GTEST_SKIP() << "no contiguous k2s2p0 gather in this build";
}

// Contiguous unpooling takes its gather only where the scatter would not stream the output
// (runtime/ops/max_unpool.cpp, scatter_streams): from set_streaming_bytes on, the streamed
// scatter writes each line once. Channels-last calls of that size keep their gather, which the
// scatter never beat there.
TEST(TypedKernelChoice, StreamedOutputsTakeTheScatter) {
  const std::vector<KernelInfo> kernels = compiled_kernels();
  const std::string gather = "max_unpool2d_k2s2p0_b32_i64";
  if (find_kernel(kernels, gather) == nullptr) GTEST_SKIP() << "no NCHW unpooling gather";
  void* const fake = reinterpret_cast<void*>(uintptr_t{0x1000});  // never read
  // 8x64x56x56 cells onto 112x112 planes: a 25.7 MB output, 45 MB in all (past the gather's
  // 4 MiB floor).
  const TensorView v = contiguous(fake, DType::f32, {8, 64, 56, 56});
  UnpoolOptions o;
  o.kernel_size = {2};
  const int64_t output_bytes = int64_t{8} * 64 * 112 * 112 * 4;
  std::string name;
  for (int64_t threshold : {output_bytes + 1, output_bytes}) {
    SCOPED_TRACE("streaming from " + std::to_string(threshold) + " bytes");
    set_streaming_bytes(threshold);
    ASSERT_TRUE(max_unpool_kernel_name(2, v, DType::i64, o, &name).ok());
    EXPECT_EQ(name, threshold > output_bytes ? gather : "max_unpool_scatter_b32_i64");
  }
  const TensorView nhwc = channels_last(fake, DType::f32, {8, 64, 56, 56});
  if (find_kernel(kernels, "max_unpool2d_k2s2p0_cl_b32_i64") != nullptr) {
    ASSERT_TRUE(max_unpool_kernel_name(2, nhwc, DType::i64, o, &name).ok());
    EXPECT_EQ(name, "max_unpool2d_k2s2p0_cl_b32_i64");
  }
  set_streaming_bytes(-1);
}

// Small channels-last calls on one thread take the scatter, whose fixed cost is prepared once,
// where the gather's launch and cells' bounds cost more than it saves (gather_pays): a 7x7
// plane's border, 16 channels; 14x14 planes of 64 channels keep the gather.
TEST(TypedKernelChoice, SmallChannelsLastCallsTakeTheScatter) {
  const std::vector<KernelInfo> kernels = compiled_kernels();
  if (find_kernel(kernels, "max_unpool2d_k2s2p0_cl_b32_i64") == nullptr) {
    GTEST_SKIP() << "no channels-last unpooling gather";
  }
  void* const fake = reinterpret_cast<void*>(uintptr_t{0x1000});  // never read
  UnpoolOptions o;
  o.kernel_size = {2};
  o.output_size = {7, 7};
  std::string name;
  set_num_threads(1);
  ASSERT_TRUE(max_unpool_kernel_name(2, channels_last(fake, DType::f32, {1, 64, 3, 3}),
                                     DType::i64, o, &name).ok());
  EXPECT_EQ(name, "max_unpool_scatter_cl_b32_i64");
  o.output_size = {};
  ASSERT_TRUE(max_unpool_kernel_name(2, channels_last(fake, DType::f32, {1, 16, 7, 7}),
                                     DType::i64, o, &name).ok());
  EXPECT_EQ(name, "max_unpool_scatter_cl_b32_i64");
  ASSERT_TRUE(max_unpool_kernel_name(2, channels_last(fake, DType::f32, {1, 64, 7, 7}),
                                     DType::i64, o, &name).ok());
  EXPECT_EQ(name, "max_unpool2d_k2s2p0_cl_b32_i64");
  set_num_threads(0);
}

// ---------------------------------------------------------------------------------------------
// Duplicate unpool indices: the latest in input order wins for channels-last views and i32
// indices on any thread count, with every call shared across threads (set_min_parallel_bytes(0):
// the shapes are small enough that by default they would run on the calling thread).

template <typename T, typename I>
void duplicates_on_threads(DType index, int* failures) {
  Rng rng(0xd0b1e + static_cast<uint64_t>(test::dtype_of<T>()) * 7 + static_cast<uint64_t>(index));
  for (int nd = 1; nd <= 3; ++nd) {
    const test::DuplicatesCase c = test::duplicates_case(rng, nd, 24);
    ASSERT_TRUE(c.status.ok()) << c.status.message();
    const Ints& shape = c.shape;
    UnpoolOptions o = c.o;
    Ints out_shape = c.out_shape;
    const int64_t n = test::numel(shape);
    std::vector<T> values(n);
    for (int64_t i = 0; i < n; ++i) {  // distinct within every run of duplicates we can tell
      if constexpr (kIsFloat<T>) {
        values[i] = from_double<T>(static_cast<double>(i % 2000 + 1));
      } else {
        values[i] = static_cast<T>(i % 250 + 1);
      }
    }
    const std::vector<int64_t>& indices64 = c.indices;
    const std::vector<I> indices(indices64.begin(), indices64.end());
    std::vector<T> expected;
    ASSERT_TRUE(ref::max_unpool<T>(nd, shape, values, indices64, o, &out_shape, &expected).ok());
    // values and indices channels-last (indices also contiguous), output channels-last and
    // contiguous.
    for (int combo = 0; combo < 3; ++combo) {
      const Kind ik = combo == 1 ? Kind::contiguous : Kind::channels_last;
      const Kind ok = combo == 2 ? Kind::contiguous : Kind::channels_last;
      Buf<T> v(make_layout(rng, nd, shape, Kind::channels_last, false), winning_value<T>());
      v.set(values);
      Buf<I> ix(make_layout(rng, nd, shape, ik, false), static_cast<I>(-1));
      ix.set(indices);
      Buf<T> out(make_layout(rng, nd, out_shape, ok, combo == 2), guard_value<T>());
      for (int threads : {1, 2, 3, 8}) {
        set_num_threads(threads);
        for (Path path : {Path::automatic, Path::general}) {
          o.path = path;
          out.reset(guard_value<T>(), sentinel_value<T>());
          const Status st = max_unpool(nd, v.view(), ix.view(), out.view(), o);
          ASSERT_TRUE(st.ok()) << st.message();
          const std::string diff = mismatches(out_shape, expected, out.get(), same_bits<T>);
          const bool good = diff.empty() && out.outside_is(guard_value<T>());
          if (!good && ++*failures > kMaxReportedFailures) return;
          EXPECT_TRUE(good) << dtype_name(test::dtype_of<T>()) << " indices " << dtype_name(index)
                            << " nd " << nd << " threads " << threads << " path " << path_name(path)
                            << "\n  values " << v.layout.describe() << "\n  indices "
                            << ix.layout.describe() << "\n  output " << out.layout.describe()
                            << "\n  " << diff;
        }
      }
    }
  }
}

TEST(TypedThreads, UnpoolDuplicatesLatestWins) {
  ThreadsReset reset;
  int ran = 0, failures = 0;
  for (DType value : {DType::f32, DType::f16, DType::i16, DType::f64, DType::u8}) {
    for (DType index : {DType::i32, DType::i64}) {
      if (!missing_kernels(value, index, true).empty()) continue;
      ++ran;
      visit_dtypes(value, index, [&](auto v, auto i) {
        duplicates_on_threads<decltype(v), decltype(i)>(index, &failures);
      });
    }
  }
  EXPECT_GT(ran, 0);
}

// The threads of this process (Linux: the entries of /proc/self/task), -1 where unreadable.
int process_threads() {
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return -1;
  int count = 0;
  while (const dirent* entry = readdir(dir)) count += entry->d_name[0] != '.';
  closedir(dir);
  return count;
}

// process_threads() once it has held still for 50 ms (at most 5 s). A worker that
// set_num_threads' restart has joined may still be listed for a moment: pthread_join returns when
// the kernel clears its thread id, before the task leaves /proc, and under qemu-user the host
// thread behind it outlives the guest's by longer. Counting it as idle failed CI's aarch64 run.
int settled_process_threads() {
  int count = process_threads(), unchanged = 0;
  for (int poll = 0; poll < 500 && unchanged < 5; ++poll) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const int now = process_threads();
    unchanged = now == count ? unchanged + 1 : 0;
    count = now;
  }
  return count;
}

// Two threads at the default threshold (-1 restores it after ThreadsReset's 0), on a pool that
// set_num_threads has just restarted: it has no worker until a call shares its tasks. idle_ is
// the process's thread count then. Skips without f32/i64 kernels or /proc/self/task.
class PoolWorkers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!missing_kernels(DType::f32, DType::i64, true).empty()) {
      GTEST_SKIP() << "no f32/i64 kernels";
    }
    if (process_threads() < 0) GTEST_SKIP() << "/proc/self/task is unreadable";
    set_min_parallel_bytes(-1);
    set_num_threads(2);
    idle_ = settled_process_threads();
  }

  // f32 values of `shape` in a fixed pattern with ties (37 i mod 101).
  static std::vector<float> patterned_input(const Ints& shape) {
    std::vector<float> input(test::numel(shape));
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>((i * 37) % 101);
    return input;
  }

  ThreadsReset reset_;
  int idle_ = 0;
};

// Calls that move less than set_min_parallel_bytes run on the calling thread: the runtime
// starts no worker for them. With the threshold at 0 the same call shares its tasks, and the
// workers start.
TEST_F(PoolWorkers, SmallCallsStayOnTheCallingThread) {
  // 1x8x32x32 f32 moves 56 KiB in pooling and unpooling alike: 8 planes, 8 tasks or more.
  const Ints shape{1, 8, 32, 32}, pooled{1, 8, 16, 16};
  std::vector<float> input = patterned_input(shape);
  std::vector<float> values(test::numel(pooled)), output(input.size());
  std::vector<int64_t> indices(values.size());
  PoolOptions po;
  po.kernel_size = {2};
  UnpoolOptions uo;
  uo.kernel_size = {2};
  auto round_trip = [&] {
    Status st = max_pool(2, contiguous(input.data(), shape), contiguous(values.data(), pooled),
                         contiguous(indices.data(), pooled), po);
    if (st.ok()) {
      st = max_unpool(2, contiguous(values.data(), pooled), contiguous(indices.data(), pooled),
                      contiguous(output.data(), shape), uo);
    }
    return st;
  };
  for (int rep = 0; rep < 3; ++rep) ASSERT_TRUE(round_trip().ok());
  EXPECT_EQ(settled_process_threads(), idle_)
      << "a call below the threshold started the pool's workers";
  poolgen_set_min_parallel_bytes(0);  // the C API's setter, the same process-wide threshold
  ASSERT_TRUE(round_trip().ok());
  EXPECT_GT(settled_process_threads(), idle_) << "a shared call started no worker";
}

// A host's parallel loop (set_parallel_for, through the C API) runs every shared call's tasks
// in place of the workers, which never start: the same results as the workers give, each task
// once, the threads the call asked for as its hint; an invalid index found by a task comes back
// as the call's error; a null loop gives the calls back to the workers.
struct CountingHost {
  std::atomic<int> calls{0}, tasks{0}, least_threads{1 << 30};
  // Runs the tasks on two threads of its own: the even ones here, the odd ones on another.
  static void run(int32_t count, int32_t threads, void (*task)(int32_t, void*), void* task_context,
                  void* context) {
    auto* host = static_cast<CountingHost*>(context);
    host->calls.fetch_add(1);
    host->tasks.fetch_add(count);
    for (int seen = host->least_threads; threads < seen;) {
      if (host->least_threads.compare_exchange_weak(seen, threads)) break;
    }
    std::thread other([&] {
      for (int32_t t = 1; t < count; t += 2) task(t, task_context);
    });
    for (int32_t t = 0; t < count; t += 2) task(t, task_context);
    other.join();
  }
};

TEST_F(PoolWorkers, HostParallelForRunsSharedCalls) {
  const Ints shape{2, 8, 64, 64}, pooled{2, 8, 32, 32};
  const std::vector<float> input = patterned_input(shape);
  PoolOptions po;
  po.kernel_size = {2};
  UnpoolOptions uo;
  uo.kernel_size = {2};
  struct Outputs {
    std::vector<float> values, unpooled;
    std::vector<int64_t> indices;
  };
  // Pools and unpools back (the last index moved past the plane when `stray`).
  auto round_trip = [&](bool stray, Outputs* out, Status* unpooled) {
    out->values.assign(test::numel(pooled), 0.0f);
    out->indices.assign(out->values.size(), 0);
    out->unpooled.assign(input.size(), 0.0f);
    ASSERT_TRUE(max_pool(2, contiguous(input.data(), shape), contiguous(out->values.data(), pooled),
                         contiguous(out->indices.data(), pooled), po)
                    .ok());
    if (stray) out->indices.back() = 64 * 64;
    *unpooled = max_unpool(2, contiguous(out->values.data(), pooled),
                           contiguous(out->indices.data(), pooled),
                           contiguous(out->unpooled.data(), shape), uo);
  };
  poolgen_set_min_parallel_bytes(0);
  Outputs by_host, by_workers;
  Status host_status, worker_status;
  CountingHost host;
  poolgen_set_parallel_for(CountingHost::run, &host);
  round_trip(false, &by_host, &host_status);
  ASSERT_TRUE(host_status.ok()) << host_status.message();
  EXPECT_GT(host.calls.load(), 0) << "no shared call reached the host";
  EXPECT_GE(host.tasks.load(), 2 * host.calls.load());
  EXPECT_EQ(host.least_threads.load(), 2) << "the threads hint: set_num_threads(2)";
  EXPECT_EQ(settled_process_threads(), idle_) << "a worker started beside the host's loop";
  Outputs stray_out;
  round_trip(true, &stray_out, &host_status);
  EXPECT_EQ(host_status.code(), Code::index_out_of_range) << host_status.message();
  poolgen_set_parallel_for(nullptr, nullptr);
  const int host_calls = host.calls.load();
  round_trip(false, &by_workers, &worker_status);
  ASSERT_TRUE(worker_status.ok()) << worker_status.message();
  EXPECT_EQ(host.calls.load(), host_calls) << "a call reached the host after it was removed";
  EXPECT_EQ(by_host.values, by_workers.values);
  EXPECT_EQ(by_host.indices, by_workers.indices);
  EXPECT_EQ(by_host.unpooled, by_workers.unpooled);
  round_trip(true, &stray_out, &worker_status);
  EXPECT_EQ(worker_status.code(), Code::index_out_of_range);
}

// One channels-last image scattered on two threads (unpooled, or pooling's gradient) is shared
// between them by its values rows, each thread writing its own slabs of output rows: straight
// into the output, or through a scratch and non-temporal stores when the output streams
// (docs/kernels.md, "Threads" and "Streaming outputs"). An index outside its window (valid,
// inside the plane) sends the image back to one task, whole, with the same result. Windows
// wider than their stride (k3s2) cannot go by slabs: unpooling then splits the image's channels
// between threads from 2 MiB up to 16 MiB, and pooling's gradient keeps
// it whole.
TEST_F(PoolWorkers, LargeChannelsLastImageIsSharedBetweenThreads) {
  UnpoolOptions uo;
  uo.stride = {2};
  uo.path = Path::general;  // the scatter's policy (the k2s2p0 gather writes once and splits rows)
  PoolOptions po;
  po.stride = {2};
  po.path = Path::general;  // likewise: the scatter, not the gradient's window gather
  // Unpools 1x64xWxW (W = 2h + kernel - 2) through stride-2 windows from each window's top-left
  // cell, the last value's index moved to (0, 1) of its channel's plane when `stray`, then takes
  // pooling's gradient from the same values and indices (every index distinct: the same
  // output); the outputs are checked.
  auto unpool_image = [&](int64_t h, bool stray, int64_t kernel = 2) {
    uo.kernel_size = {kernel};
    po.kernel_size = {kernel};
    const int64_t c = 64, w = 2 * h + kernel - 2;
    const Ints pooled{1, c, h, h}, shape{1, c, w, w};
    std::vector<float> values(test::numel(pooled)), output(test::numel(shape), -1.0f);
    std::vector<int64_t> indices(values.size());
    for (size_t i = 0; i < values.size(); ++i) {  // memory order: rows, columns, channels
      const int64_t y = static_cast<int64_t>(i) / c / h, x = static_cast<int64_t>(i) / c % h;
      values[i] = static_cast<float>(i % 1000) + 1.0f;
      indices[i] = 2 * y * w + 2 * x;
    }
    if (stray) indices.back() = 1;
    const TensorView in = channels_last(values.data(), pooled),
                     at = channels_last(indices.data(), pooled),
                     out = channels_last(output.data(), shape);
    for (const bool gradient : {false, true}) {
      std::fill(output.begin(), output.end(), -1.0f);
      ASSERT_TRUE(
          (gradient ? max_pool_backward(2, in, at, out, po) : max_unpool(2, in, at, out, uo)).ok());
      for (size_t i = 0; i < output.size(); ++i) {
        const int64_t pixel = static_cast<int64_t>(i) / c, y = pixel / w, x = pixel % w;
        float expected = 0.0f;
        size_t from = values.size();  // none: a slot past the last window's top-left cells
        if (y % 2 == 0 && x % 2 == 0 && y / 2 < h && x / 2 < h) {
          from = static_cast<size_t>(((y / 2) * h + x / 2) * c) + i % c;
          expected = values[from];
        }
        if (stray && i % c == static_cast<size_t>(c - 1)) {
          if (pixel == 1) expected = values.back();
          if (from == values.size() - 1) expected = 0.0f;
        }
        ASSERT_EQ(output[i], expected)
            << (gradient ? "pooling's gradient" : "unpooling") << ", output element " << i
            << (stray ? " (stray index)" : "");
      }
    }
  };
  // Streaming off, then every output streamed (slabs of one values row).
  for (const int64_t threshold : {std::numeric_limits<int64_t>::max(), int64_t{0}}) {
    set_streaming_bytes(threshold);
    unpool_image(128, false);  // 16 + 4 + 8 MiB
    EXPECT_GT(settled_process_threads(), idle_) << "an image of 28 MiB was not shared";
    unpool_image(128, true);
    unpool_image(16, false);  // 256 KiB of output: one task, whole, unless every output streams
    unpool_image(17, true);
    unpool_image(64, false, 3);  // 4.1 + 1 + 2 MiB: unpooling by two channel blocks
    unpool_image(64, true, 3);
  }
  set_streaming_bytes(-1);
}

// At the default threshold a shared call hands each thread several small planes per task (a
// quarter of min_parallel_bytes at least; kernels.cpp, iterations_per_task). 1x63x28x28 NCHW
// shares every op, in tasks of about 6 planes and a shorter last one; each op's result must
// be the reference's, so a task that skipped or repeated planes would show.
TEST_F(PoolWorkers, SmallPlanesShareTasksOfSeveralPlanes) {
  const Ints shape{1, 63, 28, 28}, pooled{1, 63, 14, 14};
  std::vector<float> input = patterned_input(shape);
  PoolOptions po;
  po.kernel_size = {2};
  UnpoolOptions uo;
  uo.kernel_size = {2};
  Ints ref_shape;
  std::vector<float> ref_values, ref_unpooled, ref_grad_input, ref_grad_values;
  std::vector<int64_t> ref_indices;
  ASSERT_TRUE(ref::max_pool(2, shape, input, po, &ref_shape, &ref_values, &ref_indices).ok());
  ASSERT_TRUE(
      ref::max_unpool(2, pooled, ref_values, ref_indices, uo, &ref_shape, &ref_unpooled).ok());
  ASSERT_TRUE(ref::max_pool_backward(2, shape, ref_values, ref_indices, po, &ref_grad_input).ok());
  ASSERT_TRUE(
      ref::max_unpool_backward(2, pooled, input, ref_indices, uo, &ref_grad_values).ok());

  std::vector<float> values(ref_values.size(), -1.0f), unpooled(input.size(), -1.0f),
      grad_input(input.size(), -1.0f), grad_values(ref_values.size(), -1.0f);
  std::vector<int64_t> indices(ref_values.size(), -1);
  ASSERT_TRUE(max_pool(2, contiguous(input.data(), shape), contiguous(values.data(), pooled),
                       contiguous(indices.data(), pooled), po)
                  .ok());
  ASSERT_TRUE(max_unpool(2, contiguous(values.data(), pooled), contiguous(indices.data(), pooled),
                         contiguous(unpooled.data(), shape), uo)
                  .ok());
  ASSERT_TRUE(max_pool_backward(2, contiguous(values.data(), pooled),
                                contiguous(indices.data(), pooled),
                                contiguous(grad_input.data(), shape), po)
                  .ok());
  ASSERT_TRUE(max_unpool_backward(2, contiguous(input.data(), shape),
                                  contiguous(indices.data(), pooled),
                                  contiguous(grad_values.data(), pooled), uo)
                  .ok());
  EXPECT_EQ(values, ref_values);
  EXPECT_EQ(indices, ref_indices);
  EXPECT_EQ(unpooled, ref_unpooled);
  EXPECT_EQ(grad_input, ref_grad_input);
  EXPECT_EQ(grad_values, ref_grad_values);
  EXPECT_GT(settled_process_threads(), idle_) << "no call was shared";
}

// A repeated unpooling or gradient call small enough for one kernel call on one thread keeps
// that run (runtime/execute/scatter.hpp, DirectScatter); a repeat must still follow the settings of its
// own time (shared when min_parallel_bytes drops to 0, streamed when streaming_bytes does) and
// its own data (an invalid index named, one outside the plane dropped from the gradient).
TEST_F(PoolWorkers, RepeatedScatterCallsFollowTheirSettingsAndData) {
  const Ints shape{1, 8, 32, 32}, pooled{1, 8, 16, 16};  // 56 KiB a call
  const int64_t plane = 32 * 32, pooled_plane = 16 * 16;
  const std::vector<float> input = patterned_input(shape);
  PoolOptions po;
  po.kernel_size = {2};
  UnpoolOptions uo;
  uo.kernel_size = {2};
  Ints ref_shape;
  std::vector<float> values, ref_unpooled, ref_grad_input;
  std::vector<int64_t> indices;
  ASSERT_TRUE(ref::max_pool(2, shape, input, po, &ref_shape, &values, &indices).ok());
  ASSERT_TRUE(ref::max_unpool(2, pooled, values, indices, uo, &ref_shape, &ref_unpooled).ok());
  ASSERT_TRUE(ref::max_pool_backward(2, shape, values, indices, po, &ref_grad_input).ok());
  auto run = [&](const std::vector<int64_t>& at, std::vector<float>* unpooled,
                 std::vector<float>* grad_input, Status* unpool_status) {
    unpooled->assign(input.size(), -1.0f);
    grad_input->assign(input.size(), -1.0f);
    *unpool_status = max_unpool(2, contiguous(values.data(), pooled),
                                contiguous(at.data(), pooled), contiguous(unpooled->data(), shape),
                                uo);
    ASSERT_TRUE(max_pool_backward(2, contiguous(values.data(), pooled),
                                  contiguous(at.data(), pooled),
                                  contiguous(grad_input->data(), shape), po)
                    .ok());
  };
  std::vector<float> unpooled, grad_input;
  Status st;
  struct Setting {
    int64_t min_parallel, streaming;
    bool shared;
  };
  for (const Setting& setting : {Setting{-1, -1, false}, Setting{0, -1, true},
                                 Setting{-1, 0, false}, Setting{-1, -1, false}}) {
    set_min_parallel_bytes(setting.min_parallel);
    set_streaming_bytes(setting.streaming);
    run(indices, &unpooled, &grad_input, &st);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(unpooled, ref_unpooled) << "min_parallel " << setting.min_parallel
                                      << ", streaming " << setting.streaming;
    EXPECT_EQ(grad_input, ref_grad_input) << "min_parallel " << setting.min_parallel
                                          << ", streaming " << setting.streaming;
    if (setting.shared) {
      EXPECT_GT(settled_process_threads(), idle_) << "a repeat at min_parallel 0 was not shared";
    }
  }
  set_min_parallel_bytes(-1);
  set_streaming_bytes(-1);
  // Element 300 (plane 1) names a slot past its plane: unpooling names it, the gradient drops
  // it (its slot, which only it named in these disjoint windows, stays 0).
  std::vector<int64_t> broken = indices;
  const int64_t position = 300, slot = position / pooled_plane * plane + indices[position];
  broken[position] = plane;
  std::vector<float> expected_grad = ref_grad_input;
  expected_grad[static_cast<size_t>(slot)] = 0.0f;
  run(broken, &unpooled, &grad_input, &st);
  EXPECT_EQ(st.code(), Code::index_out_of_range);
  EXPECT_NE(st.message().find("got 1024 at element 300"), std::string::npos) << st.message();
  EXPECT_EQ(grad_input, expected_grad);
  run(indices, &unpooled, &grad_input, &st);  // and the next repeat is whole again
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(unpooled, ref_unpooled);
  EXPECT_EQ(grad_input, ref_grad_input);
}

// A process forked after the pool started has none of its workers (fork copies the calling thread
// only): its calls run on its calling thread, with the same results, and set_num_threads does not
// wait for the missing workers. Unguarded, the child waited for them forever.
TEST_F(PoolWorkers, ForkedChildRunsCallsOnItsCallingThread) {
  const Ints shape{2, 16, 64, 64}, pooled{2, 16, 32, 32};
  std::vector<float> input = patterned_input(shape);
  PoolOptions po;
  po.kernel_size = {2};
  std::vector<float> values(test::numel(pooled));
  std::vector<int64_t> indices(values.size());
  auto pool = [&] {
    return max_pool(2, contiguous(input.data(), shape), contiguous(values.data(), pooled),
                    contiguous(indices.data(), pooled), po);
  };
  set_min_parallel_bytes(0);
  ASSERT_TRUE(pool().ok());
  ASSERT_GT(settled_process_threads(), idle_) << "the pool did not start";
  const std::vector<float> want_values = values;
  const std::vector<int64_t> want_indices = indices;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // exits 1 for a wrong result, 2 for a thread started
    const int threads = process_threads();  // 1, or qemu-user's own threads too
    std::fill(values.begin(), values.end(), -1.0f);
    set_num_threads(3);
    const bool ok = pool().ok() && values == want_values && indices == want_indices;
    _exit(!ok ? 1 : process_threads() != threads ? 2 : 0);
  }
  int status = 0;
  pid_t done = 0;
  for (int poll = 0; poll < 600 && done == 0; ++poll) {  // at most a minute
    done = waitpid(child, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (done == 0) kill(child, SIGKILL);
  ASSERT_EQ(done, child) << "the forked child hung";
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_NE(WEXITSTATUS(status), 1) << "the child's result differed";
  EXPECT_NE(WEXITSTATUS(status), 2) << "the child started threads";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace poolgen
