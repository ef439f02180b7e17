// The C API (poolgen.h): every op's errors as codes and messages in the caller's buffer, and
// poolgen_last_error's kind and argument.
#include "errors/common.hpp"

namespace poolgen {
namespace {

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
