// Every error path of the public C++ API (poolgen.hpp) and the C API (poolgen.h): the code, and
// a message naming the argument and the offending value. Invalid unpool indices must be named
// (the first in input order) and must never cause a write outside the output.
#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "built_kernels.hpp"
#include "dtypes.hpp"
#include "lib_util.hpp"
#include "poolgen/poolgen.h"
#include "poolgen/poolgen.hpp"
#include "reference.hpp"
#include "test_util.hpp"

#include <regex>

namespace poolgen {
namespace {

// The status has `code`, its message has the uniform form "<argument>: expected ..., got ..."
// (docs/errors.md) and contains every one of `parts`.
::testing::AssertionResult IsError(const Status& s, Code code,
                                   std::initializer_list<std::string> parts) {
  if (s.code() != code) {
    return ::testing::AssertionFailure()
           << "code " << static_cast<int>(s.code()) << ", expected " << static_cast<int>(code)
           << " (message: \"" << s.message() << "\")";
  }
  static const std::regex kForm("^[a-z_]+: (.+ )?expected .+got.+");
  if (!std::regex_match(s.message(), kForm)) {
    return ::testing::AssertionFailure()
           << "message \"" << s.message() << "\" is not \"<argument>: expected ..., got ...\"";
  }
  for (const std::string& p : parts) {
    if (s.message().find(p) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message \"" << s.message() << "\" does not contain \"" << p << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

// The same for a C API result and message.
::testing::AssertionResult CIsError(int32_t got, int32_t code, const char* message,
                                    std::initializer_list<std::string> parts) {
  return IsError(Status(static_cast<Code>(got), message), static_cast<Code>(code), parts);
}

template <typename Call, typename = void>
struct HasOutputGuard : std::false_type {};
template <typename Call>
struct HasOutputGuard<Call, std::void_t<decltype(std::declval<const Call&>().guards_ok())>>
    : std::true_type {};

// A default Call (PoolCall, UnpoolCall, CPool, CUnpool below) broken in one way by `breaks` (a
// function of Call&): running it fails with `code` and a message containing every one of
// `parts`; a call with guard elements around its output leaves them untouched.
template <typename Call, typename Break, typename CodeT>
::testing::AssertionResult FailsWhen(Break breaks, CodeT code,
                                     std::initializer_list<std::string> parts) {
  Call c;
  breaks(c);
  ::testing::AssertionResult r = ::testing::AssertionSuccess();
  if constexpr (std::is_same_v<decltype(c.run()), Status>) {
    r = IsError(c.run(), code, parts);
  } else {
    r = CIsError(c.run(), code, c.message, parts);
  }
  if constexpr (HasOutputGuard<Call>::value) {
    if (r && !c.guards_ok()) {
      return ::testing::AssertionFailure() << "elements around the output were written";
    }
  }
  return r;
}

// A pooling call on small owned buffers whose pieces each test breaks in one way.
struct PoolCall {
  int nd = 2;
  Ints in_shape{1, 2, 6, 6};
  Ints out_shape{1, 2, 3, 3};
  std::vector<float> in = std::vector<float>(72, 1.0f);
  std::vector<float> vals = std::vector<float>(18);
  std::vector<int64_t> idx = std::vector<int64_t>(18);
  PoolOptions o;
  TensorView input, values, indices;

  PoolCall() {
    o.kernel_size = {2};
    input = contiguous(in.data(), in_shape);
    values = contiguous(vals.data(), out_shape);
    indices = contiguous(idx.data(), out_shape);
  }
  Status run() const { return max_pool(nd, input, values, indices, o); }
  Status shape() const {
    Ints out;
    return max_pool_output_shape(nd, input.shape, o, &out);
  }
};

// Both the shape query and the call must fail the same way.
#define EXPECT_POOL_ERROR(call, code, ...)                     \
  do {                                                         \
    EXPECT_TRUE(IsError((call).shape(), code, __VA_ARGS__));   \
    EXPECT_TRUE(IsError((call).run(), code, __VA_ARGS__));     \
  } while (false)

TEST(PoolErrors, BadNd) {
  for (int nd : {0, 4, -1}) {
    PoolCall c;
    c.nd = nd;
    EXPECT_POOL_ERROR(c, Code::invalid_argument, {"nd", std::to_string(nd)});
  }
}

TEST(PoolErrors, WrongRank) {
  PoolCall c;
  c.input.shape = {6, 6};
  EXPECT_POOL_ERROR(c, Code::invalid_argument, {"input", "rank 2"});
  c.input.shape = {1, 1, 1, 6, 6};
  EXPECT_POOL_ERROR(c, Code::invalid_argument, {"input", "rank 5"});
  c.nd = 3;
  c.input.shape = {6, 6, 6, 6, 6, 6};
  EXPECT_POOL_ERROR(c, Code::invalid_argument, {"input", "rank 6"});
  c.nd = 1;
  c.input.shape = {6};
  EXPECT_POOL_ERROR(c, Code::invalid_argument, {"input", "rank 1"});
}

TEST(PoolErrors, DimensionsBelowOne) {
  for (const Ints& shape : {Ints{1, 0, 6, 6}, Ints{1, 2, 0, 6}, Ints{1, 2, 6, -3}, Ints{-1, 2, 6, 6},
                            Ints{0, 6, 6}}) {
    PoolCall c;
    c.input.shape = shape;
    const int64_t bad = *std::min_element(shape.begin(), shape.end());
    EXPECT_POOL_ERROR(c, Code::invalid_argument, {"input", std::to_string(bad)});
  }
}

TEST(PoolErrors, EmptyBatchIsFine) {
  PoolCall c;
  c.input = contiguous(static_cast<float*>(nullptr), {0, 2, 6, 6});
  c.values = contiguous(static_cast<float*>(nullptr), {0, 2, 3, 3});
  c.indices = contiguous(static_cast<int64_t*>(nullptr), {0, 2, 3, 3});
  Ints out;
  ASSERT_TRUE(max_pool_output_shape(2, c.input.shape, c.o, &out).ok());
  EXPECT_EQ(out, (Ints{0, 2, 3, 3}));
  Status st = c.run();
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(PoolErrors, ParametersBelowMinimum) {
  struct Bad {
    Ints PoolOptions::*field;
    const char* name;
    int64_t value;
  };
  for (const Bad& b : {Bad{&PoolOptions::kernel_size, "kernel_size", 0},
                       Bad{&PoolOptions::kernel_size, "kernel_size", -2},
                       Bad{&PoolOptions::stride, "stride", 0},
                       Bad{&PoolOptions::stride, "stride", -1},
                       Bad{&PoolOptions::dilation, "dilation", 0},
                       Bad{&PoolOptions::dilation, "dilation", -4},
                       Bad{&PoolOptions::padding, "padding", -1}}) {
    for (int nd = 1; nd <= 3; ++nd) {
      SCOPED_TRACE(std::string(b.name) + " nd " + std::to_string(nd));
      PoolCall c;
      c.nd = nd;
      c.input.shape = Ints(nd + 2, 6);
      c.o.kernel_size = Ints(nd, 2);
      // The bad value in the last dimension only.
      Ints list(nd, b.field == &PoolOptions::padding ? 0 : 1);
      if (b.field == &PoolOptions::kernel_size) list = Ints(nd, 2);
      list.back() = b.value;
      c.o.*b.field = list;
      EXPECT_POOL_ERROR(c, Code::invalid_argument, {b.name, std::to_string(b.value)});
    }
  }
}

TEST(PoolErrors, PaddingTooLarge) {
  // 1-D and 2-D: at most half the dilated kernel, (d(k-1)+1)/2.
  for (int nd : {1, 2}) {
    PoolCall c;
    c.nd = nd;
    c.input.shape = Ints(nd + 2, 9);
    c.o.kernel_size = {2};
    c.o.padding = {2};  // limit 1
    EXPECT_POOL_ERROR(c, Code::invalid_argument, {"padding", "2", "1"});
    c.o.dilation = {3};  // limit (3+1)/2 = 2
    Ints out;
    EXPECT_TRUE(max_pool_output_shape(nd, c.input.shape, c.o, &out).ok());
    c.o.padding = {3};
    EXPECT_POOL_ERROR(c, Code::invalid_argument, {"padding", "3", "2"});
    c.o.kernel_size = {3};
    c.o.dilation = {1};
    c.o.padding = Ints(nd, 1);
    c.o.padding.back() = 2;  // limit 1
    EXPECT_POOL_ERROR(c, Code::invalid_argument, {"padding", "2"});
  }
  // 3-D: at most half the raw kernel, k/2, whatever the dilation.
  PoolCall c;
  c.nd = 3;
  c.input.shape = {1, 1, 9, 9, 9};
  c.o.kernel_size = {2};
  c.o.dilation = {3};
  c.o.padding = {2};  // allowed in 1-D/2-D (limit 2) but not in 3-D (limit 1)
  EXPECT_POOL_ERROR(c, Code::invalid_argument, {"padding", "2", "1"});
  c.o.padding = {1, 1, 2};
  EXPECT_POOL_ERROR(c, Code::invalid_argument, {"padding", "2"});
  c.o.padding = {1};
  Ints out;
  EXPECT_TRUE(max_pool_output_shape(3, c.input.shape, c.o, &out).ok());
}

TEST(PoolErrors, OutputExtentBelowOne) {
  PoolCall c;
  c.input.shape = {1, 1, 2, 6};
  c.o.kernel_size = {3};
  EXPECT_POOL_ERROR(c, Code::invalid_argument, {"input", "3", "2"});
  c.input.shape = {1, 1, 6, 6};
  c.o.kernel_size = {2};
  c.o.dilation = {1, 7};  // span 8 > 6
  EXPECT_POOL_ERROR(c, Code::invalid_argument, {"input", "7"});
  c.nd = 1;
  c.input.shape = {3, 1};
  c.o.kernel_size = {2};
  c.o.dilation = {1};
  EXPECT_POOL_ERROR(c, Code::invalid_argument, {"input", "2", "1"});
}

TEST(PoolErrors, ListLengths) {
  {
    PoolCall c;
    c.o.kernel_size = {};
    EXPECT_POOL_ERROR(c, Code::invalid_argument, {"kernel_size", "0"});
    c.o.kernel_size = {2, 2, 2};
    EXPECT_POOL_ERROR(c, Code::invalid_argument, {"kernel_size", "3"});
  }
  {
    PoolCall c;
    c.o.stride = {2, 2, 2};
    EXPECT_POOL_ERROR(c, Code::invalid_argument, {"stride", "3"});
  }
  {
    PoolCall c;
    c.o.padding = {0, 0, 0, 0};
    EXPECT_POOL_ERROR(c, Code::invalid_argument, {"padding", "4"});
  }
  {
    PoolCall c;
    c.o.dilation = {1, 1, 1};
    EXPECT_POOL_ERROR(c, Code::invalid_argument, {"dilation", "3"});
  }
  {
    PoolCall c;
    c.nd = 1;
    c.input.shape = {2, 6};
    c.o.kernel_size = {2, 2};
    EXPECT_POOL_ERROR(c, Code::invalid_argument, {"kernel_size", "2"});
  }
}

TEST(PoolErrors, NullData) {
  EXPECT_TRUE(FailsWhen<PoolCall>([](PoolCall& c) { c.input.data = nullptr; },
                                  Code::invalid_argument, {"input", "null"}));
  EXPECT_TRUE(FailsWhen<PoolCall>([](PoolCall& c) { c.values.data = nullptr; },
                                  Code::invalid_argument, {"values", "null"}));
  EXPECT_TRUE(FailsWhen<PoolCall>([](PoolCall& c) { c.indices.data = nullptr; },
                                  Code::invalid_argument, {"indices", "null"}));
}

TEST(PoolErrors, DTypes) {
  EXPECT_TRUE(FailsWhen<PoolCall>([](PoolCall& c) { c.indices.dtype = DType::f32; },
                                  Code::invalid_argument, {"indices", "i64", "f32"}));
  EXPECT_TRUE(FailsWhen<PoolCall>([](PoolCall& c) { c.values.dtype = DType::i64; },
                                  Code::invalid_argument, {"values", "f32", "i64"}));
}

TEST(PoolErrors, OutputShapeMismatch) {
  {
    PoolCall c;
    c.values.shape = {1, 2, 3, 4};
    EXPECT_TRUE(IsError(c.run(), Code::invalid_argument, {"values", "[1, 2, 3, 3]", "[1, 2, 3, 4]"}));
  }
  {
    PoolCall c;
    c.indices.shape = {2, 3, 3};
    EXPECT_TRUE(IsError(c.run(), Code::invalid_argument, {"indices", "[2, 3, 3]"}));
  }
}

TEST(PoolErrors, Strides) {
  {
    PoolCall c;
    c.input.strides = {72, 36, 6};  // wrong length
    EXPECT_TRUE(IsError(c.run(), Code::invalid_argument, {"input", "3"}));
  }
  {
    PoolCall c;
    c.in.resize(144);
    c.input.data = c.in.data();
    c.input.strides = {144, 72, 12, 2};  // innermost stride 2: served through a packed copy
    EXPECT_TRUE(c.run().ok());
  }
}

// Outputs whose strides reach one element twice are refused: the result would be garbage.
TEST(PoolErrors, OverlappingOutputs) {
  {
    PoolCall c;
    c.values.strides = {18, 9, 0, 1};  // every output row on the first one
    EXPECT_TRUE(IsError(c.run(), Code::invalid_argument, {"values", "stride 0"}));
  }
  {
    PoolCall c;
    c.indices.strides = {18, 9, 2, 1};  // rows 2 apart, but a row spans 3
    EXPECT_TRUE(IsError(c.run(), Code::invalid_argument, {"indices", "stride 2", "3"}));
    c.indices.strides = {9, 2, 3, 1};  // channels 2 apart, but a plane spans 9
    EXPECT_TRUE(IsError(c.run(), Code::invalid_argument, {"indices", "stride 2", "9"}));
  }
  {
    UnpoolOptions u;
    u.kernel_size = {2};
    std::vector<float> vals(4, 1.0f), out(16, 0.0f);
    std::vector<int64_t> idx{0, 2, 8, 10};
    TensorView output = contiguous(out.data(), {1, 1, 4, 4});
    output.strides = {16, 16, 2, 1};  // rows overlap their neighbours
    EXPECT_TRUE(IsError(max_unpool(2, contiguous(vals.data(), {1, 1, 2, 2}),
                                   contiguous(idx.data(), {1, 1, 2, 2}), output, u),
                        Code::invalid_argument, {"output", "stride 2", "4"}));
  }
}

TEST(PoolErrors, UnsupportedDevice) {
  PoolCall c;
  c.input.device = static_cast<Device>(7);
  EXPECT_TRUE(IsError(c.run(), Code::unsupported, {"input", "device", "7"}));
  // A view on another device than the input's (cuda here) is a mismatch, named.
  PoolCall d;
  d.values.device = Device::cuda;
  EXPECT_TRUE(IsError(d.run(), Code::invalid_argument, {"values", "device", "cuda", "1"}));
}

TEST(PoolErrors, KernelNameReportsErrorsToo) {
  PoolOptions o;
  o.kernel_size = {0};
  std::string name;
  EXPECT_TRUE(IsError(max_pool_kernel_name(2, {1, 1, 4, 4}, o, &name), Code::invalid_argument,
                      {"kernel_size", "0"}));
  UnpoolOptions u;
  u.kernel_size = {2};
  u.stride = {-1};
  EXPECT_TRUE(IsError(max_unpool_kernel_name(2, {1, 1, 4, 4}, u, &name), Code::invalid_argument,
                      {"stride", "-1"}));
}

// ---------------------------------------------------------------------------------------------
// Unpooling.

struct UnpoolCall {
  int nd = 2;
  Ints in_shape{2, 1, 3, 3};
  Ints out_shape{2, 1, 6, 6};
  std::vector<float> vals = std::vector<float>(18, 2.0f);
  std::vector<int64_t> idx = std::vector<int64_t>(18, 0);
  std::vector<float> out = test::guarded_buffer<float>(72, test::kGuardF, 0.0f);
  UnpoolOptions o;
  TensorView values, indices, output;

  UnpoolCall() {
    o.kernel_size = {2};
    for (int64_t i = 0; i < 18; ++i) idx[i] = (i % 9) * 4;  // valid
    values = contiguous(vals.data(), in_shape);
    indices = contiguous(idx.data(), in_shape);
    output = contiguous(out.data() + test::kGuard, out_shape);
  }
  Status run() const { return max_unpool(nd, values, indices, output, o); }
  Status shape() const {
    Ints s;
    return max_unpool_output_shape(nd, values.shape, o, &s);
  }
  bool guards_ok() const { return test::guards_intact(out, test::kGuardF); }
};
static_assert(HasOutputGuard<UnpoolCall>::value && !HasOutputGuard<PoolCall>::value);

#define EXPECT_UNPOOL_ERROR(call, code, ...)                   \
  do {                                                         \
    EXPECT_TRUE(IsError((call).shape(), code, __VA_ARGS__));   \
    EXPECT_TRUE(IsError((call).run(), code, __VA_ARGS__));     \
    EXPECT_TRUE((call).guards_ok());                           \
  } while (false)

TEST(UnpoolErrors, Baseline) {
  UnpoolCall c;
  Status st = c.run();
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(c.guards_ok());
}

TEST(UnpoolErrors, BadNdAndRank) {
  for (int nd : {0, 4}) {
    UnpoolCall c;
    c.nd = nd;
    EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"nd", std::to_string(nd)});
  }
  UnpoolCall c;
  c.values.shape = {3, 3};
  EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"values", "rank 2"});
  c.values.shape = {1, 1, 1, 3, 3};
  EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"values", "rank 5"});
}

TEST(UnpoolErrors, DimensionsBelowOne) {
  for (const Ints& shape : {Ints{2, 0, 3, 3}, Ints{2, 1, 0, 3}, Ints{-2, 1, 3, 3}, Ints{0, 3, 3}}) {
    UnpoolCall c;
    c.values.shape = shape;
    const int64_t bad = *std::min_element(shape.begin(), shape.end());
    EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"values", std::to_string(bad)});
  }
}

TEST(UnpoolErrors, ParametersBelowMinimum) {
  {
    UnpoolCall c;
    c.o.kernel_size = {2, 0};
    EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"kernel_size", "0"});
  }
  {
    UnpoolCall c;
    c.o.stride = {-3};
    EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"stride", "-3"});
  }
  {
    UnpoolCall c;
    c.o.padding = {0, -1};
    EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"padding", "-1"});
  }
}

TEST(UnpoolErrors, ListLengths) {
  {
    UnpoolCall c;
    c.o.kernel_size = {};
    EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"kernel_size", "0"});
    c.o.kernel_size = {2, 2, 2};
    EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"kernel_size", "3"});
  }
  {
    UnpoolCall c;
    c.o.stride = {2, 2, 2};
    EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"stride", "3"});
  }
  {
    UnpoolCall c;
    c.o.padding = {0, 0, 0};
    EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"padding", "3"});
  }
}

TEST(UnpoolErrors, OutputSizeLength) {
  for (size_t n : {1u, 3u, 5u}) {
    UnpoolCall c;
    c.o.output_size = Ints(n, 6);
    EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"output_size", std::to_string(n)});
  }
}

TEST(UnpoolErrors, OutputSizeRange) {
  // Default 6 per dimension, stride 2: allowed 5..7 (strictly between 4 and 8).
  UnpoolCall c;
  for (const Ints& good : {Ints{5, 7}, Ints{7, 5}, Ints{9, 9, 6, 6}}) {
    c.o.output_size = good;
    Ints s;
    EXPECT_TRUE(max_unpool_output_shape(2, c.values.shape, c.o, &s).ok()) << test::str(good);
  }
  struct Case {
    Ints output_size;
    int64_t bad;
    int dim;
  };
  for (const Case& k : {Case{{4, 6}, 4, 0}, Case{{6, 8}, 8, 1}, Case{{1, 1, 6, 3}, 3, 1},
                        Case{{1, 1, 100, 6}, 100, 0}, Case{{6, -1}, -1, 1}}) {
    SCOPED_TRACE(test::str(k.output_size));
    c.o.output_size = k.output_size;
    EXPECT_UNPOOL_ERROR(c, Code::invalid_argument,
                        {"output_size", std::to_string(k.bad), std::to_string(k.dim), "5", "7"});
  }
}

TEST(UnpoolErrors, OutputExtentBelowOne) {
  UnpoolCall c;
  c.nd = 1;
  c.values.shape = {1, 1};
  c.o.kernel_size = {2};
  c.o.padding = {1};  // (1-1)*2 - 2 + 2 = 0
  EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"0"});
}

TEST(UnpoolErrors, TensorMismatches) {
  {
    UnpoolCall c;
    c.indices.shape = {2, 1, 3, 4};
    EXPECT_TRUE(IsError(c.run(), Code::invalid_argument, {"indices", "[2, 1, 3, 4]"}));
  }
  {
    UnpoolCall c;
    c.indices.dtype = DType::f32;
    EXPECT_TRUE(IsError(c.run(), Code::invalid_argument, {"indices", "i64", "f32"}));
  }
  {
    UnpoolCall c;
    c.output.shape = {2, 1, 6, 5};
    EXPECT_TRUE(IsError(c.run(), Code::invalid_argument, {"output", "[2, 1, 6, 6]", "[2, 1, 6, 5]"}));
  }
  {
    UnpoolCall c;
    c.output.dtype = DType::i64;
    EXPECT_TRUE(IsError(c.run(), Code::invalid_argument, {"output", "f32", "i64"}));
  }
  {
    UnpoolCall c;
    std::vector<int64_t> v(18);
    c.values = contiguous(v.data(), c.in_shape);  // i64 values want an i64 output
    EXPECT_TRUE(IsError(c.run(), Code::invalid_argument, {"output", "i64", "f32"}));
  }
  for (int which = 0; which < 3; ++which) {
    UnpoolCall c;
    TensorView* t[] = {&c.values, &c.indices, &c.output};
    const char* names[] = {"values", "indices", "output"};
    t[which]->data = nullptr;
    EXPECT_TRUE(IsError(c.run(), Code::invalid_argument, {names[which], "null"}));
    UnpoolCall d;
    TensorView* u[] = {&d.values, &d.indices, &d.output};
    u[which]->device = static_cast<Device>(3);
    EXPECT_TRUE(IsError(d.run(), Code::unsupported, {names[which], "device", "3"}));
    EXPECT_TRUE(d.guards_ok());
  }
}

TEST(UnpoolErrors, EmptyBatchIsFine) {
  UnpoolCall c;
  c.values = contiguous(static_cast<float*>(nullptr), {0, 1, 3, 3});
  c.indices = contiguous(static_cast<int64_t*>(nullptr), {0, 1, 3, 3});
  c.output = contiguous(static_cast<float*>(nullptr), {0, 1, 6, 6});
  Status st = c.run();
  EXPECT_TRUE(st.ok()) << st.message();
}

// Invalid indices: the first in input order is named with its position, its value and the plane
// size, on every path and window (gather-capable or not), and nothing outside the output moves.
TEST(UnpoolErrors, InvalidIndices) {
  const int64_t huge = int64_t(1) << 40;
  const int64_t big = std::numeric_limits<int64_t>::max();
  const int64_t small = std::numeric_limits<int64_t>::min();
  struct Case {
    int64_t first_pos, first_value, second_pos, second_value;
  };
  for (const Case& k : {Case{13, -77, 14, 99}, Case{11, 36, 3, -5}, Case{0, huge, 17, -1},
                        Case{8, -1, 17, 47}, Case{9, big, 10, small}, Case{5, small, 6, big}}) {
    for (const UnpoolOptions& base : [] {
           UnpoolOptions a, b, c;
           a.kernel_size = {2};  // k2s2p0: the gather fast path where compiled
           b.kernel_size = {3};
           b.stride = {2};
           b.padding = {1};  // k3s2p1 -> default 5x5 (a gather window too)
           b.output_size = {6, 6};
           c.kernel_size = {2, 3};
           c.stride = {3, 2};  // a general window
           c.output_size = {6, 6};
           return std::vector<UnpoolOptions>{a, b, c};
         }()) {
      for (Path path : {Path::automatic, Path::general}) {
        UnpoolCall c;
        c.o = base;
        c.o.path = path;
        // Valid indices from a real pooling pattern, then two invalid ones.
        for (int64_t i = 0; i < 18; ++i) c.idx[i] = ((i % 9) / 3) * 12 + (i % 3) * 2;
        const bool second_first = k.second_pos < k.first_pos;  // the later one is not reported
        c.idx[k.first_pos] = k.first_value;
        if (!second_first) c.idx[k.second_pos] = k.second_value;
        SCOPED_TRACE("indices " + test::str(c.idx) + " path " + test::path_name(path) +
                     " kernel_size " + test::str(base.kernel_size));
        Status st = c.run();
        EXPECT_TRUE(IsError(st, Code::index_out_of_range,
                            {"indices", std::to_string(k.first_pos), std::to_string(k.first_value),
                             "36"}));
        if (!second_first) {
          EXPECT_EQ(st.message().find(std::to_string(k.second_value)), std::string::npos)
              << st.message();
        }
        EXPECT_TRUE(c.guards_ok()) << "bytes outside the output were written";
      }
    }
  }
}

// Invalid indices through strided views: the first invalid one in input (logical) order.
TEST(UnpoolErrors, InvalidIndexThroughStridedView) {
  // indices: logical shape (2, 1, 3, 3) inside a (2, 2, 3, 4) backing; values packed.
  std::vector<int64_t> backing(2 * 2 * 3 * 4, -999);  // invalid outside the view: never read
  TensorView indices;
  indices.data = backing.data();
  indices.dtype = DType::i64;
  indices.shape = {2, 1, 3, 3};
  indices.strides = {24, 12, 4, 1};
  for (int n = 0; n < 2; ++n) {
    for (int h = 0; h < 3; ++h) {
      for (int w = 0; w < 3; ++w) backing[n * 24 + h * 4 + w] = h * 12 + w * 2;
    }
  }
  backing[24 + 1 * 4 + 2] = 40;  // logical position 9 + 5 = 14
  backing[24 + 2 * 4 + 0] = -8;  // logical position 15, later
  UnpoolCall c;
  c.indices = indices;
  for (Path path : {Path::automatic, Path::general}) {
    c.o.path = path;
    Status st = c.run();
    EXPECT_TRUE(IsError(st, Code::index_out_of_range, {"indices", "14", "40", "36"}));
    EXPECT_EQ(st.message().find("-8"), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find("-999"), std::string::npos) << st.message();
    EXPECT_TRUE(c.guards_ok());
  }
}

// ---------------------------------------------------------------------------------------------
// The C API.

constexpr size_t kMsg = 512;

poolgen_tensor c_tensor(void* data, int32_t dtype, const Ints& shape) {
  poolgen_tensor t;
  std::memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size() && i < 5; ++i) t.shape[i] = shape[i];
  return t;
}

struct CPool {
  std::vector<float> in = std::vector<float>(72);
  std::vector<float> vals = std::vector<float>(18);
  std::vector<int64_t> idx = std::vector<int64_t>(18);
  poolgen_tensor input, values, indices;
  poolgen_pool_options o;
  char message[kMsg];

  CPool() {
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 7) % 11);
    input = c_tensor(in.data(), POOLGEN_F32, {1, 2, 6, 6});
    values = c_tensor(vals.data(), POOLGEN_F32, {1, 2, 3, 3});
    indices = c_tensor(idx.data(), POOLGEN_I64, {1, 2, 3, 3});
    std::memset(&o, 0, sizeof o);
    o.kernel_size[0] = o.kernel_size[1] = 2;
    std::memset(message, 'x', sizeof message);
  }
  int32_t run(int32_t nd = 2) {
    return poolgen_max_pool(nd, &input, &values, &indices, &o, message, sizeof message);
  }
};

TEST(CApi, PoolSucceedsAndMatchesReference) {
  CPool c;
  ASSERT_EQ(c.run(), POOLGEN_OK) << c.message;
  Ints shape;
  std::vector<float> v;
  std::vector<int64_t> i;
  PoolOptions o;
  o.kernel_size = {2};
  ASSERT_TRUE(ref::max_pool<float>(2, {1, 2, 6, 6}, c.in, o, &shape, &v, &i).ok());
  EXPECT_TRUE(test::same_floats(v, c.vals));
  EXPECT_TRUE(test::same_ints(i, c.idx));
  int64_t out_shape[5] = {};
  const int64_t in_shape[4] = {1, 2, 6, 6};
  ASSERT_EQ(poolgen_max_pool_output_shape(2, 4, in_shape, &c.o, out_shape, c.message, kMsg),
            POOLGEN_OK);
  EXPECT_EQ(Ints(out_shape, out_shape + 4), (Ints{1, 2, 3, 3}));
}

TEST(CApi, PoolErrors) {
  {
    CPool c;
    EXPECT_TRUE(CIsError(c.run(0), POOLGEN_INVALID_ARGUMENT, c.message, {"nd", "0"}));
    EXPECT_TRUE(CIsError(c.run(5), POOLGEN_INVALID_ARGUMENT, c.message, {"nd", "5"}));
  }
  {
    CPool c;
    c.o.kernel_size[1] = 0;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"kernel_size", "0"}));
  }
  {
    CPool c;
    c.o.stride[0] = 2;
    c.o.stride[1] = -2;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"stride", "-2"}));
  }
  {
    CPool c;
    c.o.padding[0] = 5;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"padding", "5"}));
  }
  {
    CPool c;
    c.o.dilation[0] = 1;
    c.o.dilation[1] = -1;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"dilation", "-1"}));
  }
  {
    CPool c;
    c.input.rank = 1;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"input", "1"}));
    c.input.rank = 6;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"input", "6"}));
    c.input.rank = 5;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"input", "rank 5"}));
  }
  {
    CPool c;
    c.input.data = nullptr;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"input", "null"}));
  }
  {
    CPool c;
    EXPECT_TRUE(CIsError(poolgen_max_pool(2, nullptr, &c.values, &c.indices, &c.o, c.message, kMsg),
                         POOLGEN_INVALID_ARGUMENT, c.message, {"input", "null"}));
    EXPECT_TRUE(CIsError(poolgen_max_pool(2, &c.input, &c.values, nullptr, &c.o, c.message, kMsg),
                         POOLGEN_INVALID_ARGUMENT, c.message, {"indices", "null"}));
    EXPECT_TRUE(
        CIsError(poolgen_max_pool(2, &c.input, &c.values, &c.indices, nullptr, c.message, kMsg),
                 POOLGEN_INVALID_ARGUMENT, c.message, {"options"}));
  }
  {
    CPool c;
    c.indices.dtype = POOLGEN_F32;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"indices", "i64"}));
  }
  {
    CPool c;
    c.values.shape[3] = 4;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"values", "[1, 2, 3, 4]"}));
  }
  {
    CPool c;
    c.input.shape[2] = 1;
    c.o.kernel_size[0] = c.o.kernel_size[1] = 3;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"input", "3"}));
  }
  {
    CPool c;
    int64_t out_shape[5];
    const int64_t bad_shape[4] = {1, 2, 0, 6};
    EXPECT_TRUE(CIsError(
        poolgen_max_pool_output_shape(2, 4, bad_shape, &c.o, out_shape, c.message, kMsg),
        POOLGEN_INVALID_ARGUMENT, c.message, {"input", "0"}));
    EXPECT_TRUE(CIsError(poolgen_max_pool_output_shape(7, 4, bad_shape, &c.o, out_shape, c.message,
                                                       kMsg),
                         POOLGEN_INVALID_ARGUMENT, c.message, {"nd", "7"}));
    EXPECT_NE(poolgen_max_pool_output_shape(2, 4, nullptr, &c.o, out_shape, c.message, kMsg),
              POOLGEN_OK);
    EXPECT_NE(poolgen_max_pool_output_shape(2, 4, bad_shape, nullptr, out_shape, c.message, kMsg),
              POOLGEN_OK);
  }
}

TEST(CApi, MessageTruncationAndNull) {
  CPool c;
  c.o.kernel_size[0] = 0;
  // Full message for comparison.
  ASSERT_EQ(c.run(), POOLGEN_INVALID_ARGUMENT);
  const std::string full = c.message;
  ASSERT_GT(full.size(), 8u);
  // A tiny buffer: truncated, NUL-terminated, no byte past message_size written.
  for (size_t size : {size_t(1), size_t(2), size_t(8)}) {
    char buf[32];
    std::memset(buf, '#', sizeof buf);
    EXPECT_EQ(poolgen_max_pool(2, &c.input, &c.values, &c.indices, &c.o, buf, size),
              POOLGEN_INVALID_ARGUMENT);
    EXPECT_EQ(std::string(buf), full.substr(0, size - 1));
    for (size_t i = size; i < sizeof buf; ++i) EXPECT_EQ(buf[i], '#') << "byte " << i;
  }
  // Size 0 and NULL: nothing written, the code still returned.
  char buf[4] = {'#', '#', '#', '#'};
  EXPECT_EQ(poolgen_max_pool(2, &c.input, &c.values, &c.indices, &c.o, buf, 0),
            POOLGEN_INVALID_ARGUMENT);
  EXPECT_EQ(buf[0], '#');
  EXPECT_EQ(poolgen_max_pool(2, &c.input, &c.values, &c.indices, &c.o, nullptr, 100),
            POOLGEN_INVALID_ARGUMENT);
  // Success leaves a valid (possibly empty) string or the buffer alone; either way no crash.
  c.o.kernel_size[0] = 2;
  EXPECT_EQ(poolgen_max_pool(2, &c.input, &c.values, &c.indices, &c.o, nullptr, 0), POOLGEN_OK);
}

struct CUnpool {
  std::vector<float> vals = std::vector<float>(18, 1.5f);
  std::vector<int64_t> idx = std::vector<int64_t>(18);
  std::vector<float> out = test::guarded_buffer<float>(72, test::kGuardF, 0.0f);
  poolgen_tensor values, indices, output;
  poolgen_unpool_options o;
  char message[kMsg];

  CUnpool() {
    for (int64_t i = 0; i < 18; ++i) idx[i] = ((i % 9) / 3) * 12 + (i % 3) * 2;
    values = c_tensor(vals.data(), POOLGEN_F32, {2, 1, 3, 3});
    indices = c_tensor(idx.data(), POOLGEN_I64, {2, 1, 3, 3});
    output = c_tensor(out.data() + test::kGuard, POOLGEN_F32, {2, 1, 6, 6});
    std::memset(&o, 0, sizeof o);
    o.kernel_size[0] = o.kernel_size[1] = 2;
    std::memset(message, 'x', sizeof message);
  }
  int32_t run(int32_t nd = 2) {
    return poolgen_max_unpool(nd, &values, &indices, &output, &o, message, sizeof message);
  }
  int32_t shape(int64_t* out_shape) {
    const int64_t in_shape[4] = {2, 1, 3, 3};
    return poolgen_max_unpool_output_shape(2, 4, in_shape, &o, out_shape, message, sizeof message);
  }
  bool guards_ok() const { return test::guards_intact(out, test::kGuardF); }
};
static_assert(HasOutputGuard<CUnpool>::value && !HasOutputGuard<CPool>::value);

TEST(CApi, UnpoolSucceeds) {
  CUnpool c;
  ASSERT_EQ(c.run(), POOLGEN_OK) << c.message;
  EXPECT_TRUE(c.guards_ok());
  EXPECT_EQ(c.out[test::kGuard + 0], 1.5f);
  EXPECT_EQ(c.out[test::kGuard + 1], 0.0f);
  int64_t out_shape[5] = {};
  ASSERT_EQ(c.shape(out_shape), POOLGEN_OK) << c.message;
  EXPECT_EQ(Ints(out_shape, out_shape + 4), (Ints{2, 1, 6, 6}));
  c.o.output_size_len = 2;
  c.o.output_size[0] = 7;
  c.o.output_size[1] = 5;
  ASSERT_EQ(c.shape(out_shape), POOLGEN_OK) << c.message;
  EXPECT_EQ(Ints(out_shape, out_shape + 4), (Ints{2, 1, 7, 5}));
}

TEST(CApi, UnpoolErrors) {
  {
    CUnpool c;
    EXPECT_TRUE(CIsError(c.run(0), POOLGEN_INVALID_ARGUMENT, c.message, {"nd", "0"}));
  }
  {
    CUnpool c;
    c.o.output_size_len = 1;
    c.o.output_size[0] = 6;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"output_size", "1"}));
    int64_t s[5];
    EXPECT_TRUE(CIsError(c.shape(s), POOLGEN_INVALID_ARGUMENT, c.message, {"output_size", "1"}));
    c.o.output_size_len = 3;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"output_size", "3"}));
    c.o.output_size_len = -1;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"output_size_len", "-1"}));
    c.o.output_size_len = 9;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"output_size_len", "9"}));
    EXPECT_TRUE(c.guards_ok());
  }
  {
    CUnpool c;
    c.o.output_size_len = 2;
    c.o.output_size[0] = 6;
    c.o.output_size[1] = 8;  // allowed 5..7
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message,
                         {"output_size", "8", "5", "7"}));
  }
  {
    CUnpool c;
    c.idx[7] = 36;
    c.idx[8] = -1;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INDEX_OUT_OF_RANGE, c.message, {"indices", "7", "36"}));
    EXPECT_TRUE(c.guards_ok());
  }
  {
    CUnpool c;
    c.indices.dtype = POOLGEN_F32;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"indices", "i64"}));
    c.indices.dtype = 7;
    EXPECT_NE(c.run(), POOLGEN_OK);
  }
  {
    CUnpool c;
    c.indices.shape[0] = 1;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"indices", "[1, 1, 3, 3]"}));
  }
  {
    CUnpool c;
    c.output.data = nullptr;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"output", "null"}));
    EXPECT_TRUE(CIsError(poolgen_max_unpool(2, &c.values, &c.indices, nullptr, &c.o, c.message,
                                            kMsg),
                         POOLGEN_INVALID_ARGUMENT, c.message, {"output", "null"}));
    EXPECT_TRUE(CIsError(poolgen_max_unpool(2, &c.values, &c.indices, &c.output, nullptr,
                                            c.message, kMsg),
                         POOLGEN_INVALID_ARGUMENT, c.message, {"options"}));
  }
  {
    CUnpool c;
    c.o.padding[1] = -2;
    EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"padding", "-2"}));
  }
  {
    CUnpool c;  // a tiny message buffer on the index error
    c.idx[3] = 1000;
    char buf[6];
    std::memset(buf, '#', sizeof buf);
    EXPECT_EQ(poolgen_max_unpool(2, &c.values, &c.indices, &c.output, &c.o, buf, 4),
              POOLGEN_INDEX_OUT_OF_RANGE);
    EXPECT_EQ(std::strlen(buf), 3u);
    EXPECT_EQ(buf[4], '#');
    EXPECT_EQ(buf[5], '#');
    EXPECT_TRUE(c.guards_ok());
  }
}

}  // namespace
}  // namespace poolgen

namespace poolgen {
namespace {

// Invalid indices in many planes at once: the kernels may run planes on several threads, each
// finding an invalid index; the call must still report the first one in input order, cleanly
// (error reporting must be thread-safe), and write nothing outside the output.
TEST(UnpoolErrors, InvalidIndicesInManyPlanesConcurrently) {
  const Ints in_shape{4, 32, 6, 6}, out_shape{4, 32, 12, 12};
  const int64_t n = test::numel(in_shape), plane_in = 36, plane_out = 144;
  std::vector<float> values(n, 1.0f);
  std::vector<int64_t> indices(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = i % plane_in;
    indices[i] = (p / 6) * 24 + (p % 6) * 2;
  }
  for (int64_t pl = 0; pl < n / plane_in; ++pl) indices[pl * plane_in + 17] = 1000 + pl;
  indices[3 * plane_in + 5] = -3;  // the first invalid one in input order is still pl 0's 17
  set_min_parallel_bytes(0);  // share this small call across threads
  for (int threads : {0, 4, 16}) {
    set_num_threads(threads);
    for (Path path : {Path::automatic, Path::general}) {
      for (int rep = 0; rep < 20; ++rep) {
        UnpoolOptions o;
        o.kernel_size = {2};
        o.path = path;
        std::vector<float> out = test::guarded_buffer<float>(test::numel(out_shape), test::kGuardF, 0);
        Status st = max_unpool(2, contiguous(values.data(), in_shape),
                               contiguous(indices.data(), in_shape),
                               contiguous(out.data() + test::kGuard, out_shape), o);
        ASSERT_TRUE(IsError(st, Code::index_out_of_range,
                            {"indices", "17", "1000", std::to_string(plane_out)}))
            << "threads " << threads << " path " << test::path_name(path);
        ASSERT_TRUE(test::guards_intact(out, test::kGuardF));
      }
    }
  }
  set_num_threads(0);
  set_min_parallel_bytes(-1);
}

}  // namespace
}  // namespace poolgen

namespace poolgen {
namespace {

// ---------------------------------------------------------------------------------------------
// Value and index dtypes: every value type (when compiled), indices i64 or i32.

bool pool_dtype_compiled(DType value) {
  for (const KernelInfo& k : compiled_kernels()) {
    if (k.op == "pool" && k.value_dtype == value) return true;
  }
  return false;
}

TEST(DTypeErrors, IndexDTypeOtherThanI64OrI32) {
  for (DType bad : {DType::f32, DType::i16, DType::u8, DType::f64}) {
    SCOPED_TRACE(dtype_name(bad));
    PoolCall c;
    c.indices.dtype = bad;
    EXPECT_TRUE(
        IsError(c.run(), Code::invalid_argument, {"indices", "i64", "i32", dtype_name(bad)}));
    std::string name;
    EXPECT_TRUE(IsError(max_pool_kernel_name(2, c.input, bad, c.o, &name), Code::invalid_argument,
                        {"indices", dtype_name(bad)}));
    UnpoolCall u;
    u.indices.dtype = bad;
    EXPECT_TRUE(
        IsError(u.run(), Code::invalid_argument, {"indices", "i64", "i32", dtype_name(bad)}));
    EXPECT_TRUE(u.guards_ok());
    EXPECT_TRUE(IsError(max_unpool_kernel_name(2, u.values, bad, u.o, &name),
                        Code::invalid_argument, {"indices", dtype_name(bad)}));
  }
}

// The output tensor `out` of a Call in another dtype than its input `in`: refused, naming `out`
// and both dtypes; `bads` against the f32 default, then (when compiled) f16 against bf16, the
// two kinds of 16-bit floats (the f32 buffers are big enough; nothing is read).
template <typename Call>
void ExpectOtherOutputDTypeRefused(TensorView Call::*in, TensorView Call::*out, const char* name,
                                   std::initializer_list<DType> bads) {
  for (DType bad : bads) {
    EXPECT_TRUE(FailsWhen<Call>([&](Call& c) { (c.*out).dtype = bad; }, Code::invalid_argument,
                                {name, "f32", dtype_name(bad)}));
  }
  if (pool_dtype_compiled(DType::f16)) {
    EXPECT_TRUE(FailsWhen<Call>(
        [&](Call& c) {
          (c.*in).dtype = DType::f16;
          (c.*out).dtype = DType::bf16;
        },
        Code::invalid_argument, {name, "f16", "bf16"}));
  }
}

TEST(DTypeErrors, PoolValuesDTypeDiffersFromInput) {
  // i32: the same width as f32.
  ExpectOtherOutputDTypeRefused(&PoolCall::input, &PoolCall::values, "values",
                                {DType::f64, DType::i32, DType::f16});
}

TEST(DTypeErrors, UnpoolOutputDTypeDiffersFromValues) {
  // One 16-bit unpooling kernel serves f16 and bf16; still refused. The guard elements around
  // the output are checked too (FailsWhen).
  ExpectOtherOutputDTypeRefused(&UnpoolCall::values, &UnpoolCall::output, "output",
                                {DType::i32, DType::f64, DType::bf16});
}

// A dtype code outside the enum: invalid_argument naming the tensor and the code.
TEST(DTypeErrors, UnknownDTypeCode) {
  const DType bad = static_cast<DType>(42);
  EXPECT_TRUE(FailsWhen<PoolCall>([&](PoolCall& c) { c.input.dtype = c.values.dtype = bad; },
                                  Code::invalid_argument, {"input", "42"}));
  EXPECT_TRUE(FailsWhen<PoolCall>([&](PoolCall& c) { c.indices.dtype = bad; },
                                  Code::invalid_argument, {"indices", "42"}));
  EXPECT_TRUE(FailsWhen<UnpoolCall>([&](UnpoolCall& c) { c.values.dtype = c.output.dtype = bad; },
                                    Code::invalid_argument, {"values", "42"}));  // guards too
}

// A value dtype left out of the build (POOLGEN_VALUE_TYPES) is unsupported, naming the dtype.
TEST(DTypeErrors, ValueDTypeNotCompiled) {
  int missing = 0;
  for (DType value : test::kAllDTypes) {
    if (pool_dtype_compiled(value)) continue;
    ++missing;
    SCOPED_TRACE(dtype_name(value));
    std::vector<int64_t> in(72), vals(18);  // 8 bytes an element: big enough for any dtype
    PoolCall c;
    c.input = contiguous(in.data(), value, c.in_shape);
    c.values = contiguous(vals.data(), value, c.out_shape);
    EXPECT_TRUE(IsError(c.run(), Code::unsupported, {"input", dtype_name(value)}));
    // Unpooling moves bits: without any kernel of the dtype's width it is unsupported too.
    bool width_compiled = false;
    for (const KernelInfo& k : compiled_kernels()) {
      width_compiled = width_compiled || (k.op.rfind("unpool", 0) == 0 &&
                                          dtype_size(k.value_dtype) == dtype_size(value));
    }
    if (!width_compiled) {
      UnpoolCall u;
      std::vector<int64_t> uv(18), uo(72);
      u.values = contiguous(uv.data(), value, u.in_shape);
      u.output = contiguous(uo.data(), value, u.out_shape);
      EXPECT_TRUE(IsError(u.run(), Code::unsupported, {dtype_name(value)}));
    }
  }
  if (missing == 0) GTEST_SKIP() << "every value dtype is compiled in this build";
}

// i32 indices cannot name an element of a plane of 2^31 or more: refused before any data is
// touched (the pointers are fake: any access would crash), naming i32 and the plane size.
::testing::AssertionResult IsI32Refusal(const Status& s, std::initializer_list<std::string> parts) {
  if (s.code() != Code::invalid_argument && s.code() != Code::unsupported) {
    return ::testing::AssertionFailure()
           << "code " << static_cast<int>(s.code()) << ", expected invalid_argument or unsupported"
           << " (message: \"" << s.message() << "\")";
  }
  const std::string& m = s.message();
  if (m.find("i32") == std::string::npos && m.find("int32") == std::string::npos) {
    return ::testing::AssertionFailure()
           << "message \"" << m << "\" mentions neither i32 nor int32";
  }
  for (const std::string& p : parts) {
    if (m.find(p) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message \"" << m << "\" does not contain \"" << p << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(DTypeErrors, I32IndicesForPlanesOf2To31Elements) {
  void* const fake = reinterpret_cast<void*>(uintptr_t{0x1000});
  const int64_t plane = int64_t{65536} * 32769;  // 2147549184 = 2^31 + 65536
  const Ints in_shape{1, 1, 65536, 32769}, out_shape{1, 1, 32768, 16384};
  PoolOptions o;
  o.kernel_size = {2};
  for (bool cl : {false, true}) {
    SCOPED_TRACE(cl ? "channels-last" : "contiguous");
    auto view = [&](DType t, const Ints& shape) {
      return cl ? channels_last(fake, t, shape) : contiguous(fake, t, shape);
    };
    EXPECT_TRUE(IsI32Refusal(max_pool(2, view(DType::f32, in_shape), view(DType::f32, out_shape),
                                      view(DType::i32, out_shape), o),
                             {"indices", std::to_string(plane)}));
    // Unpooling: values planes are small, the output plane (from output_size) is too big.
    UnpoolOptions u;
    u.kernel_size = {2};
    u.output_size = {65536, 32769};  // default 65536 x 32768, allowed up to +1
    Ints s;
    ASSERT_TRUE(max_unpool_output_shape(2, out_shape, u, &s).ok());
    ASSERT_EQ(s, in_shape);
    EXPECT_TRUE(IsI32Refusal(max_unpool(2, view(DType::f32, out_shape), view(DType::i32, out_shape),
                                        view(DType::f32, in_shape), u),
                             {"indices", std::to_string(plane)}));
  }
}

// The same f16 bits, or both NaN.
::testing::AssertionResult SameF16(f16_t got, f16_t want) {
  const bool nan = (want.bits & 0x7fff) > 0x7c00;
  if (nan ? (got.bits & 0x7fff) > 0x7c00 : got.bits == want.bits) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "0x" << std::hex << got.bits << " vs 0x" << want.bits;
}

TEST(CApi, F16ChannelsLastWithI32Indices) {
  if (!pool_dtype_compiled(DType::f16)) GTEST_SKIP() << "f16 is not compiled in this build";
  const Ints in_shape{1, 2, 6, 6}, out_shape{1, 2, 3, 3};
  // Logical values with ties, NaN and -inf, stored channels-last: (N, H, W, C).
  std::vector<f16_t> logical(72);
  for (size_t i = 0; i < logical.size(); ++i) {
    logical[i] = test::to_f16(static_cast<float>((i * 7) % 5) * 0.5f);
  }
  logical[9] = f16_t{0x7e00};   // NaN
  logical[30] = f16_t{0xfc00};  // -inf
  std::vector<f16_t> in(72);
  for (int64_t c = 0; c < 2; ++c) {
    for (int64_t h = 0; h < 6; ++h) {
      for (int64_t w = 0; w < 6; ++w) in[(h * 6 + w) * 2 + c] = logical[(c * 6 + h) * 6 + w];
    }
  }
  std::vector<f16_t> vals(18 + 2 * test::kGuard, f16_t{0x5a5a});
  std::vector<int32_t> idx(18 + 2 * test::kGuard, 0x5a5a5a5a);
  poolgen_tensor input = c_tensor(in.data(), POOLGEN_F16, in_shape);
  const int64_t in_strides[4] = {72, 1, 12, 2};
  std::copy(in_strides, in_strides + 4, input.strides);
  poolgen_tensor values = c_tensor(vals.data() + test::kGuard, POOLGEN_F16, out_shape);
  const int64_t out_strides[4] = {18, 1, 6, 2};
  std::copy(out_strides, out_strides + 4, values.strides);
  poolgen_tensor indices = c_tensor(idx.data() + test::kGuard, POOLGEN_I32, out_shape);
  poolgen_pool_options o;
  std::memset(&o, 0, sizeof o);
  o.kernel_size[0] = o.kernel_size[1] = 2;
  char message[kMsg] = {};
  ASSERT_EQ(poolgen_max_pool(2, &input, &values, &indices, &o, message, kMsg), POOLGEN_OK)
      << message;

  PoolOptions po;
  po.kernel_size = {2};
  Ints shape;
  std::vector<f16_t> ref_values;
  std::vector<int64_t> ref_indices;
  ASSERT_TRUE(
      ref::max_pool<f16_t>(2, in_shape, logical, po, &shape, &ref_values, &ref_indices).ok());
  for (int64_t c = 0; c < 2; ++c) {
    for (int64_t k = 0; k < 9; ++k) {
      EXPECT_TRUE(SameF16(vals[test::kGuard + k * 2 + c], ref_values[c * 9 + k]))
          << "value (c " << c << ", " << k << ")";
      EXPECT_EQ(idx[test::kGuard + c * 9 + k], ref_indices[c * 9 + k]) << "c " << c << " k " << k;
    }
  }
  EXPECT_TRUE(test::guards_intact(vals, f16_t{0x5a5a}));
  EXPECT_TRUE(test::guards_intact(idx, int32_t{0x5a5a5a5a}));

  // Back through the C unpooling: channels-last f16 values, i32 indices, channels-last output.
  std::vector<f16_t> out(72 + 2 * test::kGuard, f16_t{0x5a5a});
  poolgen_tensor output = c_tensor(out.data() + test::kGuard, POOLGEN_F16, in_shape);
  std::copy(in_strides, in_strides + 4, output.strides);
  poolgen_unpool_options u;
  std::memset(&u, 0, sizeof u);
  u.kernel_size[0] = u.kernel_size[1] = 2;
  ASSERT_EQ(poolgen_max_unpool(2, &values, &indices, &output, &u, message, kMsg), POOLGEN_OK)
      << message;
  UnpoolOptions uo;
  uo.kernel_size = {2};
  std::vector<f16_t> ref_out;
  ASSERT_TRUE(
      ref::max_unpool<f16_t>(2, out_shape, ref_values, ref_indices, uo, &shape, &ref_out).ok());
  for (int64_t c = 0; c < 2; ++c) {
    for (int64_t k = 0; k < 36; ++k) {
      EXPECT_TRUE(SameF16(out[test::kGuard + k * 2 + c], ref_out[c * 36 + k]))
          << "output (c " << c << ", " << k << ")";
    }
  }
  EXPECT_TRUE(test::guards_intact(out, f16_t{0x5a5a}));
}

TEST(CApi, BadDTypeCode) {
  for (int32_t bad : {42, -1}) {
    SCOPED_TRACE(bad);
    const std::string code = std::to_string(bad);
    EXPECT_TRUE(FailsWhen<CPool>([&](CPool& c) { c.input.dtype = c.values.dtype = bad; },
                                 POOLGEN_INVALID_ARGUMENT, {"input", code}));
    EXPECT_TRUE(FailsWhen<CPool>([&](CPool& c) { c.indices.dtype = bad; },
                                 POOLGEN_INVALID_ARGUMENT, {"indices", code}));
    // Unpooling: the guard elements around the output are checked too.
    EXPECT_TRUE(FailsWhen<CUnpool>([&](CUnpool& c) { c.values.dtype = bad; },
                                   POOLGEN_INVALID_ARGUMENT, {"values", code}));
    EXPECT_TRUE(FailsWhen<CUnpool>([&](CUnpool& c) { c.output.dtype = bad; },
                                   POOLGEN_INVALID_ARGUMENT, {"output", code}));
    EXPECT_TRUE(FailsWhen<CUnpool>([&](CUnpool& c) { c.indices.dtype = bad; },
                                   POOLGEN_INVALID_ARGUMENT, {"indices", code}));
  }
}


// ---------------------------------------------------------------------------------------------
// Arguments sharing memory: an output whose bytes (first element to last) overlap an input's or
// another output's is refused before anything is written; inputs may overlap each other; views
// that only touch are accepted and computed as usual.

enum class ViewKind { contiguous, channels_last, strided };

const char* kind_name(ViewKind kind) {
  return kind == ViewKind::contiguous ? "contiguous"
         : kind == ViewKind::channels_last ? "channels-last"
                                           : "strided";
}

// A view of `shape` at `data`; strided views take every other element of the innermost
// dimension (served through packed copies).
TensorView view_of(void* data, DType dtype, const Ints& shape, ViewKind kind) {
  if (kind == ViewKind::channels_last) return channels_last(data, dtype, shape);
  TensorView v = contiguous(data, dtype, shape);
  if (kind == ViewKind::strided) {
    v.strides.assign(shape.size(), 2);
    for (size_t d = shape.size() - 1; d-- > 0;) v.strides[d] = v.strides[d + 1] * shape[d + 1];
  }
  return v;
}

std::vector<int64_t> offsets_of(const TensorView& v) {
  return test::element_offsets(v.shape, v.strides, 0);
}

// The bytes from a view's first element to the end of its last (the span the library compares).
int64_t span_bytes(const TensorView& v) {
  const std::vector<int64_t> o = offsets_of(v);
  return (*std::max_element(o.begin(), o.end()) + 1) * static_cast<int64_t>(dtype_size(v.dtype));
}

char* bytes_of(const TensorView& v) { return static_cast<char*>(v.data); }

// Elements of a view in logical order, as int64 (i64 or i32 indices) or as T.
template <typename T>
std::vector<T> read_view(const TensorView& v) {
  std::vector<T> out;
  for (int64_t o : offsets_of(v)) {
    if constexpr (std::is_same_v<T, int64_t>) {
      out.push_back(v.dtype == DType::i32 ? reinterpret_cast<const int32_t*>(v.data)[o]
                                          : reinterpret_cast<const int64_t*>(v.data)[o]);
    } else {
      out.push_back(static_cast<const T*>(v.data)[o]);
    }
  }
  return out;
}

template <typename T>
void write_view(const TensorView& v, const std::vector<T>& elements) {
  const std::vector<int64_t> offsets = offsets_of(v);
  for (size_t k = 0; k < offsets.size(); ++k) {
    if constexpr (std::is_same_v<T, int64_t>) {
      if (v.dtype == DType::i32) {
        reinterpret_cast<int32_t*>(v.data)[offsets[k]] = static_cast<int32_t>(elements[k]);
        continue;
      }
    }
    static_cast<T*>(v.data)[offsets[k]] = elements[k];
  }
}

poolgen_tensor c_view(const TensorView& v) {
  poolgen_tensor t = c_tensor(v.data, static_cast<int32_t>(v.dtype), v.shape);
  std::copy(v.strides.begin(), v.strides.end(), t.strides);
  return t;
}

// A k2s2 pooling or unpooling call (2-D, 2x3x4x4 <-> 2x3x2x2) whose views live in one arena,
// each argument in its own 4 KiB slot until a test moves one next to another.
struct ArenaCall {
  bool unpool = false;
  std::vector<int64_t> words = std::vector<int64_t>(5 * 512);
  std::vector<std::string> names;  // in the op's argument order; the last are its outputs
  std::vector<TensorView> views;

  ArenaCall(bool is_unpool, ViewKind kind, DType index_dtype) : unpool(is_unpool) {
    const Ints big{2, 3, 4, 4}, small{2, 3, 2, 2};
    names = unpool ? std::vector<std::string>{"values", "indices", "output"}
                   : std::vector<std::string>{"input", "values", "indices"};
    const Ints shapes[] = {unpool ? small : big, small, unpool ? big : small};
    const DType dtypes[] = {DType::f32, unpool ? index_dtype : DType::f32,
                            unpool ? DType::f32 : index_dtype};
    for (int k = 0; k < 3; ++k) views.push_back(view_of(slot(k), dtypes[k], shapes[k], kind));
  }
  // The views point into `words`: a move keeps them valid, a copy would not.
  ArenaCall(const ArenaCall&) = delete;
  ArenaCall(ArenaCall&&) = default;
  char* slot(int k) { return reinterpret_cast<char*>(words.data()) + 4096 * (k + 1); }
  TensorView& operator[](const std::string& name) {
    return views[std::find(names.begin(), names.end(), name) - names.begin()];
  }
  const TensorView& at(const std::string& name) const {
    return views[std::find(names.begin(), names.end(), name) - names.begin()];
  }
  bool is_output(const std::string& name) const {
    return unpool ? name == "output" : name != "input";
  }

  // Outputs get a sentinel, then the inputs their data (indices last: they must stay valid
  // where the values' view reads the same bytes).
  void fill() {
    for (const std::string& name : names) {
      if (!is_output(name)) continue;
      if (at(name).dtype == DType::f32) {
        write_view(at(name), std::vector<float>(offsets_of(at(name)).size(), test::kSentinelF));
      } else {
        write_view(at(name), std::vector<int64_t>(offsets_of(at(name)).size(), test::kSentinelI));
      }
    }
    const TensorView& data = at(unpool ? "values" : "input");
    std::vector<float> v(offsets_of(data).size());
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>((k * 37) % 23) - 7.0f;
    write_view(data, v);
    if (unpool) {
      // An index inside each cell's 2x2 window of the 4x4 plane.
      std::vector<int64_t> idx(v.size());
      for (size_t k = 0; k < idx.size(); ++k) {
        const int64_t cell = static_cast<int64_t>(k % 4);
        idx[k] = (2 * (cell / 2) + (k / 3) % 2) * 4 + 2 * (cell % 2) + (k / 5) % 2;
      }
      write_view(at("indices"), idx);
    }
  }

  Status run(bool c_api) const {
    if (!c_api) {
      if (unpool) {
        UnpoolOptions o;
        o.kernel_size = {2};
        return max_unpool(2, views[0], views[1], views[2], o);
      }
      PoolOptions o;
      o.kernel_size = {2};
      return max_pool(2, views[0], views[1], views[2], o);
    }
    const poolgen_tensor a = c_view(views[0]), b = c_view(views[1]), c = c_view(views[2]);
    char message[kMsg];
    int32_t code;
    if (unpool) {
      poolgen_unpool_options o;
      std::memset(&o, 0, sizeof o);
      o.kernel_size[0] = o.kernel_size[1] = 2;
      code = poolgen_max_unpool(2, &a, &b, &c, &o, message, sizeof message);
    } else {
      poolgen_pool_options o;
      std::memset(&o, 0, sizeof o);
      o.kernel_size[0] = o.kernel_size[1] = 2;
      code = poolgen_max_pool(2, &a, &b, &c, &o, message, sizeof message);
    }
    return code == POOLGEN_OK ? Status() : Status(static_cast<Code>(code), message);
  }

  bool built() const {
    const DType index = views[unpool ? 1 : 2].dtype;
    return unpool ? test::unpool_kernel_built(DType::f32, index)
                  : test::pool_kernel_built(DType::f32, index);
  }

  // Runs the call, which must succeed with the reference's result (where its kernel is built)
  // and leave its inputs as they were.
  ::testing::AssertionResult RunsLikeReference(bool c_api) {
    fill();
    const std::vector<float> data = read_view<float>(views[0]);
    const std::vector<int64_t> indices = unpool ? read_view<int64_t>(views[1]) : std::vector<int64_t>{};
    const Status st = run(c_api);
    if (!built()) {
      if (st.code() == Code::unsupported) return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure() << "expected unsupported (no kernel), got " << st.message();
    }
    if (!st.ok()) return ::testing::AssertionFailure() << "refused: " << st.message();
    if (read_view<float>(views[0]) != data ||
        (unpool && read_view<int64_t>(views[1]) != indices)) {
      return ::testing::AssertionFailure() << "an input changed";
    }
    Ints shape;
    std::vector<float> want;
    if (unpool) {
      UnpoolOptions o;
      o.kernel_size = {2};
      if (!ref::max_unpool<float>(2, views[0].shape, data, indices, o, &shape, &want).ok()) {
        return ::testing::AssertionFailure() << "the reference refuses";
      }
      return test::same_floats(want, read_view<float>(views[2]));
    }
    PoolOptions o;
    o.kernel_size = {2};
    std::vector<int64_t> want_indices;
    if (!ref::max_pool<float>(2, views[0].shape, data, o, &shape, &want, &want_indices).ok()) {
      return ::testing::AssertionFailure() << "the reference refuses";
    }
    ::testing::AssertionResult values = test::same_floats(want, read_view<float>(views[1]));
    if (!values) return values;
    return test::same_ints(want_indices, read_view<int64_t>(views[2]));
  }

  // Runs the call, which must be refused as an overlap of `bytes` between `output` and `other`
  // without a byte of the arena written.
  ::testing::AssertionResult RefusesOverlap(bool c_api, const std::string& output,
                                            const std::string& other, int64_t bytes) {
    fill();
    const std::vector<int64_t> before = words;
    const std::string owner = other + (other.back() == 's' ? "'" : "'s");
    ::testing::AssertionResult r =
        IsError(run(c_api), Code::invalid_argument,
                {output + ": expected memory apart from " + owner,
                 "got an overlap of " + std::to_string(bytes) + " bytes"});
    if (r && words != before) return ::testing::AssertionFailure() << "memory was written";
    return r;
  }
};

// The four calls of the report that asked for the check, each refused with its overlap.
TEST(OverlapErrors, OutputsInsideInputsOrEachOther) {
  for (bool c_api : {false, true}) {
    SCOPED_TRACE(c_api ? "C API" : "C++ API");
    {
      ArenaCall pool(false, ViewKind::contiguous, DType::i64);  // input: 384 bytes
      pool["values"].data = pool["input"].data;                 // values: 96 bytes
      EXPECT_TRUE(pool.RefusesOverlap(c_api, "values", "input", 96));
    }
    {
      ArenaCall pool(false, ViewKind::contiguous, DType::i64);
      pool["indices"].data = bytes_of(pool["input"]) + 64;  // indices: 192 bytes
      EXPECT_TRUE(pool.RefusesOverlap(c_api, "indices", "input", 192));
    }
    {
      ArenaCall unpool(true, ViewKind::contiguous, DType::i64);
      unpool["output"].data = unpool["values"].data;
      EXPECT_TRUE(unpool.RefusesOverlap(c_api, "output", "values", 96));
    }
    {
      ArenaCall pool(false, ViewKind::contiguous, DType::i64);
      pool["indices"].data = bytes_of(pool["values"]) + 32;
      EXPECT_TRUE(pool.RefusesOverlap(c_api, "indices", "values", 64));
    }
  }
}

// Every output against every other argument, in every layout and index type, through both APIs:
// placed at the same start, from the other's last element, ending in the other's first element
// (refused), or ending right before it or starting right after it (accepted).
TEST(OverlapErrors, EveryPairOfArguments) {
  struct Pair {
    bool unpool;
    const char* output;  // the argument the error names (the later output of two)
    const char* other;
  };
  const Pair pairs[] = {{false, "values", "input"},
                        {false, "indices", "input"},
                        {false, "indices", "values"},
                        {true, "output", "values"},
                        {true, "output", "indices"}};
  int exact_touches = 0;
  for (const Pair& pair : pairs) {
    for (ViewKind kind : {ViewKind::contiguous, ViewKind::channels_last, ViewKind::strided}) {
      for (DType index : {DType::i64, DType::i32}) {
        for (bool c_api : {false, true}) {
          SCOPED_TRACE(std::string(pair.output) + " and " + pair.other + ", " + kind_name(kind) +
                       ", " + dtype_name(index) + " indices, " + (c_api ? "C API" : "C++ API"));
          const ArenaCall base(pair.unpool, kind, index);
          const TensorView& out = base.at(pair.output);
          const TensorView& other = base.at(pair.other);
          const int64_t out_span = span_bytes(out), other_span = span_bytes(other);
          const int64_t elem = static_cast<int64_t>(dtype_size(out.dtype));
          // Moves the output to `shift` bytes from the other argument's first byte.
          auto moved = [&](int64_t shift) {
            ArenaCall c(pair.unpool, kind, index);
            c[pair.output].data = bytes_of(c[pair.other]) + shift;
            return c;
          };
          EXPECT_TRUE(moved(0).RefusesOverlap(c_api, pair.output, pair.other,
                                              std::min(out_span, other_span)));
          const int64_t last = (other_span - 1) / elem * elem;
          EXPECT_TRUE(moved(last).RefusesOverlap(c_api, pair.output, pair.other,
                                                 std::min(other_span - last, out_span)));
          EXPECT_TRUE(moved(elem - out_span)
                          .RefusesOverlap(c_api, pair.output, pair.other, elem));
          // Touching: the output ends one byte before the other begins, or begins at the first
          // aligned byte after the other's last.
          EXPECT_TRUE(moved(-out_span).RunsLikeReference(c_api));
          const int64_t after = (other_span + elem - 1) / elem * elem;
          exact_touches += after == other_span;
          EXPECT_TRUE(moved(after).RunsLikeReference(c_api));
        }
      }
    }
  }
  EXPECT_GT(exact_touches, 0);  // some outputs begin exactly one byte after the other's end
}

// Inputs are only read: they may share memory (here the values read the indices' bytes).
TEST(OverlapErrors, InputsMayOverlap) {
  for (ViewKind kind : {ViewKind::contiguous, ViewKind::channels_last, ViewKind::strided}) {
    for (DType index : {DType::i64, DType::i32}) {
      for (bool c_api : {false, true}) {
        SCOPED_TRACE(std::string(kind_name(kind)) + ", " + dtype_name(index) + " indices, " +
                     (c_api ? "C API" : "C++ API"));
        ArenaCall unpool(true, kind, index);
        unpool["values"].data = unpool["indices"].data;
        EXPECT_TRUE(unpool.RunsLikeReference(c_api));
      }
    }
  }
}

// The test is on byte spans: views of one buffer that interleave without sharing an element
// are refused too (documented), while views without elements never overlap anything.
TEST(OverlapErrors, SpansDecide) {
  ArenaCall pool(false, ViewKind::strided, DType::i32);  // values and indices: 4-byte elements
  pool["indices"].data = bytes_of(pool["values"]) + 4;  // in the gaps between the values
  EXPECT_TRUE(pool.RefusesOverlap(false, "indices", "values", span_bytes(pool["values"]) - 4));

  std::vector<float> memory(16);
  PoolOptions o;
  o.kernel_size = {2};
  const Status st = max_pool(2, contiguous(memory.data(), {0, 3, 4, 4}),
                             contiguous(memory.data(), {0, 3, 2, 2}),
                             contiguous(reinterpret_cast<int64_t*>(memory.data()), {0, 3, 2, 2}), o);
  EXPECT_TRUE(st.ok() || st.code() == Code::unsupported) << st.message();
}

}  // namespace
}  // namespace poolgen
