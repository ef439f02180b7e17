// Every error path of the public C++ API (poolgen.hpp) and the C API (poolgen.h), forward and
// backward ops: the code, and a message naming the argument and the offending value. Invalid
// unpool indices must be named (the first in input order) and must never cause a write outside
// the output.
#include <algorithm>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "c_tensors.hpp"
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

// An error's structured fields agree with its code and message: the argument is the message's
// first word, and the kind is one the code allows (docs/errors.md, "Error kinds").
::testing::AssertionResult KindAndArgumentAgree(Code code, ErrorKind kind,
                                                const std::string& argument,
                                                const std::string& message) {
  const std::string prefix = message.substr(0, message.find(':'));
  if (code != Code::internal && prefix != argument) {
    return ::testing::AssertionFailure() << "argument \"" << argument << "\", expected \""
                                         << prefix << "\" (message: \"" << message << "\")";
  }
  bool allowed = false;
  switch (code) {
    case Code::ok: allowed = kind == ErrorKind::none; break;
    case Code::invalid_argument:
      allowed = kind == ErrorKind::option || kind == ErrorKind::tensor;
      break;
    case Code::index_out_of_range: allowed = kind == ErrorKind::index; break;
    case Code::unsupported:
      allowed = kind == ErrorKind::option || kind == ErrorKind::tensor ||
                kind == ErrorKind::no_kernel || kind == ErrorKind::no_device;
      break;
    case Code::internal: allowed = kind == ErrorKind::internal; break;
  }
  if (!allowed) {
    return ::testing::AssertionFailure() << "kind " << static_cast<int>(kind) << " for code "
                                         << static_cast<int>(code) << " (message: \"" << message
                                         << "\")";
  }
  return ::testing::AssertionSuccess();
}

// The status has `code`, its message has the uniform form "<argument>: expected ..., got ..."
// (docs/errors.md) and contains every one of `parts`; its kind and argument agree with them.
::testing::AssertionResult IsError(const Status& s, Code code,
                                   const std::vector<std::string>& parts) {
  if (::testing::AssertionResult r =
          KindAndArgumentAgree(s.code(), s.kind(), s.argument(), s.message());
      !r) {
    return r;
  }
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

// A C API call's result `code` and `message` as a Status, with poolgen_last_error's kind and
// argument (its code must be `code`).
Status CStatus(int32_t code, const char* message) {
  const poolgen_error last = poolgen_last_error();
  const std::string text = code == POOLGEN_OK ? "" : message;
  if (last.code != code || (code != POOLGEN_OK && code != POOLGEN_INTERNAL &&
                            text.substr(0, text.find(':')) != last.argument)) {
    return Status(Code::internal, "poolgen_last_error: code " + std::to_string(last.code) +
                                      " naming \"" + last.argument + "\", expected code " +
                                      std::to_string(code) + " and the message's argument");
  }
  return Status(static_cast<Code>(code), text, static_cast<ErrorKind>(last.kind));
}

// The same for a C API result and message.
::testing::AssertionResult CIsError(int32_t got, int32_t code, const char* message,
                                    const std::vector<std::string>& parts) {
  return IsError(CStatus(got, message), static_cast<Code>(code), parts);
}

template <typename Call, typename = void>
struct HasOutputGuard : std::false_type {};
template <typename Call>
struct HasOutputGuard<Call, std::void_t<decltype(std::declval<const Call&>().guards_ok())>>
    : std::true_type {};

// Calls whose whole output can be checked after a refusal (output_untouched()).
template <typename Call, typename = void>
struct HasUntouchedOutput : std::false_type {};
template <typename Call>
struct HasUntouchedOutput<
    Call, std::void_t<decltype(std::declval<const Call&>().output_untouched())>>
    : std::true_type {};

template <typename Call, typename Break, typename CodeT>
::testing::AssertionResult FailsOnce(Break breaks, CodeT code,
                                     const std::vector<std::string>& parts) {
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
  if constexpr (HasUntouchedOutput<Call>::value) {
    if (r && static_cast<int>(code) != static_cast<int>(Code::index_out_of_range) &&
        !c.output_untouched()) {
      return ::testing::AssertionFailure() << "the refused call wrote its output";
    }
  }
  return r;
}

// A default Call (PoolCall, UnpoolCall, CPool, CUnpool, the backward calls below) broken in one
// way by `breaks` (a function of Call&): running it fails with `code` and a message containing
// every one of `parts`; a call with guard elements around its output leaves them untouched, and
// one whose whole output is checked leaves it as it was unless the error is index_out_of_range
// (found while the output is written: docs/errors.md). Twice: on a thread of its own, whose
// runtime remembers no call, and after the valid default call on this thread, whose checks
// the runtime then remembers (runtime/ops/call_memo.hpp): a call breaking only its data (null, or
// overlapping) takes that plan, and must be refused all the same.
template <typename Call, typename Break, typename CodeT>
::testing::AssertionResult FailsWhen(Break breaks, CodeT code,
                                     const std::vector<std::string>& parts) {
  ::testing::AssertionResult alone = ::testing::AssertionSuccess();
  std::thread([&] { alone = FailsOnce<Call>(breaks, code, parts); }).join();
  if (!alone) return alone << " (on a fresh thread)";
  Call valid;
  valid.run();
  ::testing::AssertionResult after = FailsOnce<Call>(breaks, code, parts);
  if (!after) return after << " (after a valid call of the default shapes)";
  return after;
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

// Unpooling by the indices alone (no kernel_size): output_size gives the extents, any >= 1; a
// stride or padding without a kernel is refused, and so is a missing or short output_size.
TEST(UnpoolErrors, ByIndicesAlone) {
  UnpoolCall c;
  c.o.kernel_size = {};
  c.o.output_size = {6, 6};
  Status st = c.run();
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(c.guards_ok());
  EXPECT_EQ(c.out[test::kGuard + 4], 2.0f);  // value 1's index, 4
  for (const Ints& any : {Ints{2, 100}, Ints{1, 1, 1, 9}, Ints{3, 3}}) {
    c.o.output_size = any;
    Ints shape;
    st = max_unpool_output_shape(2, c.values.shape, c.o, &shape);
    EXPECT_TRUE(st.ok()) << test::str(any) << ": " << st.message();
    EXPECT_EQ(shape, (Ints{2, 1, any[any.size() - 2], any.back()}));
  }
  c.o.output_size = {3, 3};  // indices 0, 4, 8 fit a 3x3 plane, 12 (element 3) does not
  c.output.shape = {2, 1, 3, 3};
  EXPECT_TRUE(IsError(c.run(), Code::index_out_of_range, {"got 12 at element 3", "9 elements"}));
  EXPECT_TRUE(c.guards_ok());
  c.output.shape = c.out_shape;
  c.o.output_size = {6, 0};
  EXPECT_UNPOOL_ERROR(c, Code::invalid_argument,
                      {"output_size: expected spatial dimension 1 to be >= 1, got extent 0"});
  c.o.output_size = {6};
  EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"output_size", "got 1"});
  c.o.output_size = {};  // nothing says where the values go
  EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"kernel_size", "got 0"});
  c.o.output_size = {6, 6};
  c.o.stride = {2};
  EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"stride: expected none without a kernel_size"});
  c.o.stride = {};
  c.o.padding = {0, 1};
  EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"padding: expected 0 without a kernel_size"});
  c.o.padding = {0, 0, 0};  // zeros, but not 1 or nd of them
  EXPECT_UNPOOL_ERROR(c, Code::invalid_argument, {"padding: expected 1 or 2 entries, got 3"});
  c.o.padding = {0};
  EXPECT_TRUE(c.run().ok());
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

using test::c_tensor;

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

// A failing C call, call(message, message_size) returning `code`: its message truncated to
// message_size - 1 bytes and NUL-terminated, no byte past message_size written, nothing written
// for size 0, and a NULL message accepted.
template <typename CCall>
void ExpectCMessageTruncated(CCall call, int32_t code) {
  char full_buffer[kMsg];
  ASSERT_EQ(call(full_buffer, kMsg), code);
  const std::string full = full_buffer;
  ASSERT_GT(full.size(), 8u);
  for (size_t size : {size_t(1), size_t(2), size_t(8)}) {
    char buf[32];
    std::memset(buf, '#', sizeof buf);
    EXPECT_EQ(call(buf, size), code);
    EXPECT_EQ(std::string(buf), full.substr(0, size - 1));
    for (size_t i = size; i < sizeof buf; ++i) EXPECT_EQ(buf[i], '#') << "byte " << i;
  }
  char buf[4] = {'#', '#', '#', '#'};
  EXPECT_EQ(call(buf, 0), code);
  EXPECT_EQ(buf[0], '#');
  EXPECT_EQ(call(nullptr, 100), code);
}

TEST(CApi, MessageTruncationAndNull) {
  CPool c;
  c.o.kernel_size[0] = 0;
  ExpectCMessageTruncated(
      [&](char* message, size_t size) {
        return poolgen_max_pool(2, &c.input, &c.values, &c.indices, &c.o, message, size);
      },
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

// The C API's unpooling by the indices alone: kernel_size all zero, output_size given.
TEST(CApi, UnpoolByIndicesAlone) {
  CUnpool c;
  std::memset(c.o.kernel_size, 0, sizeof c.o.kernel_size);
  c.o.output_size_len = 2;
  c.o.output_size[0] = c.o.output_size[1] = 6;
  ASSERT_EQ(c.run(), POOLGEN_OK) << c.message;
  EXPECT_TRUE(c.guards_ok());
  EXPECT_EQ(c.out[test::kGuard + 0], 1.5f);
  c.o.output_size[1] = 11;
  int64_t out_shape[5] = {};
  ASSERT_EQ(c.shape(out_shape), POOLGEN_OK) << c.message;
  EXPECT_EQ(Ints(out_shape, out_shape + 4), (Ints{2, 1, 6, 11}));
  c.o.output_size_len = 0;  // then kernel_size must be given
  EXPECT_TRUE(CIsError(c.run(), POOLGEN_INVALID_ARGUMENT, c.message, {"kernel_size", "0"}));
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
// (error reporting must be thread-safe), and write nothing outside its output.
// run(indices, options) makes the call with `indices` of (4, 32, 6, 6) into planes of 12x12
// (kernel 2) and returns its status and whether the guards around its output held.
template <typename Run>
void ExpectFirstOfManyInvalidIndicesNamed(Run run) {
  const Ints shape{4, 32, 6, 6};
  const int64_t n = test::numel(shape), plane_in = 36, plane_out = 144;
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
        const auto [st, guards_ok] = run(contiguous(indices.data(), shape), o);
        ASSERT_TRUE(IsError(st, Code::index_out_of_range,
                            {"indices", "got 1000 at element 17", std::to_string(plane_out)}))
            << "threads " << threads << " path " << test::path_name(path);
        ASSERT_TRUE(guards_ok);
      }
    }
  }
  set_num_threads(0);
  set_min_parallel_bytes(-1);
}

TEST(UnpoolErrors, InvalidIndicesInManyPlanesConcurrently) {
  const Ints in_shape{4, 32, 6, 6}, out_shape{4, 32, 12, 12};
  std::vector<float> values(test::numel(in_shape), 1.0f);
  ExpectFirstOfManyInvalidIndicesNamed([&](const TensorView& indices, const UnpoolOptions& o) {
    std::vector<float> out =
        test::guarded_buffer<float>(test::numel(out_shape), test::kGuardF, 0);
    const Status st = max_unpool(2, contiguous(values.data(), in_shape), indices,
                                 contiguous(out.data() + test::kGuard, out_shape), o);
    return std::make_pair(st, test::guards_intact(out, test::kGuardF));
  });
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

// The ops ArenaCall makes.
enum class ArenaOp { pool, unpool, pool_backward, unpool_backward };

// A k2s2 call of one of the ops (2-D, 2x3x4x4 <-> 2x3x2x2) whose views live in one arena, each
// argument in its own 4 KiB slot until a test moves one next to another.
struct ArenaCall {
  ArenaOp op;
  std::vector<int64_t> words = std::vector<int64_t>(5 * 512);
  std::vector<std::string> names;  // in the op's argument order; the last are its outputs
  std::vector<TensorView> views;

  ArenaCall(ArenaOp which, ViewKind kind, DType index_dtype) : op(which) {
    const Ints big{2, 3, 4, 4}, small{2, 3, 2, 2};
    const DType f32 = DType::f32;
    struct Argument {
      const char* name;
      Ints shape;
      DType dtype;
    };
    std::vector<Argument> arguments;
    switch (op) {
      case ArenaOp::pool:
        arguments = {{"input", big, f32}, {"values", small, f32}, {"indices", small, index_dtype}};
        break;
      case ArenaOp::unpool:
        arguments = {{"values", small, f32}, {"indices", small, index_dtype}, {"output", big, f32}};
        break;
      case ArenaOp::pool_backward:
        arguments = {{"grad_output", small, f32},
                     {"indices", small, index_dtype},
                     {"grad_input", big, f32}};
        break;
      case ArenaOp::unpool_backward:
        arguments = {{"grad_output", big, f32},
                     {"indices", small, index_dtype},
                     {"grad_values", small, f32}};
        break;
    }
    for (int k = 0; k < 3; ++k) {
      names.push_back(arguments[k].name);
      views.push_back(view_of(slot(k), arguments[k].dtype, arguments[k].shape, kind));
    }
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
  // Pooling has two outputs (values, indices), the other ops one (their last argument).
  bool is_output(const std::string& name) const {
    const int first_output = op == ArenaOp::pool ? 1 : 2;
    return std::find(names.begin(), names.end(), name) - names.begin() >= first_output;
  }
  bool indices_are_input() const { return op != ArenaOp::pool; }
  DType index_dtype() const { return at("indices").dtype; }

  // Outputs get a sentinel, then the inputs their data (indices last: they must stay valid
  // where another input's view reads the same bytes).
  void fill() {
    for (const std::string& name : names) {
      if (!is_output(name)) continue;
      if (at(name).dtype == DType::f32) {
        write_view(at(name), std::vector<float>(offsets_of(at(name)).size(), test::kSentinelF));
      } else {
        write_view(at(name), std::vector<int64_t>(offsets_of(at(name)).size(), test::kSentinelI));
      }
    }
    const TensorView& data = views[0];  // input, values or grad_output
    std::vector<float> v(offsets_of(data).size());
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>((k * 37) % 23) - 7.0f;
    write_view(data, v);
    if (indices_are_input()) {
      // An index inside each cell's 2x2 window of the 4x4 plane (the big shape's).
      std::vector<int64_t> idx(offsets_of(at("indices")).size());
      for (size_t k = 0; k < idx.size(); ++k) {
        const int64_t cell = static_cast<int64_t>(k % 4);
        idx[k] = (2 * (cell / 2) + (k / 3) % 2) * 4 + 2 * (cell % 2) + (k / 5) % 2;
      }
      write_view(at("indices"), idx);
    }
  }

  Status run(bool c_api) const {
    UnpoolOptions u;
    u.kernel_size = {2};
    PoolOptions p;
    p.kernel_size = {2};
    if (!c_api) {
      switch (op) {
        case ArenaOp::pool: return max_pool(2, views[0], views[1], views[2], p);
        case ArenaOp::unpool: return max_unpool(2, views[0], views[1], views[2], u);
        case ArenaOp::pool_backward: return max_pool_backward(2, views[0], views[1], views[2], p);
        case ArenaOp::unpool_backward:
          return max_unpool_backward(2, views[0], views[1], views[2], u);
      }
    }
    const poolgen_tensor a = c_view(views[0]), b = c_view(views[1]), c = c_view(views[2]);
    char message[kMsg];
    poolgen_unpool_options cu;
    std::memset(&cu, 0, sizeof cu);
    cu.kernel_size[0] = cu.kernel_size[1] = 2;
    poolgen_pool_options cp;
    std::memset(&cp, 0, sizeof cp);
    cp.kernel_size[0] = cp.kernel_size[1] = 2;
    int32_t code = POOLGEN_INTERNAL;
    switch (op) {
      case ArenaOp::pool: code = poolgen_max_pool(2, &a, &b, &c, &cp, message, kMsg); break;
      case ArenaOp::unpool: code = poolgen_max_unpool(2, &a, &b, &c, &cu, message, kMsg); break;
      case ArenaOp::pool_backward:
        code = poolgen_max_pool_backward(2, &a, &b, &c, &cp, message, kMsg);
        break;
      case ArenaOp::unpool_backward:
        code = poolgen_max_unpool_backward(2, &a, &b, &c, &cu, message, kMsg);
        break;
    }
    return CStatus(code, message);
  }

  bool built() const {
    switch (op) {
      case ArenaOp::pool: return test::pool_kernel_built(DType::f32, index_dtype());
      case ArenaOp::unpool: return test::unpool_kernel_built(DType::f32, index_dtype());
      case ArenaOp::pool_backward:
        return test::pool_backward_kernel_built(DType::f32, index_dtype());
      case ArenaOp::unpool_backward:
        return test::unpool_backward_kernel_built(DType::f32, index_dtype());
    }
    return false;
  }

  // The reference's outputs of the call on `data` (views[0]'s elements) and `indices` (the
  // indices' elements where they are an input), in argument order.
  Status reference(const std::vector<float>& data, const std::vector<int64_t>& indices,
                   std::vector<float>* values, std::vector<int64_t>* index_output) const {
    PoolOptions p;
    p.kernel_size = {2};
    UnpoolOptions u;
    u.kernel_size = {2};
    Ints shape;
    switch (op) {
      case ArenaOp::pool:
        return ref::max_pool<float>(2, views[0].shape, data, p, &shape, values, index_output);
      case ArenaOp::unpool:
        return ref::max_unpool<float>(2, views[0].shape, data, indices, u, &shape, values);
      case ArenaOp::pool_backward:
        return ref::max_pool_backward<float>(2, views[2].shape, data, indices, p, values);
      case ArenaOp::unpool_backward:
        return ref::max_unpool_backward<float>(2, views[2].shape, data, indices, u, values);
    }
    return Status(Code::internal, "unknown op");
  }

  // Runs the call, which must succeed with the reference's result (where its kernel is built)
  // and leave its inputs as they were.
  ::testing::AssertionResult RunsLikeReference(bool c_api) {
    fill();
    const std::vector<float> data = read_view<float>(views[0]);
    const std::vector<int64_t> indices =
        indices_are_input() ? read_view<int64_t>(at("indices")) : std::vector<int64_t>{};
    const Status st = run(c_api);
    if (!built()) {
      if (st.code() == Code::unsupported) return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure()
             << "expected unsupported (no kernel), got " << st.message();
    }
    if (!st.ok()) return ::testing::AssertionFailure() << "refused: " << st.message();
    if (read_view<float>(views[0]) != data ||
        (indices_are_input() && read_view<int64_t>(at("indices")) != indices)) {
      return ::testing::AssertionFailure() << "an input changed";
    }
    std::vector<float> want;
    std::vector<int64_t> want_indices;
    if (!reference(data, indices, &want, &want_indices).ok()) {
      return ::testing::AssertionFailure() << "the reference refuses";
    }
    if (op != ArenaOp::pool) return test::same_floats(want, read_view<float>(views[2]));
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
// The kinds bindings map to their exception types (docs/errors.md, "Error kinds"), each named
// by its argument, through the C++ and the C API.
TEST(ErrorKinds, NameTheArgumentAndWhatItIsAbout) {
  auto expect = [](const Status& s, ErrorKind kind, const char* argument) {
    EXPECT_EQ(s.kind(), kind) << s.message();
    EXPECT_EQ(s.argument(), argument) << s.message();
  };
  PoolCall bad_kernel;
  bad_kernel.o.kernel_size = {0};
  expect(bad_kernel.run(), ErrorKind::option, "kernel_size");
  PoolCall bad_shape;
  bad_shape.values.shape = {1, 2, 3, 4};
  expect(bad_shape.run(), ErrorKind::tensor, "values");
  PoolCall bad_device;
  bad_device.o.device = Device::cuda;
  const Status no_cuda = bad_device.run();
  if (!cuda_available()) expect(no_cuda, ErrorKind::no_device, "device");

  UnpoolOptions u;
  u.kernel_size = {2};
  u.output_size = {9, 9};
  std::vector<float> vals(4, 1.0f), out(16);
  std::vector<int64_t> idx{0, 2, 8, 99};
  const TensorView v = contiguous(vals.data(), {1, 1, 2, 2});
  const TensorView i = contiguous(idx.data(), {1, 1, 2, 2});
  expect(max_unpool(2, v, i, contiguous(out.data(), {1, 1, 4, 4}), u), ErrorKind::option,
         "output_size");
  u.output_size.clear();
  expect(max_unpool(2, v, i, contiguous(out.data(), {1, 1, 4, 4}), u), ErrorKind::index,
         "indices");
  expect(Status(), ErrorKind::none, "");

  // The C API: the thread's last call.
  const poolgen_tensor cv = c_view(v), ci = c_view(i),
                       co = c_view(contiguous(out.data(), {1, 1, 4, 4}));
  poolgen_unpool_options cu;
  std::memset(&cu, 0, sizeof cu);
  cu.kernel_size[0] = cu.kernel_size[1] = 2;
  char message[256];
  EXPECT_EQ(poolgen_max_unpool(2, &cv, &ci, &co, &cu, message, sizeof message),
            POOLGEN_INDEX_OUT_OF_RANGE);
  poolgen_error last = poolgen_last_error();
  EXPECT_EQ(last.code, POOLGEN_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(last.kind, POOLGEN_ERROR_INDEX);
  EXPECT_STREQ(last.argument, "indices");
  idx[3] = 10;
  EXPECT_EQ(poolgen_max_unpool(2, &cv, &ci, &co, &cu, message, sizeof message), POOLGEN_OK);
  last = poolgen_last_error();
  EXPECT_EQ(last.code, POOLGEN_OK);
  EXPECT_EQ(last.kind, POOLGEN_ERROR_NONE);
  EXPECT_STREQ(last.argument, "");
}

TEST(OverlapErrors, OutputsInsideInputsOrEachOther) {
  for (bool c_api : {false, true}) {
    SCOPED_TRACE(c_api ? "C API" : "C++ API");
    {
      ArenaCall pool(ArenaOp::pool, ViewKind::contiguous, DType::i64);  // input: 384 bytes
      pool["values"].data = pool["input"].data;                          // values: 96 bytes
      EXPECT_TRUE(pool.RefusesOverlap(c_api, "values", "input", 96));
    }
    {
      ArenaCall pool(ArenaOp::pool, ViewKind::contiguous, DType::i64);
      pool["indices"].data = bytes_of(pool["input"]) + 64;  // indices: 192 bytes
      EXPECT_TRUE(pool.RefusesOverlap(c_api, "indices", "input", 192));
    }
    {
      ArenaCall unpool(ArenaOp::unpool, ViewKind::contiguous, DType::i64);
      unpool["output"].data = unpool["values"].data;
      EXPECT_TRUE(unpool.RefusesOverlap(c_api, "output", "values", 96));
    }
    {
      ArenaCall pool(ArenaOp::pool, ViewKind::contiguous, DType::i64);
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
    ArenaOp op;
    const char* output;  // the argument the error names (the later output of two)
    const char* other;
  };
  const Pair pairs[] = {{ArenaOp::pool, "values", "input"},
                        {ArenaOp::pool, "indices", "input"},
                        {ArenaOp::pool, "indices", "values"},
                        {ArenaOp::unpool, "output", "values"},
                        {ArenaOp::unpool, "output", "indices"},
                        {ArenaOp::pool_backward, "grad_input", "grad_output"},
                        {ArenaOp::pool_backward, "grad_input", "indices"},
                        {ArenaOp::unpool_backward, "grad_values", "grad_output"},
                        {ArenaOp::unpool_backward, "grad_values", "indices"}};
  int exact_touches = 0;
  for (const Pair& pair : pairs) {
    for (ViewKind kind : {ViewKind::contiguous, ViewKind::channels_last, ViewKind::strided}) {
      for (DType index : {DType::i64, DType::i32}) {
        for (bool c_api : {false, true}) {
          SCOPED_TRACE(std::string(pair.output) + " and " + pair.other + ", " + kind_name(kind) +
                       ", " + dtype_name(index) + " indices, " + (c_api ? "C API" : "C++ API"));
          const ArenaCall base(pair.op, kind, index);
          const TensorView& out = base.at(pair.output);
          const TensorView& other = base.at(pair.other);
          const int64_t out_span = span_bytes(out), other_span = span_bytes(other);
          const int64_t elem = static_cast<int64_t>(dtype_size(out.dtype));
          // Moves the output to `shift` bytes from the other argument's first byte.
          auto moved = [&](int64_t shift) {
            ArenaCall c(pair.op, kind, index);
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

// Inputs are only read: they may share memory (here the values or the gradients read the
// indices' bytes: small integers, f32 zeros and subnormals, which add exactly).
TEST(OverlapErrors, InputsMayOverlap) {
  for (ArenaOp op : {ArenaOp::unpool, ArenaOp::pool_backward, ArenaOp::unpool_backward}) {
    for (ViewKind kind : {ViewKind::contiguous, ViewKind::channels_last, ViewKind::strided}) {
      for (DType index : {DType::i64, DType::i32}) {
        for (bool c_api : {false, true}) {
          ArenaCall call(op, kind, index);
          SCOPED_TRACE(call.names[0] + " on the indices, " + kind_name(kind) + ", " +
                       dtype_name(index) + " indices, " + (c_api ? "C API" : "C++ API"));
          call.views[0].data = call["indices"].data;
          EXPECT_TRUE(call.RunsLikeReference(c_api));
        }
      }
    }
  }
}

// The test is on byte spans: views of one buffer that interleave without sharing an element
// are refused too (documented), while views without elements never overlap anything.
TEST(OverlapErrors, SpansDecide) {
  // Values and indices of 4-byte elements.
  ArenaCall pool(ArenaOp::pool, ViewKind::strided, DType::i32);
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


// ---------------------------------------------------------------------------------------------
// The backward ops: max_pool_backward and max_unpool_backward, every error through both APIs.
// Their output (grad_input, grad_values) sits between guard elements and is filled with a
// sentinel: a refused call must leave all of it as it was (index_out_of_range aside).

// Gradient dtypes, and the others (refused as gradients).
constexpr DType kGradientDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
constexpr DType kNonGradientDTypes[] = {DType::i64, DType::i32, DType::i16, DType::i8, DType::u8};

// The indices k2s2 pooling of a 6x6 plane can give: element i of a 3x3 plane names a position
// of its own 2x2 window (all four, as i varies).
int64_t window_index(int64_t i) {
  const int64_t o = i % 9;
  return (2 * (o / 3) + (i / 9) % 2) * 6 + 2 * (o % 3) + (i / 3) % 2;
}

// max_pool_backward, k2s2: grad_output and indices 1x2x3x3, grad_input 1x2x6x6.
struct PoolBackwardCall {
  int nd = 2;
  std::vector<float> grad = std::vector<float>(18);
  std::vector<int64_t> idx = std::vector<int64_t>(18);
  std::vector<int32_t> idx32 = std::vector<int32_t>(18);
  std::vector<float> gin = test::guarded_buffer<float>(72, test::kGuardF, test::kSentinelF);
  PoolOptions o;
  TensorView grad_output, indices, grad_input;

  PoolBackwardCall() {
    o.kernel_size = {2};
    for (int64_t i = 0; i < 18; ++i) {
      grad[i] = 0.25f * static_cast<float>(i + 1);
      idx[i] = window_index(i);
    }
    grad_output = contiguous(grad.data(), {1, 2, 3, 3});
    indices = contiguous(idx.data(), {1, 2, 3, 3});
    grad_input = contiguous(gin.data() + test::kGuard, {1, 2, 6, 6});
  }
  // The same indices as i32.
  void use_i32_indices() {
    for (size_t i = 0; i < idx.size(); ++i) idx32[i] = static_cast<int32_t>(idx[i]);
    indices = contiguous(idx32.data(), indices.shape);
  }
  Status run() const { return max_pool_backward(nd, grad_output, indices, grad_input, o); }
  Status kernel_name() const {
    std::string name;
    return max_pool_backward_kernel_name(nd, grad_output, indices.dtype, grad_input.shape, o,
                                         &name);
  }
  bool guards_ok() const { return test::guards_intact(gin, test::kGuardF); }
  bool output_untouched() const { return test::untouched(gin, test::kGuardF, test::kSentinelF); }
  // grad_input against the reference (contiguous f32 views of the default shapes).
  ::testing::AssertionResult LikeReference() const {
    std::vector<float> want;
    const Status st =
        ref::max_pool_backward<float>(nd, grad_input.shape, grad, idx, o, &want);
    if (!st.ok()) return ::testing::AssertionFailure() << "reference: " << st.message();
    return test::same_floats(want, test::inner(gin));
  }
};

// max_unpool_backward, k2s2: grad_output 2x1x6x6, indices and grad_values 2x1x3x3.
struct UnpoolBackwardCall {
  int nd = 2;
  std::vector<float> grad = std::vector<float>(72);
  std::vector<double> grad64 = std::vector<double>(72), gvals64 = std::vector<double>(18);  // f64
  std::vector<int64_t> idx = std::vector<int64_t>(18);
  std::vector<int32_t> idx32 = std::vector<int32_t>(18);
  std::vector<float> gvals = test::guarded_buffer<float>(18, test::kGuardF, test::kSentinelF);
  UnpoolOptions o;
  TensorView grad_output, indices, grad_values;

  UnpoolBackwardCall() {
    o.kernel_size = {2};
    for (int64_t i = 0; i < 72; ++i) grad[i] = 0.5f * static_cast<float>(i) - 3.0f;
    for (int64_t i = 0; i < 18; ++i) idx[i] = window_index(i);
    grad_output = contiguous(grad.data(), {2, 1, 6, 6});
    indices = contiguous(idx.data(), {2, 1, 3, 3});
    grad_values = contiguous(gvals.data() + test::kGuard, {2, 1, 3, 3});
  }
  void use_i32_indices() {
    for (size_t i = 0; i < idx.size(); ++i) idx32[i] = static_cast<int32_t>(idx[i]);
    indices = contiguous(idx32.data(), indices.shape);
  }
  Status run() const { return max_unpool_backward(nd, grad_output, indices, grad_values, o); }
  Status kernel_name() const {
    std::string name;
    return max_unpool_backward_kernel_name(nd, grad_output, indices.dtype, grad_values.shape, o,
                                           &name);
  }
  bool guards_ok() const { return test::guards_intact(gvals, test::kGuardF); }
  bool output_untouched() const {
    return test::untouched(gvals, test::kGuardF, test::kSentinelF);
  }
  ::testing::AssertionResult LikeReference() const {
    std::vector<float> want;
    const Status st =
        ref::max_unpool_backward<float>(nd, grad_values.shape, grad, idx, o, &want);
    if (!st.ok()) return ::testing::AssertionFailure() << "reference: " << st.message();
    return test::same_floats(want, test::inner(gvals));
  }
};
static_assert(HasUntouchedOutput<PoolBackwardCall>::value &&
              HasUntouchedOutput<UnpoolBackwardCall>::value);

// FailsWhen, and the kernel-name query of the broken call fails alike: errors found before any
// view but grad_output's is looked at (the window, the shapes, the dtypes of grad_output and the
// indices, grad_output's strides).
template <typename Call, typename Break>
::testing::AssertionResult FailsEarlyWhen(Break breaks, Code code,
                                          const std::vector<std::string>& parts) {
  Call c;
  breaks(c);
  const ::testing::AssertionResult query = IsError(c.kernel_name(), code, parts);
  if (!query) return ::testing::AssertionFailure() << "kernel-name query: " << query.message();
  return FailsWhen<Call>(breaks, code, parts);
}

// Both backward calls broken alike (fields they share under one name).
template <typename Break>
::testing::AssertionResult BothFailEarlyWhen(Break breaks, Code code,
                                             const std::vector<std::string>& parts) {
  ::testing::AssertionResult pool = FailsEarlyWhen<PoolBackwardCall>(breaks, code, parts);
  if (!pool) return ::testing::AssertionFailure() << "max_pool_backward: " << pool.message();
  ::testing::AssertionResult unpool = FailsEarlyWhen<UnpoolBackwardCall>(breaks, code, parts);
  if (!unpool) {
    return ::testing::AssertionFailure() << "max_unpool_backward: " << unpool.message();
  }
  return ::testing::AssertionSuccess();
}

template <typename Break>
::testing::AssertionResult BothFailWhen(Break breaks, Code code,
                                        const std::vector<std::string>& parts) {
  ::testing::AssertionResult pool = FailsWhen<PoolBackwardCall>(breaks, code, parts);
  if (!pool) return ::testing::AssertionFailure() << "max_pool_backward: " << pool.message();
  ::testing::AssertionResult unpool = FailsWhen<UnpoolBackwardCall>(breaks, code, parts);
  if (!unpool) {
    return ::testing::AssertionFailure() << "max_unpool_backward: " << unpool.message();
  }
  return ::testing::AssertionSuccess();
}

TEST(BackwardErrors, BaselinesSucceedLikeTheReference) {
  for (bool i32 : {false, true}) {
    SCOPED_TRACE(i32 ? "i32 indices" : "i64 indices");
    PoolBackwardCall p;
    if (i32) p.use_i32_indices();
    const Status ps = p.run();
    ASSERT_TRUE(ps.ok()) << ps.message();
    EXPECT_TRUE(p.LikeReference());
    EXPECT_TRUE(p.guards_ok());
    UnpoolBackwardCall u;
    if (i32) u.use_i32_indices();
    const Status us = u.run();
    ASSERT_TRUE(us.ok()) << us.message();
    EXPECT_TRUE(u.LikeReference());
    EXPECT_TRUE(u.guards_ok());
  }
}

TEST(BackwardErrors, BadNd) {
  for (int nd : {0, 4, -1, 100}) {
    EXPECT_TRUE(BothFailEarlyWhen([&](auto& c) { c.nd = nd; }, Code::invalid_argument,
                                  {"nd: expected 1, 2 or 3", "got " + std::to_string(nd)}));
  }
}

// Window parameters below their minimum, in the last spatial dimension of every rank (the
// shapes stay 2-D: the options are checked first).
TEST(BackwardErrors, ParametersBelowMinimum) {
  struct Bad {
    const char* name;
    int64_t value, minimum;
  };
  for (const Bad& b : {Bad{"kernel_size", 0, 1}, Bad{"kernel_size", -2, 1}, Bad{"stride", 0, 1},
                       Bad{"stride", -1, 1}, Bad{"padding", -1, 0}, Bad{"dilation", 0, 1},
                       Bad{"dilation", -4, 1}}) {
    for (int nd = 1; nd <= 3; ++nd) {
      SCOPED_TRACE(std::string(b.name) + " nd " + std::to_string(nd));
      const std::string name = b.name;
      auto breaks = [&](auto& c) {
        c.nd = nd;
        Ints list(nd, name == "padding" ? 0 : name == "kernel_size" ? 2 : 1);
        list.back() = b.value;
        if (name == "kernel_size") c.o.kernel_size = list;
        if (name == "stride") c.o.stride = list;
        if (name == "padding") c.o.padding = list;
        if constexpr (std::is_same_v<std::decay_t<decltype(c)>, PoolBackwardCall>) {
          if (name == "dilation") c.o.dilation = list;
        }
      };
      const std::vector<std::string> parts = {
          name + ": expected every entry >= " + std::to_string(b.minimum),
          "got " + std::to_string(b.value) + " in spatial dimension " + std::to_string(nd - 1)};
      EXPECT_TRUE(FailsEarlyWhen<PoolBackwardCall>(breaks, Code::invalid_argument, parts));
      if (name != "dilation") {  // unpooling has no dilation
        EXPECT_TRUE(FailsEarlyWhen<UnpoolBackwardCall>(breaks, Code::invalid_argument, parts));
      }
    }
  }
}

TEST(BackwardErrors, ListLengths) {
  EXPECT_TRUE(BothFailEarlyWhen([](auto& c) { c.o.kernel_size = {}; }, Code::invalid_argument,
                                {"kernel_size: expected 1 or 2 entries", "got 0"}));
  EXPECT_TRUE(BothFailEarlyWhen([](auto& c) { c.o.kernel_size = {2, 2, 2}; },
                                Code::invalid_argument,
                                {"kernel_size: expected 1 or 2 entries", "got 3 ([2, 2, 2])"}));
  EXPECT_TRUE(BothFailEarlyWhen([](auto& c) { c.o.stride = {2, 2, 2}; }, Code::invalid_argument,
                                {"stride: expected 1 or 2 entries", "got 3"}));
  EXPECT_TRUE(BothFailEarlyWhen([](auto& c) { c.o.padding = {0, 0, 0, 0}; },
                                Code::invalid_argument,
                                {"padding: expected 1 or 2 entries", "got 4"}));
  EXPECT_TRUE(FailsEarlyWhen<PoolBackwardCall>([](auto& c) { c.o.dilation = {1, 1, 1}; },
                                               Code::invalid_argument,
                                               {"dilation: expected 1 or 2 entries", "got 3"}));
  EXPECT_TRUE(BothFailEarlyWhen(
      [](auto& c) {
        c.nd = 1;
        c.o.kernel_size = {2, 2};
      },
      Code::invalid_argument, {"kernel_size: expected 1 or", "got 2 ([2, 2])"}));
}

TEST(BackwardErrors, PaddingTooLarge) {
  // 1-D and 2-D: at most half the dilated kernel; 3-D: half the raw kernel.
  EXPECT_TRUE(FailsEarlyWhen<PoolBackwardCall>(
      [](auto& c) { c.o.padding = {0, 2}; }, Code::invalid_argument,
      {"padding: expected at most half the effective kernel (1) in spatial dimension 1",
       "got 2"}));
  EXPECT_TRUE(FailsEarlyWhen<PoolBackwardCall>(
      [](auto& c) {
        c.o.dilation = {3};
        c.o.padding = {3};
      },
      Code::invalid_argument,
      {"padding: expected at most half the effective kernel (2)", "got 3"}));
  EXPECT_TRUE(FailsEarlyWhen<PoolBackwardCall>(
      [](auto& c) {
        c.nd = 3;
        c.o.dilation = {3};
        c.o.padding = {2};
      },
      Code::invalid_argument, {"padding: expected at most half the kernel (1)", "got 2"}));
}

// Window parameters beyond the library's limits: unsupported, naming them.
TEST(BackwardErrors, WindowLimits) {
  const int64_t big = int64_t{1} << 31;
  EXPECT_TRUE(BothFailEarlyWhen([&](auto& c) { c.o.kernel_size = {2, big}; }, Code::unsupported,
                                {"kernel_size: expected every entry <= 2^31-1",
                                 "got " + std::to_string(big) + " in spatial dimension 1"}));
  EXPECT_TRUE(BothFailEarlyWhen([&](auto& c) { c.o.stride = {big}; }, Code::unsupported,
                                {"stride: expected every entry <= 2^31-1"}));
  EXPECT_TRUE(FailsEarlyWhen<PoolBackwardCall>(
      [](auto& c) { c.o.kernel_size = {int64_t{1} << 29}; }, Code::unsupported,
      {"kernel_size: expected a window whose dilated span, stride and padding add up "
       "to at most 2^29",
       "got " + std::to_string(int64_t{1} << 30) + " in spatial dimension 0"}));
  EXPECT_TRUE(FailsEarlyWhen<PoolBackwardCall>(
      [](auto& c) { c.o.kernel_size = {int64_t{1} << 14}; }, Code::unsupported,
      {"kernel_size: expected a window spanning at most 2^26 elements",
       "got at least " + std::to_string(int64_t{1} << 28)}));
}

TEST(BackwardErrors, OptionsDevice) {
  EXPECT_TRUE(BothFailEarlyWhen([](auto& c) { c.o.device = static_cast<Device>(7); },
                                Code::unsupported,
                                {"device: expected cpu (0) or cuda (1)", "got 7"}));
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present: device cuda is served";
  EXPECT_TRUE(BothFailEarlyWhen([](auto& c) { c.o.device = Device::cuda; }, Code::unsupported,
                                {"device: expected a CUDA device", "got none"}));
}

// grad_input's shape is the pooling input's: checked as one (rank, extents, size) before the
// pooled shape is computed from it; grad_values' likewise before the unpooled shape.
TEST(BackwardErrors, OpShapes) {
  struct Bad {
    Ints shape;
    std::string expected, got;
  };
  const Bad bads[] = {
      {{6, 6}, "expected rank 3 or 4 for max_%s_backward2d", "got rank 2 (shape [6, 6])"},
      {{1, 1, 2, 6, 6}, "expected rank 3 or 4 for max_%s_backward2d", "got rank 5"},
      {{1, 0, 6, 6}, "expected dimension 1 to be >= 1", "got 0 (shape [1, 0, 6, 6])"},
      {{1, 2, 6, 0}, "expected dimension 3 to be >= 1", "got 0"},
      {{-1, 2, 6, 6}, "expected dimension 0 to be >= 0", "got -1"},
      {{0, 6, 6}, "expected dimension 0 to be >= 1", "got 0"},
      {{int64_t{1} << 20, int64_t{1} << 20, 1 << 10, 1 << 10}, "expected at most 2^59 elements",
       "got shape [1048576, 1048576, 1024, 1024]"}};
  for (const Bad& b : bads) {
    SCOPED_TRACE(test::str(b.shape));
    auto named = [&](const char* op) {
      std::string e = b.expected;
      const size_t at = e.find("%s");
      if (at != std::string::npos) e.replace(at, 2, op);
      return e;
    };
    EXPECT_TRUE(FailsEarlyWhen<PoolBackwardCall>([&](auto& c) { c.grad_input.shape = b.shape; },
                                                 Code::invalid_argument,
                                                 {"grad_input: " + named("pool"), b.got}));
    EXPECT_TRUE(FailsEarlyWhen<UnpoolBackwardCall>(
        [&](auto& c) { c.grad_values.shape = b.shape; }, Code::invalid_argument,
        {"grad_values: " + named("unpool"), b.got}));
  }
}

// A grad_input too small for a window: the message names grad_input.
TEST(BackwardErrors, PooledExtentBelowOne) {
  EXPECT_TRUE(FailsEarlyWhen<PoolBackwardCall>(
      [](auto& c) { c.grad_input.shape = {1, 2, 1, 6}; }, Code::invalid_argument,
      {"grad_input: expected spatial dimension 0 to hold a window of kernel_size 2",
       "got extent 1 (output extent would be 0)"}));
  EXPECT_TRUE(FailsEarlyWhen<PoolBackwardCall>(
      [](auto& c) { c.o.dilation = {1, 7}; }, Code::invalid_argument,
      {"grad_input: expected spatial dimension 1 to hold a window of kernel_size 2, dilation 7",
       "got extent 6"}));
}

TEST(BackwardErrors, UnpoolOutputSizeRules) {
  for (size_t n : {1u, 3u, 5u}) {
    EXPECT_TRUE(FailsEarlyWhen<UnpoolBackwardCall>(
        [&](auto& c) { c.o.output_size = Ints(n, 6); }, Code::invalid_argument,
        {"output_size: expected 0, 2 or 4 entries", "got " + std::to_string(n)}));
  }
  // Default 6 per dimension, stride 2: allowed 5..7.
  struct Case {
    Ints output_size;
    int dim;
    int64_t bad;
  };
  for (const Case& k : {Case{{4, 6}, 0, 4}, Case{{6, 8}, 1, 8}, Case{{9, 9, 6, 3}, 1, 3},
                        Case{{6, -1}, 1, -1}}) {
    SCOPED_TRACE(test::str(k.output_size));
    EXPECT_TRUE(FailsEarlyWhen<UnpoolBackwardCall>(
        [&](auto& c) { c.o.output_size = k.output_size; }, Code::invalid_argument,
        {"output_size: expected spatial dimension " + std::to_string(k.dim) + " between 5 and 7",
         "got " + std::to_string(k.bad)}));
  }
  // A default extent below 1: (1 - 1) * 2 - 2 + 2 = 0.
  EXPECT_TRUE(FailsEarlyWhen<UnpoolBackwardCall>(
      [](auto& c) {
        c.nd = 1;
        c.grad_values.shape = {1, 1};
        c.o.padding = {1};
      },
      Code::invalid_argument,
      {"output_size: expected spatial dimension 0 to be >= 1", "got extent 0"}));
  // Unpooled shapes beyond the library's size limit: the messages name grad_output.
  EXPECT_TRUE(FailsEarlyWhen<UnpoolBackwardCall>(
      [](auto& c) {
        c.grad_values.shape = {1, 1, int64_t{1} << 30, 1};
        c.o.kernel_size = {1};
        c.o.stride = {int64_t{1} << 30, 1};
      },
      Code::invalid_argument,
      {"grad_output: expected an unpooled extent of at most 2^59",
       "got (1073741824 - 1) * stride 1073741824 in spatial dimension 0"}));
  EXPECT_TRUE(FailsEarlyWhen<UnpoolBackwardCall>(
      [](auto& c) {
        c.grad_values.shape = {1, 1, int64_t{1} << 20, int64_t{1} << 20};
        c.o.kernel_size = {1 << 10};
      },
      Code::invalid_argument,
      {"grad_output: expected at most 2^59 elements", "got shape [1, 1, "}));
  // An output_size shapes grad_output: 7x7 is allowed, and then expected.
  UnpoolBackwardCall c;
  c.o.output_size = {7, 7};
  EXPECT_TRUE(IsError(c.run(), Code::invalid_argument,
                      {"grad_output: expected shape [2, 1, 7, 7]", "got [2, 1, 6, 6]"}));
  std::vector<float> grad(98, 1.5f);
  c.grad_output = contiguous(grad.data(), {2, 1, 7, 7});
  const Status st = c.run();
  EXPECT_TRUE(st.ok()) << st.message();
}

// grad_output and indices must have the pooled shape of grad_input's (for these options); the
// indices the unpooling values' shape (grad_values').
TEST(BackwardErrors, ViewShapes) {
  EXPECT_TRUE(FailsWhen<PoolBackwardCall>(
      [](auto& c) { c.grad_output.shape = {1, 2, 3, 4}; }, Code::invalid_argument,
      {"grad_output: expected shape [1, 2, 3, 3]", "got [1, 2, 3, 4]"}));
  EXPECT_TRUE(FailsWhen<PoolBackwardCall>(
      [](auto& c) { c.grad_output.shape = {2, 3, 3}; }, Code::invalid_argument,
      {"grad_output: expected shape [1, 2, 3, 3]", "got [2, 3, 3]"}));
  EXPECT_TRUE(FailsWhen<PoolBackwardCall>(
      [](auto& c) { c.indices.shape = {1, 2, 3, 2}; }, Code::invalid_argument,
      {"indices: expected shape [1, 2, 3, 3]", "got [1, 2, 3, 2]"}));
  // The pooled shape follows the options: k3s2 pools 6 to 2, or 3 with ceil_mode.
  EXPECT_TRUE(FailsWhen<PoolBackwardCall>(
      [](auto& c) {
        c.o.kernel_size = {3};
        c.o.stride = {2};
      },
      Code::invalid_argument, {"grad_output: expected shape [1, 2, 2, 2]", "got [1, 2, 3, 3]"}));
  {
    PoolBackwardCall c;
    c.o.kernel_size = {3};
    c.o.stride = {2};
    c.o.ceil_mode = true;
    const Status st = c.run();
    EXPECT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(c.LikeReference());
  }
  EXPECT_TRUE(FailsWhen<UnpoolBackwardCall>(
      [](auto& c) { c.grad_output.shape = {2, 1, 6, 5}; }, Code::invalid_argument,
      {"grad_output: expected shape [2, 1, 6, 6]", "got [2, 1, 6, 5]"}));
  EXPECT_TRUE(FailsWhen<UnpoolBackwardCall>(
      [](auto& c) { c.indices.shape = {2, 1, 3, 4}; }, Code::invalid_argument,
      {"indices: expected shape [2, 1, 3, 3]", "got [2, 1, 3, 4]"}));
  EXPECT_TRUE(FailsWhen<UnpoolBackwardCall>(
      [](auto& c) { c.indices.shape = {2, 3, 3}; }, Code::invalid_argument,
      {"indices: expected shape [2, 1, 3, 3]", "got [2, 3, 3]"}));
}

// grad_output of another rank than the pooled (unpooled) shape's, up to nd + 2: refused,
// naming the expected shape.
TEST(BackwardErrors, GradOutputOfAnotherRank) {
  for (const Ints& shape : {Ints{2, 3, 3}, Ints{3, 3}, Ints{18}, Ints{}}) {
    SCOPED_TRACE(test::str(shape));
    EXPECT_TRUE(FailsWhen<PoolBackwardCall>([&](auto& c) { c.grad_output.shape = shape; },
                                            Code::invalid_argument,
                                            {"grad_output: expected shape [1, 2, 3, 3]",
                                             "got " + test::str(shape)}));
  }
  for (const Ints& shape : {Ints{1, 6, 6}, Ints{72}}) {
    SCOPED_TRACE(test::str(shape));
    EXPECT_TRUE(FailsWhen<UnpoolBackwardCall>([&](auto& c) { c.grad_output.shape = shape; },
                                              Code::invalid_argument,
                                              {"grad_output: expected shape [2, 1, 6, 6]",
                                               "got " + test::str(shape)}));
  }
}

// grad_output's shape is compared with the pooled (unpooled) shape before the view is read as
// one of that shape: a negative extent was refused as unsupported negative strides, huge
// extents overflowed int64 (UBSan), and a rank above nd + 2 indexed before View::shape (rank 40
// crashed a release build), found by the fuzzers (tests/fuzz/regressions/*/*grad-output*).
// Each is invalid_argument naming the expected shape.
TEST(BackwardErrors, GradOutputShapeIsCheckedBeforeUse) {
  const int64_t huge = std::numeric_limits<int64_t>::max();
  for (const Ints& shape : {Ints{1, 2, -3, 3}, Ints{1, 2, 3, huge}, Ints{1, 1, 2, 3, 3},
                            Ints(40, 1)}) {
    SCOPED_TRACE(test::str(shape));
    EXPECT_TRUE(FailsWhen<PoolBackwardCall>([&](auto& c) { c.grad_output.shape = shape; },
                                            Code::invalid_argument,
                                            {"grad_output: expected shape [1, 2, 3, 3]"}));
    EXPECT_TRUE(FailsWhen<UnpoolBackwardCall>([&](auto& c) { c.grad_output.shape = shape; },
                                              Code::invalid_argument,
                                              {"grad_output: expected shape [2, 1, 6, 6]"}));
  }
}

// Batch-less views and empty batches (null data allowed) are accepted.
TEST(BackwardErrors, BatchlessAndEmptyAreFine) {
  PoolBackwardCall p;
  p.grad_output.shape = p.indices.shape = {2, 3, 3};
  p.grad_input.shape = {2, 6, 6};
  Status st = p.run();
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(p.LikeReference());
  UnpoolBackwardCall u;
  u.grad_output.shape = {1, 6, 6};
  u.indices.shape = u.grad_values.shape = {1, 3, 3};
  st = u.run();
  EXPECT_TRUE(st.ok()) << st.message();
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(u.gvals[test::kGuard + i], u.grad[u.idx[i]]);

  PoolBackwardCall pe;
  pe.grad_output = contiguous(static_cast<float*>(nullptr), {0, 2, 3, 3});
  pe.indices = contiguous(static_cast<int64_t*>(nullptr), {0, 2, 3, 3});
  pe.grad_input = contiguous(static_cast<float*>(nullptr), {0, 2, 6, 6});
  st = pe.run();
  EXPECT_TRUE(st.ok()) << st.message();
  UnpoolBackwardCall ue;
  ue.grad_output = contiguous(static_cast<float*>(nullptr), {0, 1, 6, 6});
  ue.indices = contiguous(static_cast<int64_t*>(nullptr), {0, 1, 3, 3});
  ue.grad_values = contiguous(static_cast<float*>(nullptr), {0, 1, 3, 3});
  st = ue.run();
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(BackwardErrors, NullData) {
  for (const char* name : {"grad_output", "indices", "output"}) {
    auto view = [&](auto& c) -> TensorView& {
      if (std::string(name) == "grad_output") return c.grad_output;
      if (std::string(name) == "indices") return c.indices;
      if constexpr (std::is_same_v<std::decay_t<decltype(c)>, PoolBackwardCall>) {
        return c.grad_input;
      } else {
        return c.grad_values;
      }
    };
    std::string pool_name = std::string(name) == "output" ? "grad_input" : name;
    std::string unpool_name = std::string(name) == "output" ? "grad_values" : name;
    EXPECT_TRUE(FailsWhen<PoolBackwardCall>(
        [&](auto& c) { view(c).data = nullptr; }, Code::invalid_argument,
        {pool_name + ": expected data for a tensor of shape [", "got a null pointer"}));
    EXPECT_TRUE(FailsWhen<UnpoolBackwardCall>(
        [&](auto& c) { view(c).data = nullptr; }, Code::invalid_argument,
        {unpool_name + ": expected data for a tensor of shape [", "got a null pointer"}));
  }
}

// Gradients are floats: any other grad_output dtype is refused first, naming it; the output must
// then have grad_output's dtype.
TEST(BackwardErrors, GradientDTypes) {
  for (DType bad : kNonGradientDTypes) {
    SCOPED_TRACE(dtype_name(bad));
    const std::vector<std::string> parts = {
        "grad_output: expected a floating dtype (f32, f64, f16 or bf16",
        std::string("got ") + dtype_name(bad)};
    EXPECT_TRUE(BothFailEarlyWhen([&](auto& c) { c.grad_output.dtype = bad; },
                                  Code::invalid_argument, parts));
    // With the output in that dtype too: still grad_output's dtype that is named.
    EXPECT_TRUE(FailsEarlyWhen<PoolBackwardCall>(
        [&](auto& c) { c.grad_output.dtype = c.grad_input.dtype = bad; },
        Code::invalid_argument, parts));
    EXPECT_TRUE(FailsEarlyWhen<UnpoolBackwardCall>(
        [&](auto& c) { c.grad_output.dtype = c.grad_values.dtype = bad; },
        Code::invalid_argument, parts));
  }
  // An output in another dtype than grad_output's (i32: the same width as f32; bf16 and f16:
  // one 16-bit unpooling kernel would serve both).
  for (DType other : {DType::f64, DType::bf16, DType::f16, DType::i32}) {
    SCOPED_TRACE(dtype_name(other));
    EXPECT_TRUE(FailsWhen<PoolBackwardCall>(
        [&](auto& c) { c.grad_input.dtype = other; }, Code::invalid_argument,
        {"grad_input: expected dtype f32", std::string("got ") + dtype_name(other)}));
    EXPECT_TRUE(FailsWhen<UnpoolBackwardCall>(
        [&](auto& c) { c.grad_values.dtype = other; }, Code::invalid_argument,
        {"grad_values: expected dtype f32", std::string("got ") + dtype_name(other)}));
  }
  EXPECT_TRUE(FailsWhen<UnpoolBackwardCall>(
      [](auto& c) {
        c.grad_output.dtype = DType::bf16;
        c.grad_values.dtype = DType::f16;
      },
      Code::invalid_argument, {"grad_values: expected dtype bf16", "got f16"}));
}

TEST(BackwardErrors, IndexDTypes) {
  for (DType bad : {DType::f32, DType::i16, DType::u8, DType::f64, DType::bf16, DType::i8}) {
    SCOPED_TRACE(dtype_name(bad));
    EXPECT_TRUE(BothFailEarlyWhen(
        [&](auto& c) { c.indices.dtype = bad; }, Code::invalid_argument,
        {"indices: expected dtype i64 or i32", std::string("got ") + dtype_name(bad)}));
  }
}

// A dtype code outside the enum: invalid_argument naming the tensor and the code.
TEST(BackwardErrors, UnknownDTypeCodes) {
  for (int32_t code : {42, -1, 9}) {
    SCOPED_TRACE(code);
    const DType bad = static_cast<DType>(code);
    const std::string got = "got " + std::to_string(code);
    EXPECT_TRUE(BothFailEarlyWhen([&](auto& c) { c.grad_output.dtype = bad; },
                                  Code::invalid_argument,
                                  {"grad_output: expected a dtype code from 0 to 8", got}));
    EXPECT_TRUE(BothFailEarlyWhen([&](auto& c) { c.indices.dtype = bad; }, Code::invalid_argument,
                                  {"indices: expected a dtype code from 0 to 8", got}));
    EXPECT_TRUE(FailsWhen<PoolBackwardCall>(
        [&](auto& c) { c.grad_input.dtype = bad; }, Code::invalid_argument,
        {"grad_input: expected a dtype code from 0 to 8", got}));
    EXPECT_TRUE(FailsWhen<UnpoolBackwardCall>(
        [&](auto& c) { c.grad_values.dtype = bad; }, Code::invalid_argument,
        {"grad_values: expected a dtype code from 0 to 8", got}));
  }
}

// A gradient dtype this build has no kernel for is unsupported, naming the dtype and the op.
// Unpooling's gradient moves bits: a kernel of the dtype's width serves it (exact bits).
TEST(BackwardErrors, GradientDTypeNotCompiled) {
  int missing = 0;
  for (DType dtype : kGradientDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::string got = std::string("got dtype ") + dtype_name(dtype) + " with i64 indices";
    std::vector<int64_t> grad(72), out(72 + 2 * test::kGuard);  // room for 8-byte elements
    if (!test::pool_backward_kernel_built(dtype, DType::i64)) {
      ++missing;
      PoolBackwardCall c;
      c.grad_output = contiguous(grad.data(), dtype, c.grad_output.shape);
      c.grad_input = contiguous(out.data(), dtype, c.grad_input.shape);
      EXPECT_TRUE(IsError(c.run(), Code::unsupported,
                          {"grad_output: expected a combination this build compiled", got,
                           "no max_pool_backward kernel"}));
      EXPECT_TRUE(IsError(c.kernel_name(), Code::unsupported, {"grad_output", got}));
    }
    UnpoolBackwardCall u;
    for (size_t i = 0; i < grad.size(); ++i) grad[i] = int64_t{0x0123456789abcdef} * (i + 1);
    u.grad_output = contiguous(grad.data(), dtype, u.grad_output.shape);
    u.grad_values = contiguous(out.data() + test::kGuard, dtype, u.grad_values.shape);
    const Status st = u.run();
    if (!test::unpool_backward_kernel_built(dtype, DType::i64)) {
      ++missing;
      EXPECT_TRUE(IsError(st, Code::unsupported,
                          {"grad_output: expected a combination this build compiled", got,
                           "no max_unpool_backward kernel"}));
      continue;
    }
    ASSERT_TRUE(st.ok()) << st.message();
    const size_t size = dtype_size(dtype);
    for (int64_t i = 0; i < 18; ++i) {
      const char* want = reinterpret_cast<const char*>(grad.data()) +
                         ((i / 9) * 36 + u.idx[i]) * static_cast<int64_t>(size);
      const char* got_bits = reinterpret_cast<const char*>(out.data() + test::kGuard) + i * size;
      EXPECT_EQ(std::memcmp(want, got_bits, size), 0) << "grad_values element " << i;
    }
  }
  if (missing == 0) GTEST_SKIP() << "every gradient dtype is compiled in this build";
}

// i32 indices cannot name every slot of a plane of 2^31 elements or more: refused before any
// data is touched (the pointers are fake: any access would crash). The plane is the one the
// indices address: grad_input's for pooling, grad_output's for unpooling.
TEST(BackwardErrors, I32IndicesForPlanesOf2To31Elements) {
  void* const fake = reinterpret_cast<void*>(uintptr_t{0x1000});
  const Ints big{1, 1, 65536, 32769}, small{1, 1, 32768, 16384};
  const std::vector<std::string> parts = {
      "indices: expected i64 indices for a plane of 2147549184 elements", "got i32"};
  for (bool cl : {false, true}) {
    SCOPED_TRACE(cl ? "channels-last" : "contiguous");
    auto view = [&](DType t, const Ints& shape) {
      return cl ? channels_last(fake, t, shape) : contiguous(fake, t, shape);
    };
    PoolOptions o;
    o.kernel_size = {2};
    EXPECT_TRUE(IsError(max_pool_backward(2, view(DType::f32, small), view(DType::i32, small),
                                          view(DType::f32, big), o),
                        Code::invalid_argument, parts));
    std::string name;
    EXPECT_TRUE(IsError(
        max_pool_backward_kernel_name(2, view(DType::f32, small), DType::i32, big, o, &name),
        Code::invalid_argument, parts));
    UnpoolOptions u;
    u.kernel_size = {2};
    u.output_size = {65536, 32769};
    EXPECT_TRUE(IsError(max_unpool_backward(2, view(DType::f32, big), view(DType::i32, small),
                                            view(DType::f32, small), u),
                        Code::invalid_argument, parts));
    EXPECT_TRUE(IsError(
        max_unpool_backward_kernel_name(2, view(DType::f32, big), DType::i32, small, u, &name),
        Code::invalid_argument, parts));
  }
  // The boundary, through the kernel-name queries (nothing is read): 2^31 - 1 slots are fine.
  if (!test::pool_backward_kernel_built(DType::f32, DType::i32)) {
    GTEST_SKIP() << "no f32 backward kernels with i32 indices in this build";
  }
  const int64_t most = std::numeric_limits<int32_t>::max();
  for (int64_t plane : {most, most + 1}) {
    SCOPED_TRACE(plane);
    const Ints shape{1, 1, plane};
    const TensorView grad = contiguous(fake, DType::f32, shape);
    PoolOptions o;
    o.kernel_size = {1};
    UnpoolOptions u;
    u.kernel_size = {1};
    std::string name;
    const Status pool = max_pool_backward_kernel_name(1, grad, DType::i32, shape, o, &name);
    const Status unpool = max_unpool_backward_kernel_name(1, grad, DType::i32, shape, u, &name);
    if (plane == most) {
      EXPECT_TRUE(pool.ok()) << pool.message();
      EXPECT_TRUE(unpool.ok()) << unpool.message();
    } else {
      const std::vector<std::string> refused = {
          "indices: expected i64 indices for a plane of " + std::to_string(plane), "got i32"};
      EXPECT_TRUE(IsError(pool, Code::invalid_argument, refused));
      EXPECT_TRUE(IsError(unpool, Code::invalid_argument, refused));
    }
  }
}

TEST(BackwardErrors, Strides) {
  // Negative strides: unsupported, on any view (grad_output's found early).
  EXPECT_TRUE(BothFailEarlyWhen(
      [](auto& c) {
        c.grad_output.strides.assign(c.grad_output.shape.size(), 1);
        c.grad_output.strides.back() = -1;
      },
      Code::unsupported, {"grad_output: expected strides >= 0", "got stride -1 in dimension 3"}));
  EXPECT_TRUE(BothFailWhen([](auto& c) { c.indices.strides = {18, -9, 3, 1}; }, Code::unsupported,
                           {"indices: expected strides >= 0", "got stride -9 in dimension 1"}));
  EXPECT_TRUE(FailsWhen<PoolBackwardCall>(
      [](auto& c) { c.grad_input.strides = {72, 36, 6, -1}; }, Code::unsupported,
      {"grad_input: expected strides >= 0", "got stride -1 in dimension 3"}));
  // Stride counts.
  EXPECT_TRUE(BothFailEarlyWhen([](auto& c) { c.grad_output.strides = {9, 3, 1}; },
                                Code::invalid_argument,
                                {"grad_output: expected 4 strides", "got 3 ([9, 3, 1])"}));
  EXPECT_TRUE(FailsWhen<UnpoolBackwardCall>(
      [](auto& c) { c.grad_values.strides = {9, 9, 3, 1, 1}; }, Code::invalid_argument,
      {"grad_values: expected 4 strides", "got 5"}));
  // Beyond 2^59 elements of data.
  EXPECT_TRUE(FailsWhen<PoolBackwardCall>(
      [](auto& c) { c.grad_input.strides = {72, int64_t{1} << 59, 6, 1}; },
      Code::invalid_argument,
      {"grad_input: expected strides that keep every element within 2^59 elements of data",
       "got strides [72, 576460752303423488, 6, 1] for shape [1, 2, 6, 6]"}));
  // An output reaching an element twice.
  EXPECT_TRUE(FailsWhen<PoolBackwardCall>(
      [](auto& c) { c.grad_input.strides = {72, 36, 0, 1}; }, Code::invalid_argument,
      {"grad_input: expected strides that keep elements apart",
       "got stride 0 where 1 or more is needed"}));
  EXPECT_TRUE(FailsWhen<PoolBackwardCall>(
      [](auto& c) { c.grad_input.strides = {72, 36, 3, 1}; }, Code::invalid_argument,
      {"grad_input: expected strides that keep elements apart",
       "got stride 3 where 6 or more is needed"}));
  EXPECT_TRUE(FailsWhen<UnpoolBackwardCall>(
      [](auto& c) { c.grad_values.strides = {9, 9, 2, 1}; }, Code::invalid_argument,
      {"grad_values: expected strides that keep elements apart",
       "got stride 2 where 3 or more is needed"}));
}

// Inputs may repeat elements (zero strides): every output reads what its view gives.
TEST(BackwardErrors, InputsWithZeroStrides) {
  PoolBackwardCall p;
  p.grad_output.strides = {9, 0, 3, 1};  // both channels read channel 0's gradients
  p.indices.strides = {9, 0, 3, 1};
  Status st = p.run();
  ASSERT_TRUE(st.ok()) << st.message();
  std::copy(p.grad.begin(), p.grad.begin() + 9, p.grad.begin() + 9);
  std::copy(p.idx.begin(), p.idx.begin() + 9, p.idx.begin() + 9);
  EXPECT_TRUE(p.LikeReference());
  UnpoolBackwardCall u;
  u.grad_output.strides = {0, 36, 6, 1};  // both images read image 0's gradients
  st = u.run();
  ASSERT_TRUE(st.ok()) << st.message();
  std::copy(u.grad.begin(), u.grad.begin() + 36, u.grad.begin() + 36);
  EXPECT_TRUE(u.LikeReference());
}

TEST(BackwardErrors, Devices) {
  // Unknown device codes: unsupported, on any view.
  EXPECT_TRUE(BothFailEarlyWhen([](auto& c) { c.grad_output.device = static_cast<Device>(7); },
                                Code::unsupported,
                                {"grad_output: expected device cpu (0) or cuda (1)",
                                 "got device 7"}));
  EXPECT_TRUE(BothFailWhen([](auto& c) { c.indices.device = static_cast<Device>(-2); },
                           Code::unsupported,
                           {"indices: expected device cpu (0) or cuda (1)", "got device -2"}));
  EXPECT_TRUE(FailsWhen<PoolBackwardCall>(
      [](auto& c) { c.grad_input.device = static_cast<Device>(3); }, Code::unsupported,
      {"grad_input: expected device cpu (0) or cuda (1)", "got device 3"}));
  EXPECT_TRUE(FailsWhen<UnpoolBackwardCall>(
      [](auto& c) { c.grad_values.device = static_cast<Device>(3); }, Code::unsupported,
      {"grad_values: expected device cpu (0) or cuda (1)", "got device 3"}));
  // Views on another device than grad_output's: the first such view is named.
  EXPECT_TRUE(BothFailWhen([](auto& c) { c.indices.device = Device::cuda; },
                           Code::invalid_argument,
                           {"indices: expected a tensor on device cpu as grad_output",
                            "got device cuda (1)"}));
  EXPECT_TRUE(FailsWhen<PoolBackwardCall>([](auto& c) { c.grad_input.device = Device::cuda; },
                                          Code::invalid_argument,
                                          {"grad_input: expected a tensor on device cpu as "
                                           "grad_output",
                                           "got device cuda (1)"}));
  EXPECT_TRUE(FailsWhen<UnpoolBackwardCall>([](auto& c) { c.grad_values.device = Device::cuda; },
                                            Code::invalid_argument,
                                            {"grad_values: expected a tensor on device cpu as "
                                             "grad_output",
                                             "got device cuda (1)"}));
  EXPECT_TRUE(BothFailWhen([](auto& c) { c.grad_output.device = Device::cuda; },
                           Code::invalid_argument,
                           {"indices: expected a tensor on device cuda as grad_output",
                            "got device cpu (0)"}));
}

// Unpooling's gradient: an index outside grad_output's plane is index_out_of_range naming the
// first invalid one in input order (its element number and value) and the plane size, for i64
// and i32 indices and any window; nothing outside grad_values is written.
TEST(BackwardErrors, UnpoolInvalidIndicesNameTheFirst) {
  const int64_t huge = int64_t(1) << 40;
  const int64_t big = std::numeric_limits<int64_t>::max();
  const int64_t small = std::numeric_limits<int64_t>::min();
  const int64_t big32 = std::numeric_limits<int32_t>::max();
  const int64_t small32 = std::numeric_limits<int32_t>::min();
  struct Case {
    int64_t first_pos, first_value, second_pos, second_value;
    bool fits_i32;
  };
  const Case cases[] = {{13, -77, 14, 99, true},     {11, 36, 3, -5, true},
                        {0, huge, 17, -1, false},    {8, -1, 17, 47, true},
                        {9, big, 10, small, false},  {5, small, 6, big, false},
                        {4, big32, 5, 36, true},     {17, small32, 0, 37, true}};
  std::vector<UnpoolOptions> windows(3);
  windows[0].kernel_size = {2};
  windows[1].kernel_size = {3};
  windows[1].stride = {2};
  windows[1].padding = {1};
  windows[1].output_size = {6, 6};  // k3s2p1 unpools 3 to 5 by default
  windows[2].kernel_size = {2, 3};
  windows[2].stride = {3, 2};
  windows[2].output_size = {6, 6};
  for (const Case& k : cases) {
    for (bool i32 : {false, true}) {
      if (i32 && !k.fits_i32) continue;
      for (const UnpoolOptions& window : windows) {
        UnpoolBackwardCall c;
        c.o = window;
        c.idx[k.first_pos] = k.first_value;
        const bool second_first = k.second_pos < k.first_pos;  // then it stays valid
        if (!second_first) c.idx[k.second_pos] = k.second_value;
        if (i32) c.use_i32_indices();
        SCOPED_TRACE("indices " + test::str(c.idx) + (i32 ? " (i32)" : "") + " kernel_size " +
                     test::str(window.kernel_size));
        const Status st = c.run();
        EXPECT_TRUE(IsError(st, Code::index_out_of_range,
                            {"indices: expected indices in [0, 35] (an output plane of 36 "
                             "elements)",
                             "got " + std::to_string(k.first_value) + " at element " +
                                 std::to_string(k.first_pos) + " (in input order)"}));
        if (!second_first) {
          EXPECT_EQ(st.message().find("got " + std::to_string(k.second_value)), std::string::npos)
              << st.message();
        }
        EXPECT_TRUE(c.guards_ok()) << "elements around grad_values were written";
      }
    }
  }
}

// Through strided views: the first invalid index in logical order is named (the backing's
// invalid values outside the view are never read), and grad_values' gaps are never written.
TEST(BackwardErrors, UnpoolInvalidIndexThroughStridedViews) {
  std::vector<int64_t> backing(2 * 2 * 3 * 4, -999);
  for (int n = 0; n < 2; ++n) {
    for (int h = 0; h < 3; ++h) {
      for (int w = 0; w < 3; ++w) backing[n * 24 + h * 4 + w] = h * 12 + w * 2;
    }
  }
  backing[24 + 1 * 4 + 2] = 40;  // logical element 9 + 5 = 14
  backing[24 + 2 * 4 + 0] = -8;  // logical element 15, later
  std::vector<float> gaps(2 * 3 * 6, test::kGuardF);  // grad_values: every other element
  UnpoolBackwardCall c;
  c.indices.data = backing.data();
  c.indices.strides = {24, 12, 4, 1};
  c.grad_values = contiguous(gaps.data(), {2, 1, 3, 3});
  c.grad_values.strides = {18, 18, 6, 2};
  const Status st = c.run();
  EXPECT_TRUE(IsError(st, Code::index_out_of_range,
                      {"indices: expected indices in [0, 35]", "got 40 at element 14"}));
  EXPECT_EQ(st.message().find("-8"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("-999"), std::string::npos) << st.message();
  EXPECT_TRUE(test::outside_untouched(
      gaps, test::element_offsets(c.grad_values.shape, c.grad_values.strides, 0), test::kGuardF));
}

TEST(BackwardErrors, UnpoolInvalidIndicesInManyPlanesConcurrently) {
  const Ints grad_shape{4, 32, 12, 12}, values_shape{4, 32, 6, 6};
  std::vector<float> grad(test::numel(grad_shape), 1.0f);
  ExpectFirstOfManyInvalidIndicesNamed([&](const TensorView& indices, const UnpoolOptions& o) {
    std::vector<float> out =
        test::guarded_buffer<float>(test::numel(values_shape), test::kGuardF, 0);
    const Status st = max_unpool_backward(2, contiguous(grad.data(), grad_shape), indices,
                                          contiguous(out.data() + test::kGuard, values_shape), o);
    return std::make_pair(st, test::guards_intact(out, test::kGuardF));
  });
}

// Pooling's gradient drops indices outside grad_input's plane (an empty window's, say): no
// error, nothing written outside grad_input, the rest added as the reference adds it. Indices
// inside the plane but outside their window are added too.
TEST(BackwardErrors, PoolIndicesOutsideThePlaneAreDropped) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  const int64_t small = std::numeric_limits<int64_t>::min();
  const int64_t big32 = std::numeric_limits<int32_t>::max();
  const int64_t small32 = std::numeric_limits<int32_t>::min();
  struct Case {
    std::vector<std::pair<int, int64_t>> set;  // (element, index)
    bool fits_i32;
  };
  const Case cases[] = {{{{0, -1}, {17, 36}}, true},
                        {{{4, 1000}, {5, big32}, {6, small32}}, true},
                        {{{3, big}, {12, small}, {13, int64_t(1) << 40}}, false},
                        {{{1, 0}, {2, 0}, {9, 35}, {10, 35}}, true}};  // outside their windows
  for (const Case& k : cases) {
    for (bool i32 : {false, true}) {
      if (i32 && !k.fits_i32) continue;
      for (Path path : {Path::automatic, Path::general}) {
        PoolBackwardCall c;
        c.o.path = path;
        for (const auto& [element, index] : k.set) c.idx[element] = index;
        if (i32) c.use_i32_indices();
        SCOPED_TRACE("indices " + test::str(c.idx) + (i32 ? " (i32) " : " ") +
                     test::path_name(path));
        const Status st = c.run();
        ASSERT_TRUE(st.ok()) << st.message();
        EXPECT_TRUE(c.LikeReference());
        EXPECT_TRUE(c.guards_ok()) << "elements around grad_input were written";
      }
    }
  }
}

// Several faults at once: the one the documented order of checks reaches first is reported.
// Fault k is reported when faults k, k+1, ... are present (applied last to first, so that an
// earlier fault's change of a field wins).
template <typename Call>
struct Fault {
  const char* what;
  std::function<void(Call&)> apply;
  Code code;
  std::vector<std::string> parts;
};

template <typename Call>
void ExpectChecksInOrder(const std::vector<Fault<Call>>& faults) {
  for (size_t k = 0; k < faults.size(); ++k) {
    SCOPED_TRACE(faults[k].what);
    Call c;
    for (size_t j = faults.size(); j-- > k;) faults[j].apply(c);
    EXPECT_TRUE(IsError(c.run(), faults[k].code, faults[k].parts));
    EXPECT_TRUE(c.output_untouched());
  }
}

TEST(BackwardErrors, PoolChecksInOrder) {
  using C = PoolBackwardCall;
  std::vector<Fault<C>> faults = {
      {"options", [](C& c) { c.o.stride = {0}; }, Code::invalid_argument, {"stride: expected"}},
      {"grad_input's shape", [](C& c) { c.grad_input.shape = {1, 1, 2, 6, 6}; },
       Code::invalid_argument, {"grad_input: expected rank 3 or 4"}},
      {"pooled shape", [](C& c) { c.o.dilation = {1, 7}; }, Code::invalid_argument,
       {"grad_input: expected spatial dimension 1 to hold a window"}},
      {"gradient dtype", [](C& c) { c.grad_output.dtype = DType::i32; }, Code::invalid_argument,
       {"grad_output: expected a floating dtype"}},
      {"index dtype", [](C& c) { c.indices.dtype = DType::f32; }, Code::invalid_argument,
       {"indices: expected dtype i64 or i32"}},
      {"grad_output's shape", [](C& c) { c.grad_output.shape = {1, 2, 3, 4}; },
       Code::invalid_argument, {"grad_output: expected shape [1, 2, 3, 3]"}},
      {"grad_output's strides", [](C& c) { c.grad_output.strides = {18, 9, 3, -1}; },
       Code::unsupported, {"grad_output: expected strides >= 0"}},
      {"indices' shape", [](C& c) { c.indices.shape = {1, 2, 3, 2}; }, Code::invalid_argument,
       {"indices: expected shape [1, 2, 3, 3]"}},
      {"grad_input's dtype", [](C& c) { c.grad_input.dtype = DType::f16; },
       Code::invalid_argument, {"grad_input: expected dtype", "got f16"}},
      {"grad_input's data", [](C& c) { c.grad_input.data = nullptr; }, Code::invalid_argument,
       {"grad_input: expected data"}},
      {"grad_input's elements apart", [](C& c) { c.grad_input.strides = {72, 36, 0, 1}; },
       Code::invalid_argument, {"grad_input: expected strides that keep elements apart"}},
      {"devices", [](C& c) { c.indices.device = Device::cuda; }, Code::invalid_argument,
       {"indices: expected a tensor on device cpu"}},
      {"memory apart", [](C& c) { c.grad_input.data = c.grad_output.data; },
       Code::invalid_argument, {"grad_input: expected memory apart from grad_output's"}}};
  if (!test::pool_backward_kernel_built(DType::f64, DType::i64)) {
    faults.push_back({"kernel",
                      [](C& c) { c.grad_output.dtype = c.grad_input.dtype = DType::f64; },
                      Code::unsupported, {"grad_output: expected a combination", "got dtype f64"}});
  }
  ExpectChecksInOrder(faults);
}

TEST(BackwardErrors, UnpoolChecksInOrder) {
  using C = UnpoolBackwardCall;
  std::vector<Fault<C>> faults = {
      {"options", [](C& c) { c.o.padding = {-1}; }, Code::invalid_argument,
       {"padding: expected"}},
      {"grad_values' shape", [](C& c) { c.grad_values.shape = {2, 1, 0, 3}; },
       Code::invalid_argument, {"grad_values: expected dimension 2 to be >= 1"}},
      {"unpooled shape", [](C& c) { c.o.output_size = {9, 9}; }, Code::invalid_argument,
       {"output_size: expected spatial dimension 0 between 5 and 7"}},
      {"gradient dtype", [](C& c) { c.grad_output.dtype = DType::u8; }, Code::invalid_argument,
       {"grad_output: expected a floating dtype"}},
      {"index dtype", [](C& c) { c.indices.dtype = DType::i16; }, Code::invalid_argument,
       {"indices: expected dtype i64 or i32"}},
      {"grad_output's shape", [](C& c) { c.grad_output.shape = {2, 1, 6, 5}; },
       Code::invalid_argument, {"grad_output: expected shape [2, 1, 6, 6]"}},
      {"grad_output's strides", [](C& c) { c.grad_output.strides = {36, 36, -6, 1}; },
       Code::unsupported, {"grad_output: expected strides >= 0"}},
      {"indices' shape", [](C& c) { c.indices.shape = {2, 1, 3, 4}; }, Code::invalid_argument,
       {"indices: expected shape [2, 1, 3, 3]"}},
      {"grad_values' dtype", [](C& c) { c.grad_values.dtype = DType::f16; },
       Code::invalid_argument, {"grad_values: expected dtype", "got f16"}},
      {"grad_values' data", [](C& c) { c.grad_values.data = nullptr; }, Code::invalid_argument,
       {"grad_values: expected data"}},
      {"grad_values' elements apart", [](C& c) { c.grad_values.strides = {9, 9, 0, 1}; },
       Code::invalid_argument, {"grad_values: expected strides that keep elements apart"}},
      {"devices", [](C& c) { c.grad_values.device = Device::cuda; }, Code::invalid_argument,
       {"grad_values: expected a tensor on device cpu"}},
      {"memory apart", [](C& c) { c.grad_values.data = c.indices.data; }, Code::invalid_argument,
       {"grad_values: expected memory apart from indices'"}}};
  if (!test::unpool_backward_kernel_built(DType::f64, DType::i64)) {
    // The f64 tensors need memory of their own, or they would overlap whatever follows the f32
    // buffers (indices, say) and fail the memory check instead.
    faults.push_back({"kernel",
                      [](C& c) {
                        c.grad_output.dtype = c.grad_values.dtype = DType::f64;
                        c.grad_output.data = c.grad64.data();
                        c.grad_values.data = c.gvals64.data();
                      },
                      Code::unsupported, {"grad_output: expected a combination", "got dtype f64"}});
  }
  ExpectChecksInOrder(faults);
}

// The C API's backward calls: the C++ calls above (which own the buffers) in poolgen.h's structs.
struct CPoolBackward {
  PoolBackwardCall cpp;
  poolgen_tensor grad_output = c_view(cpp.grad_output), indices = c_view(cpp.indices),
                 grad_input = c_view(cpp.grad_input);
  poolgen_pool_options o;
  char message[kMsg];

  CPoolBackward() {
    std::memset(&o, 0, sizeof o);
    o.kernel_size[0] = o.kernel_size[1] = 2;
    std::memset(message, 'x', sizeof message);
  }
  int32_t call(int32_t nd, const poolgen_tensor* g, const poolgen_tensor* i,
               const poolgen_tensor* out, const poolgen_pool_options* options) {
    return poolgen_max_pool_backward(nd, g, i, out, options, message, sizeof message);
  }
  int32_t run(int32_t nd = 2) { return call(nd, &grad_output, &indices, &grad_input, &o); }
  bool guards_ok() const { return cpp.guards_ok(); }
  bool output_untouched() const { return cpp.output_untouched(); }
};

struct CUnpoolBackward {
  UnpoolBackwardCall cpp;
  poolgen_tensor grad_output = c_view(cpp.grad_output), indices = c_view(cpp.indices),
                 grad_values = c_view(cpp.grad_values);
  poolgen_unpool_options o;
  char message[kMsg];

  CUnpoolBackward() {
    std::memset(&o, 0, sizeof o);
    o.kernel_size[0] = o.kernel_size[1] = 2;
    std::memset(message, 'x', sizeof message);
  }
  int32_t call(int32_t nd, const poolgen_tensor* g, const poolgen_tensor* i,
               const poolgen_tensor* out, const poolgen_unpool_options* options) {
    return poolgen_max_unpool_backward(nd, g, i, out, options, message, sizeof message);
  }
  int32_t run(int32_t nd = 2) { return call(nd, &grad_output, &indices, &grad_values, &o); }
  bool guards_ok() const { return cpp.guards_ok(); }
  bool output_untouched() const { return cpp.output_untouched(); }
};

// Both C calls broken alike (fields they share under one name).
template <typename Break>
::testing::AssertionResult BothCFailWhen(Break breaks, int32_t code,
                                         const std::vector<std::string>& parts) {
  ::testing::AssertionResult pool = FailsWhen<CPoolBackward>(breaks, code, parts);
  if (!pool) {
    return ::testing::AssertionFailure() << "poolgen_max_pool_backward: " << pool.message();
  }
  ::testing::AssertionResult unpool = FailsWhen<CUnpoolBackward>(breaks, code, parts);
  if (!unpool) {
    return ::testing::AssertionFailure() << "poolgen_max_unpool_backward: " << unpool.message();
  }
  return ::testing::AssertionSuccess();
}

TEST(CApiBackward, SucceedLikeTheReference) {
  CPoolBackward p;
  ASSERT_EQ(p.run(), POOLGEN_OK) << p.message;
  EXPECT_TRUE(p.cpp.LikeReference());
  EXPECT_TRUE(p.guards_ok());
  CUnpoolBackward u;
  ASSERT_EQ(u.run(), POOLGEN_OK) << u.message;
  EXPECT_TRUE(u.cpp.LikeReference());
  EXPECT_TRUE(u.guards_ok());
  // Channels-last strides and i32 indices, through the struct's strides.
  CPoolBackward cl;
  cl.cpp.use_i32_indices();
  cl.indices = c_view(cl.cpp.indices);
  std::vector<float> gin = test::guarded_buffer<float>(72, test::kGuardF, test::kSentinelF);
  cl.grad_input = c_view(channels_last(gin.data() + test::kGuard, {1, 2, 6, 6}));
  ASSERT_EQ(cl.run(), POOLGEN_OK) << cl.message;
  EXPECT_TRUE(test::guards_intact(gin, test::kGuardF));
  std::vector<float> want;
  ASSERT_TRUE(
      ref::max_pool_backward<float>(2, {1, 2, 6, 6}, cl.cpp.grad, cl.cpp.idx, cl.cpp.o, &want)
          .ok());
  std::vector<float> got(72);
  for (int64_t c = 0; c < 2; ++c) {
    for (int64_t k = 0; k < 36; ++k) got[c * 36 + k] = gin[test::kGuard + k * 2 + c];
  }
  EXPECT_TRUE(test::same_floats(want, got));
}

TEST(CApiBackward, CallErrors) {
  for (int32_t nd : {0, 4, -1}) {
    CPoolBackward p;
    EXPECT_TRUE(CIsError(p.run(nd), POOLGEN_INVALID_ARGUMENT, p.message,
                         {"nd: expected 1, 2 or 3", "got " + std::to_string(nd)}));
    EXPECT_TRUE(p.output_untouched());
    CUnpoolBackward u;
    EXPECT_TRUE(CIsError(u.run(nd), POOLGEN_INVALID_ARGUMENT, u.message,
                         {"nd: expected 1, 2 or 3", "got " + std::to_string(nd)}));
    EXPECT_TRUE(u.output_untouched());
  }
  {
    CPoolBackward p;
    EXPECT_TRUE(CIsError(p.call(2, &p.grad_output, &p.indices, &p.grad_input, nullptr),
                         POOLGEN_INVALID_ARGUMENT, p.message,
                         {"options: expected options", "got a null pointer"}));
    CUnpoolBackward u;
    EXPECT_TRUE(CIsError(u.call(2, &u.grad_output, &u.indices, &u.grad_values, nullptr),
                         POOLGEN_INVALID_ARGUMENT, u.message,
                         {"options: expected options", "got a null pointer"}));
  }
  for (int which = 0; which < 3; ++which) {
    CPoolBackward p;
    const poolgen_tensor* pt[] = {&p.grad_output, &p.indices, &p.grad_input};
    const char* pool_names[] = {"grad_output", "indices", "grad_input"};
    pt[which] = nullptr;
    EXPECT_TRUE(CIsError(p.call(2, pt[0], pt[1], pt[2], &p.o), POOLGEN_INVALID_ARGUMENT,
                         p.message,
                         {std::string(pool_names[which]) + ": expected a poolgen_tensor",
                          "got a null pointer"}));
    EXPECT_TRUE(p.output_untouched());
    CUnpoolBackward u;
    const poolgen_tensor* ut[] = {&u.grad_output, &u.indices, &u.grad_values};
    const char* unpool_names[] = {"grad_output", "indices", "grad_values"};
    ut[which] = nullptr;
    EXPECT_TRUE(CIsError(u.call(2, ut[0], ut[1], ut[2], &u.o), POOLGEN_INVALID_ARGUMENT,
                         u.message,
                         {std::string(unpool_names[which]) + ": expected a poolgen_tensor",
                          "got a null pointer"}));
    EXPECT_TRUE(u.output_untouched());
    for (int32_t rank : {1, 6, -3}) {
      CPoolBackward pr;
      poolgen_tensor* prt[] = {&pr.grad_output, &pr.indices, &pr.grad_input};
      prt[which]->rank = rank;
      EXPECT_TRUE(CIsError(pr.run(), POOLGEN_INVALID_ARGUMENT, pr.message,
                           {std::string(pool_names[which]) + ": expected rank 2 to 5",
                            "got " + std::to_string(rank)}));
      CUnpoolBackward ur;
      poolgen_tensor* urt[] = {&ur.grad_output, &ur.indices, &ur.grad_values};
      urt[which]->rank = rank;
      EXPECT_TRUE(CIsError(ur.run(), POOLGEN_INVALID_ARGUMENT, ur.message,
                           {std::string(unpool_names[which]) + ": expected rank 2 to 5",
                            "got " + std::to_string(rank)}));
    }
  }
}

TEST(CApiBackward, OptionErrors) {
  EXPECT_TRUE(BothCFailWhen([](auto& c) { c.o.kernel_size[1] = 0; }, POOLGEN_INVALID_ARGUMENT,
                            {"kernel_size: expected every entry >= 1",
                             "got 0 in spatial dimension 1"}));
  EXPECT_TRUE(BothCFailWhen(
      [](auto& c) {
        c.o.stride[0] = 2;
        c.o.stride[1] = -2;
      },
      POOLGEN_INVALID_ARGUMENT, {"stride: expected every entry >= 1", "got -2"}));
  EXPECT_TRUE(FailsWhen<CPoolBackward>([](auto& c) { c.o.padding[0] = 5; },
                                       POOLGEN_INVALID_ARGUMENT,
                                       {"padding: expected at most half", "got 5"}));
  EXPECT_TRUE(FailsWhen<CUnpoolBackward>([](auto& c) { c.o.padding[1] = -2; },
                                         POOLGEN_INVALID_ARGUMENT,
                                         {"padding: expected every entry >= 0", "got -2"}));
  EXPECT_TRUE(FailsWhen<CPoolBackward>(
      [](auto& c) {
        c.o.dilation[0] = 1;
        c.o.dilation[1] = -1;
      },
      POOLGEN_INVALID_ARGUMENT, {"dilation: expected every entry >= 1", "got -1"}));
  EXPECT_TRUE(BothCFailWhen([](auto& c) { c.o.device = 9; }, POOLGEN_UNSUPPORTED,
                            {"device: expected cpu (0) or cuda (1)", "got 9"}));
  for (int32_t len : {-1, 6, 9}) {
    EXPECT_TRUE(FailsWhen<CUnpoolBackward>([&](auto& c) { c.o.output_size_len = len; },
                                           POOLGEN_INVALID_ARGUMENT,
                                           {"output_size_len: expected 0 to 5",
                                            "got " + std::to_string(len)}));
  }
  EXPECT_TRUE(FailsWhen<CUnpoolBackward>(
      [](auto& c) {
        c.o.output_size_len = 1;
        c.o.output_size[0] = 6;
      },
      POOLGEN_INVALID_ARGUMENT, {"output_size: expected 0, 2 or 4 entries", "got 1"}));
  EXPECT_TRUE(FailsWhen<CUnpoolBackward>(
      [](auto& c) {
        c.o.output_size_len = 4;
        c.o.output_size[2] = 6;
        c.o.output_size[3] = 8;
      },
      POOLGEN_INVALID_ARGUMENT,
      {"output_size: expected spatial dimension 1 between 5 and 7", "got 8"}));
}

TEST(CApiBackward, TensorErrors) {
  for (int32_t bad : {42, -1}) {
    const std::string got = "got " + std::to_string(bad);
    EXPECT_TRUE(BothCFailWhen([&](auto& c) { c.grad_output.dtype = bad; },
                              POOLGEN_INVALID_ARGUMENT,
                              {"grad_output: expected a dtype code from 0 to 8", got}));
    EXPECT_TRUE(BothCFailWhen([&](auto& c) { c.indices.dtype = bad; }, POOLGEN_INVALID_ARGUMENT,
                              {"indices: expected a dtype code from 0 to 8", got}));
    EXPECT_TRUE(FailsWhen<CPoolBackward>([&](auto& c) { c.grad_input.dtype = bad; },
                                         POOLGEN_INVALID_ARGUMENT,
                                         {"grad_input: expected a dtype code from 0 to 8", got}));
    EXPECT_TRUE(FailsWhen<CUnpoolBackward>(
        [&](auto& c) { c.grad_values.dtype = bad; }, POOLGEN_INVALID_ARGUMENT,
        {"grad_values: expected a dtype code from 0 to 8", got}));
  }
  EXPECT_TRUE(BothCFailWhen([](auto& c) { c.grad_output.dtype = POOLGEN_I64; },
                            POOLGEN_INVALID_ARGUMENT,
                            {"grad_output: expected a floating dtype", "got i64"}));
  EXPECT_TRUE(BothCFailWhen([](auto& c) { c.indices.dtype = POOLGEN_F32; },
                            POOLGEN_INVALID_ARGUMENT,
                            {"indices: expected dtype i64 or i32", "got f32"}));
  EXPECT_TRUE(FailsWhen<CPoolBackward>([](auto& c) { c.grad_input.dtype = POOLGEN_BF16; },
                                       POOLGEN_INVALID_ARGUMENT,
                                       {"grad_input: expected dtype f32", "got bf16"}));
  EXPECT_TRUE(FailsWhen<CPoolBackward>([](auto& c) { c.grad_output.shape[3] = 4; },
                                       POOLGEN_INVALID_ARGUMENT,
                                       {"grad_output: expected shape [1, 2, 3, 3]",
                                        "got [1, 2, 3, 4]"}));
  EXPECT_TRUE(FailsWhen<CUnpoolBackward>([](auto& c) { c.indices.shape[0] = 1; },
                                         POOLGEN_INVALID_ARGUMENT,
                                         {"indices: expected shape [2, 1, 3, 3]",
                                          "got [1, 1, 3, 3]"}));
  EXPECT_TRUE(FailsWhen<CPoolBackward>([](auto& c) { c.grad_input.data = nullptr; },
                                       POOLGEN_INVALID_ARGUMENT,
                                       {"grad_input: expected data", "got a null pointer"}));
  EXPECT_TRUE(FailsWhen<CUnpoolBackward>([](auto& c) { c.grad_output.data = nullptr; },
                                         POOLGEN_INVALID_ARGUMENT,
                                         {"grad_output: expected data", "got a null pointer"}));
  EXPECT_TRUE(FailsWhen<CPoolBackward>(
      [](auto& c) {
        const int64_t strides[4] = {72, 36, 6, -1};
        std::copy(strides, strides + 4, c.grad_input.strides);
      },
      POOLGEN_UNSUPPORTED, {"grad_input: expected strides >= 0", "got stride -1"}));
  EXPECT_TRUE(FailsWhen<CUnpoolBackward>(
      [](auto& c) {
        const int64_t strides[4] = {9, 9, 0, 1};
        std::copy(strides, strides + 4, c.grad_values.strides);
      },
      POOLGEN_INVALID_ARGUMENT, {"grad_values: expected strides that keep elements apart"}));
  EXPECT_TRUE(BothCFailWhen([](auto& c) { c.indices.device = 5; }, POOLGEN_UNSUPPORTED,
                            {"indices: expected device cpu (0) or cuda (1)", "got device 5"}));
  EXPECT_TRUE(BothCFailWhen([](auto& c) { c.indices.device = POOLGEN_CUDA; },
                            POOLGEN_INVALID_ARGUMENT,
                            {"indices: expected a tensor on device cpu as grad_output",
                             "got device cuda (1)"}));
}

TEST(CApiBackward, UnpoolInvalidIndex) {
  EXPECT_TRUE(FailsWhen<CUnpoolBackward>(
      [](auto& c) {
        c.cpp.idx[7] = 36;
        c.cpp.idx[8] = -1;
      },
      POOLGEN_INDEX_OUT_OF_RANGE,
      {"indices: expected indices in [0, 35]", "got 36 at element 7 (in input order)"}));
}

TEST(CApiBackward, MessageTruncationAndNull) {
  {
    CPoolBackward c;
    c.o.kernel_size[0] = 0;
    ExpectCMessageTruncated(
        [&](char* message, size_t size) {
          return poolgen_max_pool_backward(2, &c.grad_output, &c.indices, &c.grad_input, &c.o,
                                           message, size);
        },
        POOLGEN_INVALID_ARGUMENT);
    EXPECT_TRUE(c.output_untouched());
  }
  {
    CUnpoolBackward c;
    c.grad_output.dtype = POOLGEN_U8;
    ExpectCMessageTruncated(
        [&](char* message, size_t size) {
          return poolgen_max_unpool_backward(2, &c.grad_output, &c.indices, &c.grad_values, &c.o,
                                             message, size);
        },
        POOLGEN_INVALID_ARGUMENT);
    EXPECT_TRUE(c.output_untouched());
  }
  {
    CUnpoolBackward c;
    c.cpp.idx[3] = 1000;
    ExpectCMessageTruncated(
        [&](char* message, size_t size) {
          return poolgen_max_unpool_backward(2, &c.grad_output, &c.indices, &c.grad_values, &c.o,
                                             message, size);
        },
        POOLGEN_INDEX_OUT_OF_RANGE);
    EXPECT_TRUE(c.guards_ok());
  }
}

}  // namespace
}  // namespace poolgen
