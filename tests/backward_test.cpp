// Typed tests of the backward ops, max_pool_backward and max_unpool_backward: every gradient
// dtype (f32 f64 f16 bf16), both index dtypes (i64, i32) and three layouts of grad_output, the
// leading view that picks the kernels' layout (contiguous, channels-last, any other strided view:
// permuted memory order, innermost stride 2), ranks 1-3, against the reference
// (tests/reference.cpp), bit for bit (any NaN equals any NaN where gradients are added; the
// unpooling's gather moves bits, so its results must be bit-identical). The indices and the
// output are often in another layout than grad_output (packed copies). Every buffer sits in a
// bigger backing with guard elements (tests/typed_views.hpp): nothing outside an output view may
// change, inputs must be unchanged, and input bytes outside a view hold what would show if read
// (NaN gradients, indices that name a slot or are invalid).
//
// Pooling's gradients are added in ascending output order in their own dtype (random_gradients:
// sums that depend on that order, and f16/bf16 round after each addition) at indices from a real
// pooling, some moved out of their windows (the window gathers must fall back to the scatter)
// or out of the plane (dropped). Unpooling's: duplicate indices, and invalid ones, which must be
// named as the reference names them.
//
// Also: contiguous vs channels-last identical bytes on bigger shapes, kernel choice by layout,
// dtype, index dtype and path, identical bytes on 1, 2, 3 and 8 threads, and dtypes other than
// the gradient types refused.
//
// Seeds are fixed; each parameterized test draws its own sequence.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "c_tensors.hpp"
#include "built_kernels.hpp"
#include "dtypes.hpp"
#include "poolgen/poolgen.h"
#include "poolgen/poolgen.hpp"
#include "random_cases.hpp"
#include "reference.hpp"
#include "test_util.hpp"
#include "typed_views.hpp"
#include "values.hpp"

namespace poolgen {
namespace {

using test::backward_windows_built;
using test::describe;
using test::kGradientDTypes;
using test::path_name;
using test::plane_size;
using test::pool_backward_kernel_built;
using test::random_unpool_mode;
using test::Rng;
using test::str;
using test::unpool_backward_kernel_built;

// The framework (layouts, Buf, random values, parameters, seeds): tests/typed_views.hpp.
using namespace test::typed;
// Element values: tests/values.hpp.
using namespace test::values;

constexpr int kPoolBackwardConfigs = 96;    // per gradient dtype x index dtype x layout x rank
constexpr int kUnpoolBackwardConfigs = 96;  // likewise

// Calls f(T{}, I{}) for a gradient dtype and an index dtype (i64 or i32).
template <typename F>
void visit_gradient_dtypes(DType value, DType index, F&& f) {
  const bool gradient = test::visit_gradient_dtype(value, [&](auto v) {
    if (index == DType::i64) {
      f(v, int64_t{});
    } else {
      f(v, int32_t{});
    }
  });
  if (!gradient) ADD_FAILURE() << dtype_name(value) << " is not a gradient dtype";
}

// Empty when the build has the op's kernels for these dtypes (unpool: the unpooling's backward,
// else the pooling's); otherwise why the test is skipped.
std::string missing_backward(DType value, DType index, bool unpool) {
  if (!pool_backward_kernel_built(value, DType::i64) &&
      !pool_backward_kernel_built(value, DType::i32)) {
    return std::string("gradient dtype ") + dtype_name(value) +
           " is not compiled in this build (POOLGEN_VALUE_TYPES)";
  }
  if (!pool_backward_kernel_built(value, index)) {
    return std::string("index dtype ") + dtype_name(index) +
           " is not compiled in this build (POOLGEN_INDEX_TYPES)";
  }
  if (unpool && !unpool_backward_kernel_built(value, index)) {
    return std::string("no max_unpool_backward kernel of ") +
           std::to_string(8 * dtype_size(value)) + "-bit elements with " + dtype_name(index) +
           " indices in this build";
  }
  return "";
}

// Calls f(T{}, I{}) for the parameter's dtypes; skips the test when the build lacks the kernels.
template <typename F>
void run_param(const Param& p, bool unpool, F&& f) {
  const std::string missing = missing_backward(p.value, p.index, unpool);
  if (!missing.empty()) GTEST_SKIP() << missing;
  visit_gradient_dtypes(p.value, p.index, f);
}

std::vector<Param> gradient_params() { return all_params(kGradientDTypes); }

// The kernel max_pool_backward names for a call on `path`, "" where it names none.
std::string pool_backward_kernel(int nd, const TensorView& grad_output, DType index,
                                 const Ints& input_shape, PoolOptions o, Path path) {
  o.path = path;
  std::string name;
  return max_pool_backward_kernel_name(nd, grad_output, index, input_shape, o, &name).ok() ? name
                                                                                           : "";
}

// ---------------------------------------------------------------------------------------------
// Pooling's backward.

// streaming: as unpool_configs' (typed_test.cpp).
template <typename T, typename I>
void pool_backward_configs(const Param& p, bool streaming) {
  const int nd = p.nd;
  Rng rng(seed_of(p.value, p.index, p.kind, nd, 3));
  int failures = 0, gather_named = 0, dropped = 0;
  test::PoolConfigOptions kinds = pool_config_kinds();
  // The gathers take only channels (channels-last) or rows (contiguous) of whole vectors: more
  // such draws.
  if (p.kind == Kind::channels_last) kinds.many_channels_percent = 70;
  if (p.kind == Kind::contiguous) kinds.long_rows_percent = 45;
  for (int iter = 0; iter < kPoolBackwardConfigs && failures < kMaxReportedFailures; ++iter) {
    const int mode = static_cast<int>(rng.uniform(0, 9)) / 4;  // mostly real indices
    const test::PoolBackwardCase<T> c = test::random_pool_backward_case<T>(
        rng, nd, mode, 0.45, kinds, random_values<T>, from_double<T>);
    std::vector<T> expected;
    const Status rs =
        ref::max_pool_backward<T>(nd, c.input_shape, c.grad_output, c.indices, c.o, &expected);
    ASSERT_TRUE(rs.ok()) << rs.message();
    const std::vector<I> indices(c.indices.begin(), c.indices.end());
    const int64_t plane = plane_size(nd, c.input_shape);
    for (int64_t i : c.indices) dropped += i < 0 || i >= plane;

    Buf<T> g(make_layout(rng, nd, c.output_shape, p.kind, rng.chance(0.5)), winning_value<T>());
    g.set(c.grad_output);
    const Kind ik = rng.chance(0.6) ? p.kind : random_kind(rng);
    const Kind ok = rng.chance(0.6) ? p.kind : random_kind(rng);
    // Index 0 outside the view: read, it would add a gradient at a valid position (-1 would be
    // dropped unseen).
    Buf<I> ix(make_layout(rng, nd, c.output_shape, ik, rng.chance(0.5)), I{0});
    ix.set(indices);
    Buf<T> out(make_layout(rng, nd, c.input_shape, ok, rng.chance(0.5)), guard_value<T>());
    const std::vector<T> g_before = g.data;
    const std::vector<I> ix_before = ix.data;
    const std::string general =
        pool_backward_kernel(nd, g.view(), p.index, c.input_shape, c.o, Path::general);
    const std::string automatic =
        pool_backward_kernel(nd, g.view(), p.index, c.input_shape, c.o, Path::automatic);
    EXPECT_TRUE(!general.empty() && !automatic.empty()) << "config " << iter << " names no kernel";
    if (automatic != general) ++gather_named;  // tried first, whatever the indices
    for (Path path : {Path::automatic, Path::general}) {
      PoolOptions o = c.o;
      o.path = path;
      out.reset(guard_value<T>(), sentinel_value<T>());
      const Status st = max_pool_backward(nd, g.view(), ix.view(), out.view(), o);
      const std::string diff =
          st.ok() ? mismatches(c.input_shape, expected, out.get(), same_value<T>) : "";
      const bool outside = out.outside_is(guard_value<T>());
      const bool inputs_same = g.bytes_equal(g_before) && ix.bytes_equal(ix_before);
      if (!st.ok() || !diff.empty() || !outside || !inputs_same) {
        ++failures;
        ADD_FAILURE() << "config " << iter << " (mode " << mode << "): max_pool" << nd
                      << "d_backward gradients " << dtype_name(p.value) << " indices "
                      << dtype_name(p.index) << " path " << path_name(path) << " kernel "
                      << (path == Path::automatic ? automatic : general) << "\n  "
                      << describe(c.input_shape, c.o) << "\n  grad_output " << g.layout.describe()
                      << "\n  indices     " << ix.layout.describe() << "\n  grad_input  "
                      << out.layout.describe() << "\n  indices (logical order) " << head(c.indices)
                      << "\n  status: " << (st.ok() ? "ok" : st.message())
                      << "\n  grad_input: " << (diff.empty() ? "same (or not compared)" : diff)
                      << "\n  bytes outside grad_input view untouched: " << outside
                      << ", inputs unchanged: " << inputs_same;
        break;
      }
    }
  }
  EXPECT_GT(dropped, 0) << "no index outside the input plane was generated";
  // Where this build has window gathers for these dtypes, the draws out of cache (where every
  // one is tried) must reach them: one in 16 a window, in 3-D one in 48 (a strided grad_output
  // may name one, but runs the scatter: it is not counted on). In cache these small draws take
  // the scatter (the contiguous gathers from 4 MiB, the channels-last ones above a few channels
  // and windows: gather_pays).
  const Layout layout = p.kind == Kind::channels_last ? Layout::channels_last : Layout::contiguous;
  const int windows = backward_windows_built(p.value, p.index, nd, layout);  // k2s2p0, k3s2p1
  const int per_window = nd == 3 ? 48 : 16;
  if (windows > 0 && p.kind != Kind::strided && streaming) {
    EXPECT_GE(gather_named, kPoolBackwardConfigs / per_window * windows)
        << "too few configurations reached a window gather";
  }
}

class BackwardPool : public ::testing::TestWithParam<Param> {};

TEST_P(BackwardPool, MatchesReference) {
  const Param p = GetParam();
  run_param(p, false,
            [&](auto v, auto i) { pool_backward_configs<decltype(v), decltype(i)>(p, false); });
}

// The same calls with grad_input streamed (TypedUnpool.MatchesReferenceStreaming's reason).
TEST_P(BackwardPool, MatchesReferenceStreaming) {
  const Param p = GetParam();
  const test::StreamingEveryOutput streaming;
  run_param(p, false,
            [&](auto v, auto i) { pool_backward_configs<decltype(v), decltype(i)>(p, true); });
}

INSTANTIATE_TEST_SUITE_P(, BackwardPool, ::testing::ValuesIn(gradient_params()), param_name);

// ---------------------------------------------------------------------------------------------
// Unpooling's backward.

// "got <index> at element <position> (": how the library names the first invalid index, found in
// `indices` (logical order) for planes of `plane` elements; "" when every index is valid.
std::string first_invalid(const std::vector<int64_t>& indices, int64_t plane) {
  for (size_t k = 0; k < indices.size(); ++k) {
    if (indices[k] < 0 || indices[k] >= plane) {
      return "got " + std::to_string(indices[k]) + " at element " + std::to_string(k) + " (";
    }
  }
  return "";
}

template <typename T, typename I>
void unpool_backward_configs(const Param& p) {
  const int nd = p.nd;
  Rng rng(seed_of(p.value, p.index, p.kind, nd, 4));
  int failures = 0, errors = 0;
  for (int iter = 0; iter < kUnpoolBackwardConfigs && failures < kMaxReportedFailures; ++iter) {
    const int mode = random_unpool_mode(rng, {40, 70, 88});
    const test::UnpoolCase<T> c =
        test::random_unpool_case<T, I>(rng, nd, mode, unpool_case_kinds(), random_values<T>);
    Ints out_shape;
    ASSERT_TRUE(ref::max_unpool_output_shape(nd, c.shape, c.o, &out_shape).ok());
    const std::vector<T> grad_output =
        test::random_gradients<T>(rng, test::numel(out_shape), from_double<T>);
    std::vector<T> expected;
    const Status rs =
        ref::max_unpool_backward<T>(nd, c.shape, grad_output, c.indices, c.o, &expected);
    const std::string named = first_invalid(c.indices, plane_size(nd, out_shape));
    if (!rs.ok()) {
      ASSERT_EQ(rs.code(), Code::index_out_of_range) << rs.message();
      ASSERT_FALSE(named.empty()) << rs.message();
      // The element the reference names ("element <k> (in input order)").
      const std::string at = named.substr(named.find("element"));
      ASSERT_NE(rs.message().find(at), std::string::npos) << rs.message() << " / " << named;
      ++errors;
    }
    const std::vector<I> indices(c.indices.begin(), c.indices.end());

    Buf<T> g(make_layout(rng, nd, out_shape, p.kind, rng.chance(0.5)), winning_value<T>());
    g.set(grad_output);
    const Kind ik = rng.chance(0.6) ? p.kind : random_kind(rng);
    const Kind vk = rng.chance(0.6) ? p.kind : random_kind(rng);
    Buf<I> ix(make_layout(rng, nd, c.shape, ik, rng.chance(0.5)), static_cast<I>(-1));
    ix.set(indices);
    Buf<T> out(make_layout(rng, nd, c.shape, vk, rng.chance(0.5)), guard_value<T>());
    const std::vector<T> g_before = g.data;
    const std::vector<I> ix_before = ix.data;
    // One kernel serves both paths; general must be accepted and give the same.
    for (Path path : {Path::automatic, Path::general}) {
      UnpoolOptions o = c.o;
      o.path = path;
      out.reset(guard_value<T>(), sentinel_value<T>());
      const Status st = max_unpool_backward(nd, g.view(), ix.view(), out.view(), o);
      bool good = st.code() == rs.code();
      std::string diff;
      if (good && rs.ok()) {
        diff = mismatches(c.shape, expected, out.get(), same_bits<T>);
        good = diff.empty();
      }
      if (good && !rs.ok()) good = st.message().find(named) != std::string::npos;
      const bool outside = out.outside_is(guard_value<T>());
      const bool inputs_same = g.bytes_equal(g_before) && ix.bytes_equal(ix_before);
      if (!good || !outside || !inputs_same) {
        ++failures;
        std::string kernel;
        max_unpool_backward_kernel_name(nd, g.view(), p.index, c.shape, o, &kernel);
        ADD_FAILURE() << "config " << iter << " (mode " << mode << "): max_unpool" << nd
                      << "d_backward gradients " << dtype_name(p.value) << " indices "
                      << dtype_name(p.index) << " path " << path_name(path) << " kernel "
                      << kernel << "\n  " << describe(c.shape, c.o) << "\n  grad_output "
                      << g.layout.describe() << "\n  indices     " << ix.layout.describe()
                      << "\n  grad_values " << out.layout.describe()
                      << "\n  indices (logical order) " << head(c.indices)
                      << "\n  status: " << (st.ok() ? "ok" : st.message())
                      << "\n  expected status: " << (rs.ok() ? "ok" : rs.message())
                      << "\n  grad_values: " << (diff.empty() ? "same (or not compared)" : diff)
                      << "\n  bytes outside grad_values view untouched: " << outside
                      << ", inputs unchanged: " << inputs_same;
        break;
      }
    }
  }
  EXPECT_GT(errors, 0) << "no invalid-index configuration was generated";
}

class BackwardUnpool : public ::testing::TestWithParam<Param> {};

TEST_P(BackwardUnpool, MatchesReference) {
  const Param p = GetParam();
  run_param(p, true, [&](auto v, auto i) { unpool_backward_configs<decltype(v), decltype(i)>(p); });
}

INSTANTIATE_TEST_SUITE_P(, BackwardUnpool, ::testing::ValuesIn(gradient_params()), param_name);

// Calls larger than the random ones, over several of the kernels' tasks (the channels-last
// kernel's chunks of indices too). An invalid index anywhere (the first element, inside a
// task, near a plane's end, the last element), with a second one after it, is named as the
// reference names it; valid indices give the reference's bits.
template <typename I>
void large_unpool_backward(int nd, const Ints& values_shape, const UnpoolOptions& u) {
  SCOPED_TRACE("max_unpool_backward " + std::string(dtype_name(test::dtype_of<I>())) + " " +
               str(values_shape));
  Rng rng(0x1a29e + nd);
  Ints shape;
  ASSERT_TRUE(ref::max_unpool_output_shape(nd, values_shape, u, &shape).ok());
  const int64_t plane = plane_size(nd, shape), n = test::numel(values_shape);
  ASSERT_GT(n, int64_t{1} << 18);
  const std::vector<float> grad_output =
      test::random_gradients<float>(rng, test::numel(shape), from_double<float>);
  std::vector<int64_t> valid(n);
  for (int64_t& i : valid) i = rng.uniform(0, plane - 1);
  const int64_t values_plane = plane_size(nd, values_shape);
  for (const int64_t at : {int64_t{-1}, int64_t{0}, n / 2 + 7, values_plane - 3, n - 1}) {
    std::vector<int64_t> indices = valid;
    if (at >= 0) {
      indices[at] = at % 2 ? plane : -1;
      if (at + 5 < n) indices[at + 5] = plane + 1;
    }
    std::vector<float> expected;
    const Status rs = ref::max_unpool_backward<float>(nd, values_shape, grad_output, indices, u,
                                                      &expected);
    ASSERT_EQ(rs.ok(), at < 0) << rs.message();
    const std::vector<I> typed(indices.begin(), indices.end());
    std::vector<float> out(n, sentinel_value<float>());
    const Status st = max_unpool_backward(nd, contiguous(grad_output.data(), shape),
                                          contiguous(typed.data(), values_shape),
                                          contiguous(out.data(), values_shape), u);
    if (at < 0) {
      ASSERT_TRUE(st.ok()) << st.message();
      const std::string diff = mismatches(values_shape, expected, out, same_bits<float>);
      EXPECT_TRUE(diff.empty()) << diff;
      continue;
    }
    ASSERT_EQ(st.code(), Code::index_out_of_range) << "invalid index at " << at;
    const std::string named = first_invalid(indices, plane);
    ASSERT_NE(named.find("element " + std::to_string(at) + " ("), std::string::npos) << named;
    EXPECT_NE(rs.message().find(named.substr(named.find("element"))), std::string::npos)
        << rs.message();
    EXPECT_NE(st.message().find(named), std::string::npos) << st.message();
  }
}

TEST(BackwardUnpoolLarge, VectorGatherChecksEveryChunk) {
  UnpoolOptions k2;
  k2.kernel_size = {2};
  UnpoolOptions k3s2p1;
  k3s2p1.kernel_size = {3};
  k3s2p1.stride = {2};
  k3s2p1.padding = {1};
  k3s2p1.output_size = {112, 112};
  int ran = 0;
  for (DType index : {DType::i64, DType::i32}) {
    if (!unpool_backward_kernel_built(DType::f32, index)) continue;
    ++ran;
    visit_gradient_dtypes(DType::f32, index, [&](auto, auto i) {
      using I = decltype(i);
      large_unpool_backward<I>(1, {2, 3, 50000}, k2);       // planes: 48 chunks and 848
      large_unpool_backward<I>(2, {1, 96, 56, 56}, k3s2p1);  // planes: 3 chunks and 64
    });
  }
  if (ran == 0) GTEST_SKIP() << "no f32 unpooling gradient in this build";
}

// ---------------------------------------------------------------------------------------------
// Layout equivalence on bigger shapes: every view contiguous, or every view channels-last
// (through the view makers), give identical bytes; the contiguous results match the reference.

// Pooling's backward of `grad_output` at `indices` (logical order) both ways, on both paths.
template <typename T, typename I>
void pool_backward_both_layouts(int nd, const Ints& shape, const Ints& out_shape,
                                const std::vector<T>& grad_output,
                                const std::vector<int64_t>& indices64, const PoolOptions& window) {
  std::vector<T> expected;
  ASSERT_TRUE(
      ref::max_pool_backward<T>(nd, shape, grad_output, indices64, window, &expected).ok());
  const std::vector<I> indices(indices64.begin(), indices64.end());
  const std::vector<T> l_grad = to_channels_last(grad_output, out_shape, nd);
  const std::vector<I> l_indices = to_channels_last(indices, out_shape, nd);
  for (Path path : {Path::automatic, Path::general}) {
    PoolOptions o = window;
    o.path = path;
    SCOPED_TRACE("max_pool_backward path " + std::string(path_name(path)) + " kernel " +
                 pool_backward_kernel(nd, contiguous(grad_output.data(), out_shape),
                                      test::dtype_of<I>(), shape, o, path));
    std::vector<T> c_out(expected.size(), sentinel_value<T>());
    Status st = max_pool_backward(nd, contiguous(grad_output.data(), out_shape),
                                  contiguous(indices.data(), out_shape),
                                  contiguous(c_out.data(), shape), o);
    ASSERT_TRUE(st.ok()) << st.message();
    std::vector<T> l_out(expected.size(), sentinel_value<T>());
    st = max_pool_backward(nd, channels_last(l_grad.data(), out_shape, nd),
                           channels_last(l_indices.data(), out_shape, nd),
                           channels_last(l_out.data(), shape, nd), o);
    ASSERT_TRUE(st.ok()) << st.message();
    std::string diff = mismatches(shape, expected, c_out, same_value<T>);
    EXPECT_TRUE(diff.empty()) << "contiguous grad_input vs reference: " << diff;
    // Identical bytes but for NaNs: where two NaNs meet (inf + -inf makes one), the contiguous
    // scatter keeps the added gradient's sign and payload, the channels-last one (and the
    // reference, PyTorch's `slot += g` on x86) the accumulated one.
    diff = mismatches(shape, c_out, from_channels_last(l_out, shape, nd), same_value<T>);
    EXPECT_TRUE(diff.empty()) << "channels-last grad_input vs contiguous (bytes): " << diff;
  }
}

// Unpooling's backward, both ways: grad_output of `shape` (the unpooled one), `indices64` of
// `values_shape`.
template <typename T, typename I>
void unpool_backward_both_layouts(int nd, const Ints& values_shape, const Ints& shape,
                                  const std::vector<T>& grad_output,
                                  const std::vector<int64_t>& indices64, const UnpoolOptions& u) {
  std::vector<T> expected;
  ASSERT_TRUE(
      ref::max_unpool_backward<T>(nd, values_shape, grad_output, indices64, u, &expected).ok());
  const std::vector<I> indices(indices64.begin(), indices64.end());
  std::vector<T> c_out(expected.size(), sentinel_value<T>());
  Status st = max_unpool_backward(nd, contiguous(grad_output.data(), shape),
                                  contiguous(indices.data(), values_shape),
                                  contiguous(c_out.data(), values_shape), u);
  ASSERT_TRUE(st.ok()) << st.message();
  const std::vector<T> l_grad = to_channels_last(grad_output, shape, nd);
  const std::vector<I> l_indices = to_channels_last(indices, values_shape, nd);
  std::vector<T> l_out(expected.size(), sentinel_value<T>());
  st = max_unpool_backward(nd, channels_last(l_grad.data(), shape, nd),
                           channels_last(l_indices.data(), values_shape, nd),
                           channels_last(l_out.data(), values_shape, nd), u);
  ASSERT_TRUE(st.ok()) << st.message();
  std::string diff = mismatches(values_shape, expected, c_out, same_bits<T>);
  EXPECT_TRUE(diff.empty()) << "contiguous grad_values vs reference: " << diff;
  diff = mismatches(values_shape, c_out, from_channels_last(l_out, values_shape, nd), same_bits<T>);
  EXPECT_TRUE(diff.empty()) << "channels-last grad_values vs contiguous (bytes): " << diff;
}

template <typename T, typename I>
void backward_layout_equivalence(Rng& rng) {
  // The last two are batch-less: channels_last() is told nd.
  const std::pair<int, Ints> shapes[] = {{1, {3, 20, 101}},
                                         {2, {2, 24, 17, 19}},
                                         {3, {2, 16, 5, 9, 11}},
                                         {2, {24, 17, 19}},
                                         {1, {20, 101}}};
  for (const auto& [nd, shape] : shapes) {
    const std::vector<T> input = random_values<T>(rng, test::numel(shape));
    const int64_t plane = plane_size(nd, shape);
    for (const PoolOptions& window : equivalence_windows()) {
      SCOPED_TRACE(std::string(dtype_name(test::dtype_of<T>())) + " indices " +
                   dtype_name(test::dtype_of<I>()) + " " + describe(shape, window));
      Ints out_shape;
      std::vector<T> pooled;
      std::vector<int64_t> indices;
      ASSERT_TRUE(ref::max_pool<T>(nd, shape, input, window, &out_shape, &pooled, &indices).ok());
      const int64_t n_out = test::numel(out_shape);
      const std::vector<T> grad_output = test::random_gradients<T>(rng, n_out, from_double<T>);
      // As pooled (the window gathers where built), then with some indices moved out of their
      // windows or out of the plane (the scatter).
      pool_backward_both_layouts<T, I>(nd, shape, out_shape, grad_output, indices, window);
      std::vector<int64_t> moved = indices;
      for (int k = 0; k < 12 && n_out > 0; ++k) {
        moved[rng.uniform(0, n_out - 1)] = k % 4 == 3 ? plane + k : rng.uniform(0, plane - 1);
      }
      pool_backward_both_layouts<T, I>(nd, shape, out_shape, grad_output, moved, window);

      // Unpooling's backward (no dilation) onto the pooling input's extents, with duplicates.
      if (window.dilation != Ints{1}) continue;
      UnpoolOptions u;
      u.kernel_size = window.kernel_size;
      u.stride = window.stride;
      u.padding = window.padding;
      u.output_size = Ints(shape.end() - nd, shape.end());
      Ints unpooled;
      ASSERT_TRUE(ref::max_unpool_output_shape(nd, out_shape, u, &unpooled).ok());
      ASSERT_EQ(unpooled, shape);
      std::vector<int64_t> duplicated = indices;
      for (int k = 0; k < 20 && n_out > 0; ++k) {
        duplicated[rng.uniform(0, n_out - 1)] = duplicated[rng.uniform(0, n_out - 1)];
      }
      const std::vector<T> grad_unpooled =
          test::random_gradients<T>(rng, test::numel(shape), from_double<T>);
      SCOPED_TRACE("max_unpool_backward");
      unpool_backward_both_layouts<T, I>(nd, out_shape, shape, grad_unpooled, duplicated, u);
    }
  }
}

// One gradient dtype (printed by name in test listings).
struct GradientDType {
  DType value;
};

void PrintTo(const GradientDType& p, std::ostream* os) { *os << dtype_name(p.value); }

std::vector<GradientDType> gradient_dtypes() {
  std::vector<GradientDType> v;
  for (DType d : kGradientDTypes) v.push_back({d});
  return v;
}

class BackwardLayoutEquivalence : public ::testing::TestWithParam<GradientDType> {};

TEST_P(BackwardLayoutEquivalence, ContiguousEqualsChannelsLast) {
  const DType value = GetParam().value;
  Rng rng(0xbe9e + static_cast<uint64_t>(value));
  int ran = 0;
  for (DType index : {DType::i64, DType::i32}) {
    const std::string missing = missing_backward(value, index, true);
    if (!missing.empty()) {
      std::cout << "[ NOTE     ] " << missing << "\n";
      continue;
    }
    ++ran;
    visit_gradient_dtypes(value, index, [&](auto v, auto i) {
      backward_layout_equivalence<decltype(v), decltype(i)>(rng);
    });
  }
  if (ran == 0) GTEST_SKIP() << missing_backward(value, DType::i64, true);
}

INSTANTIATE_TEST_SUITE_P(, BackwardLayoutEquivalence, ::testing::ValuesIn(gradient_dtypes()),
                         [](const ::testing::TestParamInfo<GradientDType>& info) {
                           return std::string(dtype_name(info.param.value));
                         });

// ---------------------------------------------------------------------------------------------
// Kernel choice: grad_output's layout, the dtypes and the path decide the kernel's name (data is
// never read); every named kernel is listed by compiled_kernels() with what it serves.

// The pooled shape of `input_shape`.
Ints pooled_shape(int nd, const Ints& input_shape, const PoolOptions& o) {
  Ints out;
  EXPECT_TRUE(max_pool_output_shape(nd, input_shape, o, &out).ok()) << str(input_shape);
  return out;
}

// Whether the build has the pooling's backward (unpool: the unpooling's) for any dtypes.
bool any_backward_built(bool unpool) {
  for (DType value : kGradientDTypes) {
    for (DType index : {DType::i64, DType::i32}) {
      if (missing_backward(value, index, unpool).empty()) return true;
    }
  }
  return false;
}

TEST(BackwardKernelChoice, PoolNamesFollowLayoutDTypesAndPath) {
  if (!any_backward_built(false)) GTEST_SKIP() << "no gradient dtype in this build";
  const std::vector<KernelInfo> kernels = compiled_kernels();
  // Whether the build has AVX-512 variants (x86's default), which the k3s2p1 channels-last
  // gather comes with by default (POOLGEN_AVX512_ONLY_FAMILIES).
  const bool avx512_built = std::any_of(kernels.begin(), kernels.end(), [](const KernelInfo& k) {
    return k.targets.front().find("avx512") != std::string::npos;
  });
  void* const fake = reinterpret_cast<void*>(uintptr_t{0x1000});  // never read
  int checked = 0, gathers = 0;
  for (DType value : kGradientDTypes) {
    for (DType index : {DType::i64, DType::i32}) {
      if (!pool_backward_kernel_built(value, index)) continue;
      // POOLGEN_BACKWARD_WINDOW_TYPES builds every family; the default build f32's k2s2p0 ones
      // below (cmake/PoolgenKernels.cmake), which no 1-D channels-last one comes with.
      const bool windows_built =
          backward_windows_built(value, index, 1, Layout::channels_last) > 0;
      const std::string suffix = std::string("_") + dtype_name(value) + "_" + dtype_name(index);
      for (int nd = 1; nd <= 3; ++nd) {
        // Channels and rows wide enough for any target's vectors: a gather whose vectors need
        // more than a call has is not named (it would decline).
        Ints shape{2, 40};
        for (int i = 0; i < nd; ++i) shape.push_back(i == nd - 1 ? 64 : 8 + 2 * i);
        // Windows: none built (k3s1p0), k2s2p0, k3s2p1, and k2s2p0 over an odd extent in
        // ceil_mode, which overhangs the input: unpadded windows are compiled without bounds
        // tests, so the scatter serves it.
        std::vector<PoolOptions> windows(4);
        windows[0].kernel_size = {3};
        windows[0].stride = {1};
        windows[1].kernel_size = {2};
        windows[2].kernel_size = {3};
        windows[2].stride = {2};
        windows[2].padding = {1};
        windows[3].kernel_size = {2};
        windows[3].ceil_mode = true;
        const char* window_tag[] = {"", "_k2s2p0", "_k3s2p1", "_k2s2p0"};
        for (int w = 0; w < 4; ++w) {
          Ints in_shape = shape;
          if (w == 3) in_shape.back() += 1;
          const Ints out_shape = pooled_shape(nd, in_shape, windows[w]);
          const std::string family =
              "max_pool" + std::to_string(nd) + "d_backward" + window_tag[w];
          SCOPED_TRACE(family + suffix + " input " + str(in_shape));
          // The 3-D k3s2p1 gathers did not earn their code (cmake/PoolgenKernels.cmake).
          const bool skipped = nd == 3 && w == 2;
          for (const bool cl : {false, true}) {
            const std::string window_kernel = family + (cl ? "_cl" : "") + suffix;
            const bool has_window = w > 0 && find_kernel(kernels, window_kernel) != nullptr;
            // f32's channels-last k2s2p0 gathers (2-D, 3-D) and its contiguous 1-D and 2-D ones
            // are built by default, and with AVX-512 its 2-D channels-last k3s2p1 one for i64.
            const bool by_default =
                value == DType::f32 &&
                ((w == 1 && (cl ? nd >= 2 : nd <= 2)) ||
                 (w == 2 && cl && nd == 2 && avx512_built && index == DType::i64));
            if (w == 1 || w == 2) {
              EXPECT_EQ(has_window, (windows_built && !skipped) || by_default)
                  << window_kernel << (has_window ? " is" : " is not") << " compiled";
            }
            if (has_window) {
              const KernelInfo* k = find_kernel(kernels, window_kernel);
              EXPECT_EQ(k->op, "pool_backward_gather");
              EXPECT_EQ(k->nd, nd);
              EXPECT_EQ(k->layout, cl ? Layout::channels_last : Layout::contiguous);
              EXPECT_EQ(k->value_dtype, value);
              EXPECT_EQ(k->index_dtype, index);
              EXPECT_FALSE(k->targets.empty());
            }
            const std::string scatter =
                std::string("max_pool_backward_scatter") + (cl ? "_cl" : "") + suffix;
            const KernelInfo* k = find_kernel(kernels, scatter);
            ASSERT_NE(k, nullptr) << scatter << " is not in compiled_kernels()";
            EXPECT_EQ(k->op, "pool_backward_scatter");
            EXPECT_EQ(k->nd, 0);  // any rank
            EXPECT_EQ(k->layout, cl ? Layout::channels_last : Layout::contiguous);
            EXPECT_EQ(k->value_dtype, value);
            EXPECT_EQ(k->index_dtype, index);
            EXPECT_FALSE(k->targets.empty());
            // A transposed grad_output is packed contiguous first.
            std::vector<TensorView> views;
            if (cl) {
              views.push_back(channels_last(fake, value, out_shape));
            } else {
              views.push_back(contiguous(fake, value, out_shape));
              views.push_back(transposed_view(fake, value, out_shape, nd));
            }
            for (const TensorView& v : views) {
              for (Path path : {Path::automatic, Path::general}) {
                // These small calls out of cache (streaming_bytes 0) and in it: there only the
                // channels-last gathers of windows that do not overlap pay (below 1 MiB;
                // runtime/dispatch/kernel_table.hpp, gather_pays).
                for (const bool out_of_cache : {true, false}) {
                  set_streaming_bytes(out_of_cache ? 0 : -1);
                  PoolOptions o = windows[w];
                  o.path = path;
                  std::string name;
                  const Status st =
                      max_pool_backward_kernel_name(nd, v, index, in_shape, o, &name);
                  ASSERT_TRUE(st.ok()) << st.message();
                  // The transposed view goes through a packed copy: the scatter's.
                  const bool gather = path == Path::automatic && has_window && w != 3 &&
                                      (out_of_cache || (cl && w == 1)) && &v == &views[0];
                  EXPECT_EQ(name, gather ? window_kernel : scatter)
                      << "grad_output strides " << str(v.strides) << ", path " << path_name(path)
                      << (out_of_cache ? ", out of cache" : ", in cache");
                  gathers += gather;
                  ++checked;
                }
                set_streaming_bytes(-1);
              }
            }
          }
        }
        // Channels-last memory with C = 1, or a channels-last view whose innermost extent is 1:
        // contiguous kernels (the rule looks at the innermost spatial stride first).
        PoolOptions o;
        o.kernel_size = {1};
        for (const size_t dim : {size_t{1}, shape.size() - 1}) {
          Ints one = shape;
          one[dim] = 1;
          std::string name;
          ASSERT_TRUE(max_pool_backward_kernel_name(nd, channels_last(fake, value, one), index,
                                                    one, o, &name)
                          .ok());
          EXPECT_EQ(name, "max_pool_backward_scatter" + suffix) << "channels-last " << str(one);
        }
      }
    }
  }
  EXPECT_GT(checked, 0) << "no pool backward kernel compiled";
  std::cout << "[ NOTE     ] " << gathers << " of " << checked << " names were window gathers\n";
}

TEST(BackwardKernelChoice, UnpoolNamesFollowWidthLayoutAndIndexDType) {
  if (!any_backward_built(true)) GTEST_SKIP() << "no gradient dtype in this build";
  const std::vector<KernelInfo> kernels = compiled_kernels();
  void* const fake = reinterpret_cast<void*>(uintptr_t{0x1000});  // never read
  int checked = 0;
  for (DType value : kGradientDTypes) {
    for (DType index : {DType::i64, DType::i32}) {
      if (!unpool_backward_kernel_built(value, index)) continue;
      const std::string bits = "_b" + std::to_string(8 * dtype_size(value)) + "_";
      for (int nd = 1; nd <= 3; ++nd) {
        Ints values_shape{2, 6};
        for (int i = 0; i < nd; ++i) values_shape.push_back(4 + i);
        UnpoolOptions o;
        o.kernel_size = {2};
        Ints shape;
        ASSERT_TRUE(max_unpool_output_shape(nd, values_shape, o, &shape).ok());
        for (const bool cl : {false, true}) {
          const std::string expect =
              std::string("max_unpool_backward") + (cl ? "_cl" : "") + bits + dtype_name(index);
          const KernelInfo* k = find_kernel(kernels, expect);
          ASSERT_NE(k, nullptr) << expect << " is not in compiled_kernels()";
          EXPECT_EQ(k->op, "unpool_backward");
          EXPECT_EQ(k->layout, cl ? Layout::channels_last : Layout::contiguous);
          EXPECT_EQ(dtype_size(k->value_dtype), dtype_size(value));  // moves bits of a width
          EXPECT_EQ(k->index_dtype, index);
          EXPECT_FALSE(k->targets.empty());
          std::vector<TensorView> views;
          if (cl) {
            views.push_back(channels_last(fake, value, shape));
          } else {
            views.push_back(contiguous(fake, value, shape));
            views.push_back(transposed_view(fake, value, shape, nd));
          }
          for (const TensorView& v : views) {
            for (Path path : {Path::automatic, Path::general}) {
              o.path = path;
              std::string name;
              const Status st =
                  max_unpool_backward_kernel_name(nd, v, index, values_shape, o, &name);
              ASSERT_TRUE(st.ok()) << st.message();
              // The automatic path may take the 2-D window's kernel in front, where it is built
              // and its vectors fit the views (channels-last: the channels, by the variant).
              const std::string window = "max_unpool2d_backward_k2s2p0" +
                                         std::string(cl ? "_cl" : "") + bits + dtype_name(index);
              const bool by_window = path == Path::automatic && nd == 2 && name == window &&
                                     find_kernel(kernels, window) != nullptr;
              EXPECT_TRUE(name == expect || by_window)
                  << name << " for " << expect << ": " << dtype_name(value) << " "
                  << dtype_name(index) << " nd " << nd << " grad_output strides "
                  << str(v.strides) << " path " << path_name(path);
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0) << "no unpool backward kernel compiled";
}

// The window's kernel takes only a grad_output its windows tile (a constraint of its buffers):
// PyTorch's unpooling onto a 7x7 plane from a 3x3 one is the gather by index's from the plan
// on, where the kernel would otherwise be launched and decline on every call. A 6x6 plane,
// with whole vectors of channels, is the window kernel's where the build has it.
TEST(BackwardKernelChoice, UnpoolWindowKernelOnlyWhereTheWindowsTile) {
  const std::vector<KernelInfo> kernels = compiled_kernels();
  const std::string window = "max_unpool2d_backward_k2s2p0_cl_b32_i64";
  if (find_kernel(kernels, window) == nullptr) GTEST_SKIP() << window << " is not built";
  void* const fake = reinterpret_cast<void*>(uintptr_t{0x1000});  // never read
  const Ints values_shape{1, 64, 3, 3};
  UnpoolOptions o;
  o.kernel_size = {2};
  set_streaming_bytes(0);  // as if out of cache: the window's kernel pays for any size
  for (const int64_t side : {6, 7}) {
    o.output_size = {side, side};
    std::string name;
    const Status st = max_unpool_backward_kernel_name(
        2, channels_last(fake, DType::f32, {1, 64, side, side}), DType::i64, values_shape, o,
        &name);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(name, side == 6 ? window : "max_unpool_backward_cl_b32_i64") << side << "x" << side;
  }
  set_streaming_bytes(-1);
}

// PyTorch's gradient of channels-last indices is contiguous: the window's kernel (channels-last)
// writes it through a packed copy rather than leaving the call to the gather by index, and a cell
// whose index leaves its window still sends the call there, with the same result.
TEST(BackwardUnpoolWindow, WritesAGradientOfTheOtherLayout) {
  const std::vector<KernelInfo> kernels = compiled_kernels();
  const std::string window = "max_unpool2d_backward_k2s2p0_cl_b32_i64";
  if (find_kernel(kernels, window) == nullptr) GTEST_SKIP() << window << " is not built";
  Rng rng(0x5e9);
  const Ints shape{2, 64, 6, 8}, values_shape{2, 64, 3, 4};
  PoolOptions pool;
  pool.kernel_size = {2};
  Ints pooled_shape;
  std::vector<float> pooled;
  std::vector<int64_t> indices;
  ASSERT_TRUE(ref::max_pool<float>(2, shape, random_values<float>(rng, test::numel(shape)), pool,
                                   &pooled_shape, &pooled, &indices)
                  .ok());
  ASSERT_EQ(pooled_shape, values_shape);
  const std::vector<float> grad = random_values<float>(rng, test::numel(shape));
  UnpoolOptions o;
  o.kernel_size = {2};
  set_streaming_bytes(0);  // as if out of cache: the window's kernel pays for any size
  for (const bool leaves_window : {false, true}) {
    SCOPED_TRACE(leaves_window ? "an index outside its window" : "indices in their windows");
    if (leaves_window) indices[5] = (indices[5] + 4) % 48;  // two columns on: another window
    std::vector<float> expected;
    ASSERT_TRUE(ref::max_unpool_backward<float>(2, values_shape, grad, indices, o, &expected).ok());
    const std::vector<float> g = to_channels_last(grad, shape, 2);
    const std::vector<int64_t> ix = to_channels_last(indices, values_shape, 2);
    std::vector<float> got(expected.size(), -1.0f);
    const Status st =
        max_unpool_backward(2, channels_last(g.data(), shape), channels_last(ix.data(), values_shape),
                            contiguous(got.data(), values_shape), o);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(got, expected);
  }
  set_streaming_bytes(-1);
}

// ---------------------------------------------------------------------------------------------
// Thread-count independence: identical bytes on 1, 2, 3 and 8 threads, every call shared across
// threads (ThreadsReset), on shapes of 24 planes, one image among them (channels-last images are
// then split by channel blocks); pooling's backward with overlapping windows (order-dependent
// sums) and k2s2p0 (the window gather where built), unpooling's with many duplicates.

// Runs `call(threads, path)` (it returns grad's logical contents) on every thread count and
// path; the first result must match `expected` (any NaN equal), the others its bytes.
template <typename T, typename Call>
void same_on_threads(const Ints& shape, const std::vector<T>& expected, bool both_paths,
                     int* failures, Call call) {
  std::vector<T> first;
  for (int threads : {1, 2, 3, 8}) {
    set_num_threads(threads);
    for (Path path : {Path::automatic, Path::general}) {
      if (path == Path::general && !both_paths) continue;
      SCOPED_TRACE(std::to_string(threads) + " threads, path " + path_name(path));
      const std::vector<T> got = call(path);
      if (::testing::Test::HasFatalFailure()) return;
      const std::string diff = first.empty() ? mismatches(shape, expected, got, same_value<T>)
                                             : mismatches(shape, first, got, same_bits<T>);
      if (!diff.empty() && ++*failures <= kMaxReportedFailures) {
        ADD_FAILURE() << (first.empty() ? "vs reference: " : "vs the first run (bytes): ")
                      << diff;
      }
      if (first.empty()) first = got;
    }
  }
}

template <typename T, typename I>
void backward_on_threads(int* failures) {
  Rng rng(0x7b0e + static_cast<uint64_t>(test::dtype_of<T>()) * 7 + sizeof(I));
  for (int nd = 1; nd <= 3; ++nd) {
    for (const bool cl : {false, true}) {
      auto view = [&](auto* data, const Ints& shape) {
        return cl ? channels_last(data, shape, nd) : contiguous(data, shape);
      };
      auto logical = [&](const auto& memory, const Ints& shape) {
        return cl ? from_channels_last(memory, shape, nd) : memory;
      };
      auto memory = [&](const auto& logical_order, const Ints& shape) {
        return cl ? to_channels_last(logical_order, shape, nd) : logical_order;
      };
      // Pooling's backward.
      const Ints spatial = nd == 1 ? Ints{300} : nd == 2 ? Ints{24, 20} : Ints{8, 9, 10};
      Ints shape{nd == 2 ? 1 : 2, nd == 2 ? 24 : 12};
      shape.insert(shape.end(), spatial.begin(), spatial.end());
      std::vector<PoolOptions> windows(2);
      windows[0].kernel_size = {3};
      windows[0].stride = {1};
      windows[0].padding = {1};
      windows[1].kernel_size = {2};
      for (const PoolOptions& window : windows) {
        SCOPED_TRACE("max_pool_backward " + describe(shape, window) +
                     (cl ? " channels-last" : " contiguous"));
        Ints out_shape;
        std::vector<T> pooled;
        std::vector<int64_t> indices64;
        const std::vector<T> input = random_values<T>(rng, test::numel(shape));
        ASSERT_TRUE(
            ref::max_pool<T>(nd, shape, input, window, &out_shape, &pooled, &indices64).ok());
        const std::vector<T> grad =
            test::random_gradients<T>(rng, test::numel(out_shape), from_double<T>);
        std::vector<T> expected;
        ASSERT_TRUE(
            ref::max_pool_backward<T>(nd, shape, grad, indices64, window, &expected).ok());
        const std::vector<T> g = memory(grad, out_shape);
        const std::vector<I> ix = memory(std::vector<I>(indices64.begin(), indices64.end()),
                                         out_shape);
        same_on_threads<T>(shape, expected, true, failures, [&](Path path) {
          PoolOptions o = window;
          o.path = path;
          std::vector<T> out(expected.size(), sentinel_value<T>());
          const Status st = max_pool_backward(nd, view(g.data(), out_shape),
                                              view(ix.data(), out_shape), view(out.data(), shape),
                                              o);
          EXPECT_TRUE(st.ok()) << st.message();
          return logical(out, shape);
        });
      }
      // Unpooling's backward.
      const test::DuplicatesCase c = test::duplicates_case(rng, nd, 24);
      ASSERT_TRUE(c.status.ok()) << c.status.message();
      SCOPED_TRACE("max_unpool_backward " + describe(c.shape, c.o) +
                   (cl ? " channels-last" : " contiguous"));
      const std::vector<T> grad =
          test::random_gradients<T>(rng, test::numel(c.out_shape), from_double<T>);
      std::vector<T> expected;
      ASSERT_TRUE(ref::max_unpool_backward<T>(nd, c.shape, grad, c.indices, c.o, &expected).ok());
      const std::vector<T> g = memory(grad, c.out_shape);
      const std::vector<I> ix = memory(std::vector<I>(c.indices.begin(), c.indices.end()),
                                       c.shape);
      same_on_threads<T>(c.shape, expected, false, failures, [&](Path) {
        std::vector<T> out(expected.size(), sentinel_value<T>());
        const Status st = max_unpool_backward(nd, view(g.data(), c.out_shape),
                                              view(ix.data(), c.shape), view(out.data(), c.shape),
                                              c.o);
        EXPECT_TRUE(st.ok()) << st.message();
        return logical(out, c.shape);
      });
    }
  }
}

TEST(BackwardThreads, SameBytesOnEveryThreadCount) {
  if (!any_backward_built(true)) GTEST_SKIP() << "no gradient dtype in this build";
  ThreadsReset reset;
  int ran = 0, failures = 0;
  for (DType value : kGradientDTypes) {
    for (DType index : {DType::i64, DType::i32}) {
      if (!missing_backward(value, index, true).empty()) continue;
      ++ran;
      SCOPED_TRACE(std::string(dtype_name(value)) + " indices " + dtype_name(index));
      visit_gradient_dtypes(value, index, [&](auto v, auto i) {
        backward_on_threads<decltype(v), decltype(i)>(&failures);
      });
    }
  }
  EXPECT_GT(ran, 0);
}

// ---------------------------------------------------------------------------------------------
// Gradients are floats: any other dtype of grad_output is invalid_argument naming grad_output,
// in both APIs and the kernel-name queries, before anything is written.

void expect_refused(const Status& st, DType dtype, const char* call) {
  EXPECT_EQ(st.code(), Code::invalid_argument) << call << ": " << st.message();
  EXPECT_EQ(st.message().rfind("grad_output: ", 0), 0u) << call << ": " << st.message();
  EXPECT_NE(st.message().find(dtype_name(dtype)), std::string::npos) << call << ": "
                                                                     << st.message();
}

using test::c_tensor;

TEST(BackwardDTypes, OtherDTypesAreRefused) {
  const Ints shape{1, 2, 4, 4}, pooled{1, 2, 2, 2};
  constexpr int64_t kPattern = 0x5a5a5a5a5a5a5a5a;
  // 8-byte elements hold any dtype's.
  std::vector<int64_t> big(32, 0), small(8, 0), indices(8, 0);
  PoolOptions po;
  po.kernel_size = {2};
  UnpoolOptions uo;
  uo.kernel_size = {2};
  poolgen_pool_options cpo{};
  cpo.kernel_size[0] = cpo.kernel_size[1] = 2;
  poolgen_unpool_options cuo{};
  cuo.kernel_size[0] = cuo.kernel_size[1] = 2;
  for (DType dtype : {DType::i8, DType::u8, DType::i16, DType::i32, DType::i64}) {
    SCOPED_TRACE(dtype_name(dtype));
    for (DType index : {DType::i64, DType::i32}) {
      std::fill(big.begin(), big.end(), kPattern);
      expect_refused(max_pool_backward(2, contiguous(small.data(), dtype, pooled),
                                       contiguous(indices.data(), index, pooled),
                                       contiguous(big.data(), dtype, shape), po),
                     dtype, "max_pool_backward");
      EXPECT_TRUE(std::all_of(big.begin(), big.end(), [&](int64_t x) { return x == kPattern; }))
          << "grad_input written";
      std::fill(small.begin(), small.end(), kPattern);
      expect_refused(max_unpool_backward(2, contiguous(big.data(), dtype, shape),
                                         contiguous(indices.data(), index, pooled),
                                         contiguous(small.data(), dtype, pooled), uo),
                     dtype, "max_unpool_backward");
      EXPECT_TRUE(
          std::all_of(small.begin(), small.end(), [&](int64_t x) { return x == kPattern; }))
          << "grad_values written";
      std::string name;
      expect_refused(max_pool_backward_kernel_name(2, contiguous(small.data(), dtype, pooled),
                                                   index, shape, po, &name),
                     dtype, "max_pool_backward_kernel_name");
      expect_refused(max_unpool_backward_kernel_name(2, contiguous(big.data(), dtype, shape),
                                                     index, pooled, uo, &name),
                     dtype, "max_unpool_backward_kernel_name");
      // The C API: the same code and message.
      char message[256];
      poolgen_tensor g = c_tensor(small.data(), dtype, pooled),
                     ix = c_tensor(indices.data(), index, pooled),
                     out = c_tensor(big.data(), dtype, shape);
      int32_t code = poolgen_max_pool_backward(2, &g, &ix, &out, &cpo, message, sizeof message);
      expect_refused(Status(static_cast<Code>(code), message), dtype, "poolgen_max_pool_backward");
      g = c_tensor(big.data(), dtype, shape);
      out = c_tensor(small.data(), dtype, pooled);
      code = poolgen_max_unpool_backward(2, &g, &ix, &out, &cuo, message, sizeof message);
      expect_refused(Status(static_cast<Code>(code), message), dtype,
                     "poolgen_max_unpool_backward");
      EXPECT_TRUE(std::all_of(big.begin(), big.end(), [&](int64_t x) { return x == kPattern; }));
      EXPECT_TRUE(
          std::all_of(small.begin(), small.end(), [&](int64_t x) { return x == kPattern; }));
    }
  }
}

// NaN bits as PyTorch gives them (the other tests let any NaN equal any NaN): its bf16 kernels
// narrow f32 results, which makes every NaN 0x7fc0, pooled values included; its f16 narrowing
// keeps a NaN's sign and its payload's top bits, quiet (x86's F16C). The 1x1x1x4 input, kernel
// (1, 2) and stride 1 make overlapping windows, so the gradient at position 1 is a sum.
TEST(BackwardNanBits, AsPyTorchGivesThem) {
  const Ints shape{1, 1, 1, 4}, pooled{1, 1, 1, 3};
  PoolOptions o;
  o.kernel_size = {1, 2};
  o.stride = {1};
  const std::vector<int64_t> indices{1, 1, 3};
  struct Case {
    DType dtype;
    std::vector<uint16_t> input, grad_output, values, grad_input;
  };
  const Case cases[] = {
      // bf16: inputs 1, NaN (sign, payload), 1, 2; gradients NaN, 1, 1.
      {DType::bf16, {0x3f80, 0xffff, 0x3f80, 0x4000}, {0xffc1, 0x3f80, 0x3f80},
       {0x7fc0, 0x7fc0, 0x4000}, {0x0000, 0x7fc0, 0x0000, 0x3f80}},
      // f16: the pooled NaN keeps its bits, the summed one its sign and payload.
      {DType::f16, {0x3c00, 0xffff, 0x3c00, 0x4000}, {0xfe01, 0x3c00, 0x3c00},
       {0xffff, 0xffff, 0x4000}, {0x0000, 0xfe01, 0x0000, 0x3c00}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(dtype_name(c.dtype));
    if (!test::pool_kernel_built(c.dtype, DType::i64) ||
        !pool_backward_kernel_built(c.dtype, DType::i64)) {
      continue;
    }
    std::vector<uint16_t> values(3), grad_input(4, 0x5a5a);
    std::vector<int64_t> got_indices(3);
    Status st = max_pool(2, contiguous(const_cast<uint16_t*>(c.input.data()), c.dtype, shape),
                         contiguous(values.data(), c.dtype, pooled),
                         contiguous(got_indices.data(), DType::i64, pooled), o);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(values, c.values);
    EXPECT_EQ(got_indices, indices);
    st = max_pool_backward(
        2, contiguous(const_cast<uint16_t*>(c.grad_output.data()), c.dtype, pooled),
        contiguous(const_cast<int64_t*>(indices.data()), DType::i64, pooled),
        contiguous(grad_input.data(), c.dtype, shape), o);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(grad_input, c.grad_input);
  }
}

}  // namespace
}  // namespace poolgen
