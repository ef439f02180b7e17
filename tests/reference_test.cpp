// The reference implementation against PyTorch's golden vectors (needs no kernel library),
// plus a few hand-checked cases of docs/semantics.md.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dtypes.hpp"
#include "golden_cases.hpp"
#include "reference.hpp"
#include "test_util.hpp"

namespace poolgen {
namespace {

using golden::Case;

// The reference's run of a golden case of each op, in T: results bit for bit (any NaN equals
// any NaN), indices exactly.
template <typename T>
void check_pool(const Case& c) {
  Ints shape;
  std::vector<T> values;
  std::vector<int64_t> indices;
  Status st = ref::max_pool<T>(c.nd, c.input_shape, c.in<T>(), c.pool, &shape, &values, &indices);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(shape, c.output_shape);
  EXPECT_EQ("", golden::compare_values(c.dtype, c.out_values, golden::bytes_of(values),
                                       c.output_shape));
  EXPECT_EQ("", golden::compare_indices(c.out_indices, indices));
}

template <typename T>
void check_unpool(const Case& c) {
  Ints shape;
  std::vector<T> values;
  Status st = ref::max_unpool<T>(c.nd, c.input_shape, c.in<T>(), c.in_indices, c.unpool, &shape,
                                 &values);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(shape, c.output_shape);
  EXPECT_EQ("", golden::compare_values(c.dtype, c.out_values, golden::bytes_of(values),
                                       c.output_shape));
}

template <typename T>
void check_pool_backward(const Case& c) {
  // The indices are PyTorch's forward's: the reference's pooling of the input names them too.
  Ints shape;
  std::vector<T> values, grad;
  std::vector<int64_t> indices;
  Status st = ref::max_pool<T>(c.nd, c.input_shape, c.in<T>(), c.pool, &shape, &values, &indices);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(shape, c.output_shape);
  EXPECT_EQ("", golden::compare_indices(c.out_indices, indices)) << "the forward's indices";
  st = ref::max_pool_backward<T>(c.nd, c.input_shape, golden::values_as<T>(c.grad_output),
                                 c.out_indices, c.pool, &grad);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ("", golden::compare_values(c.dtype, c.grad_input, golden::bytes_of(grad),
                                       c.input_shape));
}

template <typename T>
void check_unpool_backward(const Case& c) {
  Ints shape;
  std::vector<T> grad;
  Status st = ref::max_unpool_output_shape(c.nd, c.input_shape, c.unpool, &shape);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(shape, c.output_shape);
  st = ref::max_unpool_backward<T>(c.nd, c.input_shape, golden::values_as<T>(c.grad_output),
                                   c.in_indices, c.unpool, &grad);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ("", golden::compare_values(c.dtype, c.grad_values, golden::bytes_of(grad),
                                       c.input_shape));
}

class ReferenceGolden : public ::testing::TestWithParam<Case> {};

// Every golden case, in its dtype. The reference works on logical row-major data, so the case's
// layout does not enter.
TEST_P(ReferenceGolden, BitExact) {
  const Case& c = GetParam();
  ASSERT_TRUE(golden::known_op(c.op)) << c.op;
  SCOPED_TRACE(std::string("dtype ") + golden::dtype_str(c.dtype) + ", layout " +
               golden::layout_str(c.layout) + (c.via.empty() ? "" : ", computed via " + c.via));
  test::visit_dtype(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    ASSERT_EQ(test::dtype_of<T>(), c.dtype);
    if (c.op == "pool") return check_pool<T>(c);
    if (c.op == "unpool") return check_unpool<T>(c);
    if constexpr (test::is_float_type<T>()) {  // the reference's gradient types
      if (c.op == "pool_backward") return check_pool_backward<T>(c);
      return check_unpool_backward<T>(c);
    } else {
      FAIL() << c.op << " of " << golden::dtype_str(c.dtype) << ": gradients are floats";
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Golden, ReferenceGolden,
                         ::testing::ValuesIn(golden::cases_for_gtest()), golden::case_name);

// The golden files cover every dtype in both layouts and every rank, for every op (the backward
// ops: every float dtype).
TEST(ReferenceGoldenCoverage, EveryDTypeLayoutRankAndOp) {
  const std::vector<Case> all = golden::cases_for_gtest();
  ASSERT_GT(all.size(), 1u) << all[0].op;
  for (DType t : test::kAllDTypes) {
    for (Layout l : {Layout::contiguous, Layout::channels_last}) {
      for (int nd = 1; nd <= 3; ++nd) {
        for (const char* op : golden::kOps) {
          if (golden::is_backward(op) && !golden::is_float(t)) continue;
          int n = 0;
          for (const Case& c : all) n += c.dtype == t && c.layout == l && c.nd == nd && c.op == op;
          EXPECT_GT(n, 0) << golden::dtype_str(t) << " " << golden::layout_str(l) << " " << nd
                          << "-D " << op;
        }
      }
    }
  }
}

// A few values of the typed files decoded by hand (the bit-pattern format of make_golden.py).
TEST(ReferenceGoldenFormat, TypedBitPatterns) {
  EXPECT_EQ(golden::show_element(DType::f16, 0x3c00), "1 (0x3c00)");
  EXPECT_EQ(golden::show_element(DType::bf16, 0xbf80), "-1 (0xbf80)");
  EXPECT_EQ(golden::show_element(DType::i8, 0xff), "-1 (0xff)");
  EXPECT_EQ(golden::show_element(DType::u8, 0xff), "255 (0xff)");
  EXPECT_EQ(golden::show_element(DType::i64, 0x8000000000000000ull),
            "-9223372036854775808 (0x8000000000000000)");
  EXPECT_TRUE(golden::is_nan_bits(DType::f16, 0x7e00));
  EXPECT_TRUE(golden::is_nan_bits(DType::bf16, 0xffff));
  EXPECT_FALSE(golden::is_nan_bits(DType::f16, 0x7c00));  // inf
  EXPECT_EQ(golden::compare_values(DType::f32, golden::bytes_of(std::vector<float>{NAN}),
                                   golden::bytes_of(std::vector<float>{-NAN})),
            "");
  EXPECT_NE(golden::compare_values(DType::f32, golden::bytes_of(std::vector<float>{0.0f}),
                                   golden::bytes_of(std::vector<float>{-0.0f})),
            "");
}

// f16 rounding overflows as IEEE 754 and PyTorch's .half() do: from 65520 (the largest finite
// f16, 65504, plus half a step) on, and infinity stays infinite. The golden f16 gradients sum
// past it.
TEST(Reference, F16RoundingOverflowsToInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(test::to_f16(65519.996f).bits, 0x7bff);
  EXPECT_EQ(test::to_f16(65520.0f).bits, 0x7c00);
  EXPECT_EQ(test::to_f16(-78592.0f).bits, 0xfc00);
  EXPECT_EQ(test::to_f16(inf).bits, 0x7c00);
  EXPECT_EQ(test::to_f16(-inf).bits, 0xfc00);
  EXPECT_EQ(test::to_f16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(test::to_f16(1.0f + 0x1p-11f).bits, 0x3c00);  // a tie: to even
}

TEST(Reference, EmptyWindowGivesSteppedStart) {
  PoolOptions o;
  o.kernel_size = {2};
  o.stride = {1};
  o.padding = {1};
  o.dilation = {4};
  Ints shape;
  std::vector<float> v;
  std::vector<int64_t> idx;
  ASSERT_TRUE(ref::max_pool<float>(1, {1, 3}, {1, 2, 3}, o, &shape, &v, &idx).ok());
  ASSERT_EQ(shape, (Ints{1, 1}));
  EXPECT_EQ(v[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(idx[0], 3);  // -1 stepped by 4: outside the plane, as PyTorch
}

TEST(Reference, NanLastWinsTiesFirstWins) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  PoolOptions o;
  o.kernel_size = {4};
  Ints shape;
  std::vector<float> v;
  std::vector<int64_t> idx;
  ASSERT_TRUE(ref::max_pool<float>(1, {1, 1, 8}, {1, nan, 2, nan, 5, 7, 7, 3}, o, &shape, &v,
                                   &idx)
                  .ok());
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(idx[0], 3);
  EXPECT_EQ(v[1], 7.0f);
  EXPECT_EQ(idx[1], 5);
}

TEST(Reference, IntegerValues) {
  PoolOptions o;
  o.kernel_size = {2};
  Ints shape;
  std::vector<int32_t> v;
  std::vector<int64_t> idx;
  const int32_t lo = std::numeric_limits<int32_t>::lowest();
  ASSERT_TRUE(ref::max_pool<int32_t>(1, {1, 4}, {lo, lo, 3, 9}, o, &shape, &v, &idx).ok());
  EXPECT_EQ(v, (std::vector<int32_t>{lo, 9}));
  EXPECT_EQ(idx, (std::vector<int64_t>{0, 3}));
}

TEST(Reference, UnpoolLatestWinsAndInvalidIndex) {
  UnpoolOptions o;
  o.kernel_size = {2};
  Ints shape;
  std::vector<double> out;
  ASSERT_TRUE(ref::max_unpool<double>(1, {1, 3}, {1, 2, 3}, {1, 1, 0}, o, &shape, &out).ok());
  EXPECT_EQ(shape, (Ints{1, 6}));
  EXPECT_EQ(out, (std::vector<double>{3, 2, 0, 0, 0, 0}));
  Status st = ref::max_unpool<double>(1, {1, 3}, {1, 2, 3}, {0, 6, -1}, o, &shape, &out);
  EXPECT_EQ(st.code(), Code::index_out_of_range);
  EXPECT_NE(st.message().find("6"), std::string::npos) << st.message();
}

TEST(Reference, OutputShapeErrors) {
  Ints shape;
  PoolOptions o;
  o.kernel_size = {2};
  o.padding = {2};
  EXPECT_EQ(ref::max_pool_output_shape(2, {1, 1, 4, 4}, o, &shape).code(),
            Code::invalid_argument);
  o.padding = {2};
  o.dilation = {3};  // (3*1+1)/2 = 2: allowed in 1-D/2-D, not in 3-D (k/2 = 1)
  EXPECT_TRUE(ref::max_pool_output_shape(2, {1, 1, 4, 4}, o, &shape).ok());
  EXPECT_EQ(ref::max_pool_output_shape(3, {1, 1, 4, 4, 4}, o, &shape).code(),
            Code::invalid_argument);
  UnpoolOptions u;
  u.kernel_size = {2};
  u.output_size = {5};  // default 4 (in 2), range (2, 6)
  EXPECT_TRUE(ref::max_unpool_output_shape(1, {1, 2}, u, &shape).ok());
  u.output_size = {6};
  EXPECT_EQ(ref::max_unpool_output_shape(1, {1, 2}, u, &shape).code(), Code::invalid_argument);
  // By the indices alone: zero padding, in a list of 1 or nd entries as everywhere else.
  u.kernel_size.clear();
  u.padding = {0};
  EXPECT_TRUE(ref::max_unpool_output_shape(1, {1, 2}, u, &shape).ok());
  u.padding = {0, 0, 0, 0};
  EXPECT_EQ(ref::max_unpool_output_shape(1, {1, 2}, u, &shape).code(), Code::invalid_argument);
}

}  // namespace
}  // namespace poolgen
