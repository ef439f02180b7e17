// convert_indices against the frameworks themselves (tests/golden/index_formats.txt: ONNX
// Runtime's and TensorFlow's indices of the maxima PyTorch's name), the window format against
// the pooled values, round trips through every format, and every error.
#include "golden.hpp"
#include "poolgen/poolgen.h"
#include "poolgen/poolgen.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

namespace poolgen {
namespace {

const std::map<std::string, IndexFormat> kFormats = {
    {"plane", IndexFormat::plane},
    {"onnx", IndexFormat::onnx},
    {"onnx_column_major", IndexFormat::onnx_column_major},
    {"tensorflow", IndexFormat::tensorflow},
    {"tensorflow_with_batch", IndexFormat::tensorflow_with_batch},
    {"window", IndexFormat::window}};

const std::vector<golden::Case>& cases() {
  static const std::vector<golden::Case> all =
      golden::load_file(POOLGEN_GOLDEN_DIR, "index_formats.txt");
  return all;
}

// Converts i64 `from` (of `shape`) into a new i64 vector.
Status convert(const golden::Case& c, const Ints& from, IndexFormat a, IndexFormat b,
               Ints* out) {
  out->assign(from.size(), -1);
  return convert_indices(c.nd, c.input_shape, contiguous(from.data(), c.output_shape), a,
                         contiguous(out->data(), c.output_shape), b, &c.pool);
}

TEST(IndexFormats, Names) {
  for (const auto& [name, format] : kFormats) EXPECT_EQ(index_format_name(format), name);
  EXPECT_STREQ(index_format_name(static_cast<IndexFormat>(9)), "unknown");
}

// PyTorch's plane indices become exactly ONNX Runtime's and TensorFlow's, and back.
TEST(IndexFormats, FrameworksGolden) {
  std::map<std::string, int> checked;
  for (const golden::Case& c : cases()) {
    ASSERT_EQ(c.op, golden::kIndexFormatsOp);
    for (const auto& [name, expected] : c.formatted_indices) {
      ASSERT_TRUE(kFormats.count(name)) << name;
      const IndexFormat f = kFormats.at(name);
      Ints got;
      Status st = convert(c, c.out_indices, IndexFormat::plane, f, &got);
      ASSERT_TRUE(st.ok()) << c.name << " " << name << ": " << st.message();
      EXPECT_EQ(got, expected) << c.name << " to " << name;
      st = convert(c, expected, f, IndexFormat::plane, &got);
      ASSERT_TRUE(st.ok()) << c.name << " " << name << ": " << st.message();
      EXPECT_EQ(got, c.out_indices) << c.name << " from " << name;
      ++checked[name];
    }
  }
  EXPECT_GE(checked["onnx"], 12);
  EXPECT_GE(checked["onnx_column_major"], 12);
  EXPECT_GE(checked["tensorflow"], 3);
  EXPECT_GE(checked["tensorflow_with_batch"], 3);
}

// The window format (XNNPACK's): the tap, first spatial dimension fastest, whose input element
// holds the pooled value.
TEST(IndexFormats, WindowTapsHoldTheMaxima) {
  for (const golden::Case& c : cases()) {
    Ints taps;
    ASSERT_TRUE(convert(c, c.out_indices, IndexFormat::plane, IndexFormat::window, &taps).ok());
    const std::vector<float> in = c.in_f32(), out = c.out_f32();
    const int nd = c.nd;
    const size_t lead = c.output_shape.size() - nd;
    auto entry = [&](const Ints& l, int i, int64_t dflt) {
      return l.empty() ? dflt : l.size() == 1 ? l[0] : l[i];
    };
    for (size_t e = 0; e < taps.size(); ++e) {
      // The element's pooled coordinates, its plane, and its tap's input coordinates.
      int64_t rest = static_cast<int64_t>(e), o[3] = {}, x[3] = {}, t = taps[e];
      for (int i = nd - 1; i >= 0; --i) {
        o[i] = rest % c.output_shape[lead + i];
        rest /= c.output_shape[lead + i];
      }
      int64_t at = rest;  // (n, c) plane, then the input offset
      for (int i = 0; i < nd; ++i) {
        const int64_t k = entry(c.pool.kernel_size, i, 1);
        x[i] = o[i] * entry(c.pool.stride, i, k) - entry(c.pool.padding, i, 0) +
               (t % k) * entry(c.pool.dilation, i, 1);
        t /= k;
      }
      for (int i = 0; i < nd; ++i) at = at * c.input_shape[lead + i] + x[i];
      ASSERT_EQ(t, 0) << c.name << " element " << e;
      EXPECT_EQ(in[at], out[e]) << c.name << " element " << e << " tap " << taps[e];
    }
  }
}

// Every format to every other and back, in place, in i32 and in channels-last views.
TEST(IndexFormats, RoundTripsInPlaceNarrowAndStrided) {
  for (const golden::Case& c : cases()) {
    for (const auto& [a_name, a] : kFormats) {
      Ints in_a;
      ASSERT_TRUE(convert(c, c.out_indices, IndexFormat::plane, a, &in_a).ok());
      for (const auto& [b_name, b] : kFormats) {
        // a -> b into i32 channels-last, then b -> plane in place.
        std::vector<int32_t> narrow(in_a.size(), -1);
        const TensorView cl = channels_last(narrow.data(), c.output_shape, c.nd);
        Status st = convert_indices(c.nd, c.input_shape, contiguous(in_a.data(), c.output_shape),
                                    a, cl, b, &c.pool);
        ASSERT_TRUE(st.ok()) << c.name << " " << a_name << " to " << b_name << ": "
                             << st.message();
        st = convert_indices(c.nd, c.input_shape, cl, b, cl, IndexFormat::plane, &c.pool);
        ASSERT_TRUE(st.ok()) << c.name << " " << b_name << " in place: " << st.message();
        Ints back(in_a.size());
        ASSERT_TRUE(convert_indices(c.nd, c.input_shape, cl, IndexFormat::plane,
                                    contiguous(back.data(), c.output_shape), IndexFormat::plane)
                        .ok());
        EXPECT_EQ(back, c.out_indices) << c.name << " " << a_name << " -> " << b_name;
      }
    }
  }
}

// The example: n = 1, c = 2 of a 2x3x4x4 input, PyTorch's 4, 3, 13, 14 are ONNX
// Runtime's 84, 83, 93, 94; batch-less frames have n = 0.
TEST(IndexFormats, GlobalOffsetsOfOnePlane) {
  Ints plane(2 * 3 * 4, 0), onnx(plane.size());
  const Ints at12 = {4, 3, 13, 14};
  std::copy(at12.begin(), at12.end(), plane.begin() + (1 * 3 + 2) * 4);
  ASSERT_TRUE(convert_indices(2, {2, 3, 4, 4}, contiguous(plane.data(), {2, 3, 2, 2}),
                              IndexFormat::plane, contiguous(onnx.data(), {2, 3, 2, 2}),
                              IndexFormat::onnx)
                  .ok());
  EXPECT_EQ(Ints(onnx.begin() + 20, onnx.end()), (Ints{84, 83, 93, 94}));
  EXPECT_EQ(onnx[4], 16);  // plane (0, 1), offset 0
  Ints batchless = {5, 7}, tf(2);
  ASSERT_TRUE(convert_indices(1, {2, 8}, contiguous(batchless.data(), {2, 1}),
                              IndexFormat::plane, contiguous(tf.data(), {2, 1}),
                              IndexFormat::tensorflow_with_batch)
                  .ok());
  EXPECT_EQ(tf, (Ints{10, 15}));  // offset * C + c
}

struct ErrorCase {
  Ints frame = {1, 2, 4, 4};
  Ints from = {0, 5, 10, 15, 0, 5, 10, 15};
  Ints to = Ints(8, 0);
  Ints pooled = {1, 2, 2, 2};
  IndexFormat a = IndexFormat::plane, b = IndexFormat::onnx;
  PoolOptions options;
  ErrorCase() { options.kernel_size = {2}; }
  Status run(DType to_dtype = DType::i64) {
    TensorView t = contiguous(to.data(), to_dtype, pooled);
    return convert_indices(2, frame, contiguous(from.data(), pooled), a, t, b, &options);
  }
};

void expect_error(const Status& st, Code code, const std::vector<std::string>& parts) {
  EXPECT_EQ(st.code(), code) << st.message();
  for (const std::string& p : parts) {
    EXPECT_NE(st.message().find(p), std::string::npos) << "'" << p << "' in " << st.message();
  }
}

TEST(IndexFormats, Errors) {
  {
    ErrorCase e;
    EXPECT_TRUE(e.run().ok());
    e.a = static_cast<IndexFormat>(6);
    expect_error(e.run(), Code::invalid_argument, {"from_format: expected an IndexFormat", "6"});
    e.a = IndexFormat::plane;
    e.b = static_cast<IndexFormat>(-1);
    expect_error(e.run(), Code::invalid_argument, {"to_format", "got -1"});
  }
  {
    ErrorCase e;  // index 16 is outside a 4x4 plane: named with its element
    e.from[6] = 16;
    expect_error(e.run(), Code::index_out_of_range,
                 {"from: expected plane indices naming an element of its own plane", "got 16",
                  "[0, 1, 1, 0]"});
  }
  {
    ErrorCase e;  // ONNX index of plane (0, 0) at an element of plane (0, 1)
    e.a = IndexFormat::onnx;
    e.b = IndexFormat::plane;
    e.from = {0, 5, 10, 15, 16, 3, 21, 31};
    expect_error(e.run(), Code::index_out_of_range, {"onnx indices", "got 3", "[0, 1, 0, 1]"});
  }
  {
    ErrorCase e;  // TensorFlow: offset * C + c, so odd indices belong to channel 1
    e.a = IndexFormat::tensorflow;
    e.b = IndexFormat::plane;
    e.from = {0, 2, 4, 6, 1, 3, 5, 8};
    expect_error(e.run(), Code::index_out_of_range, {"tensorflow indices", "got 8"});
  }
  {
    ErrorCase e;  // plane offset 5 is (1, 1): outside the window of element (0, 1)
    e.b = IndexFormat::window;
    e.from = {0, 5, 10, 15, 0, 2, 8, 10};
    expect_error(e.run(), Code::index_out_of_range,
                 {"window reaches", "got 5", "[0, 0, 0, 1]"});
    e.a = IndexFormat::window;
    e.b = IndexFormat::plane;
    e.from = {0, 1, 2, 3, 3, 2, 1, 4};  // 4 taps: 0..3
    expect_error(e.run(), Code::index_out_of_range, {"window indices", "got 4"});
  }
  {
    ErrorCase e;
    e.b = IndexFormat::window;
    expect_error(convert_indices(2, e.frame, contiguous(e.from.data(), e.pooled), e.a,
                                 contiguous(e.to.data(), e.pooled), e.b),
                 Code::invalid_argument, {"window: expected the pooling options"});
    e.options.kernel_size = {3};  // pools 4x4 to 1x1
    expect_error(e.run(), Code::invalid_argument,
                 {"from: expected the pooled shape [1, 2, 1, 1]", "got [1, 2, 2, 2]"});
    e.options.kernel_size = {0};
    expect_error(e.run(), Code::invalid_argument, {"kernel_size"});
  }
  {
    ErrorCase e;
    e.frame = {2, 2, 4, 4};
    expect_error(e.run(), Code::invalid_argument,
                 {"from: expected a shape of rank 4 whose batch and channels are frame_shape's "
                  "[2, 2]", "got [1, 2, 2, 2]"});
    e.frame = {1, 2, 0, 4};
    expect_error(e.run(), Code::invalid_argument, {"frame_shape: expected dimension 2"});
    expect_error(convert_indices(4, e.frame, contiguous(e.from.data(), e.pooled), e.a,
                                 contiguous(e.to.data(), e.pooled), e.b),
                 Code::invalid_argument, {"frame_shape: expected rank"});
  }
  {
    ErrorCase e;  // dtypes, devices, memory
    std::vector<float> f(8);
    expect_error(convert_indices(2, e.frame, contiguous(f.data(), e.pooled), e.a,
                                 contiguous(e.to.data(), e.pooled), e.b),
                 Code::invalid_argument, {"from: expected indices of dtype i64 or i32, got f32"});
    expect_error(e.run(DType::i16), Code::invalid_argument, {"to: expected indices", "i16"});
    TensorView dev = contiguous(e.to.data(), e.pooled);
    dev.device = Device::cuda;
    expect_error(convert_indices(2, e.frame, contiguous(e.from.data(), e.pooled), e.a, dev, e.b),
                 Code::unsupported, {"to: expected host memory"});
    expect_error(convert_indices(2, e.frame, contiguous(e.from.data(), e.pooled), e.a,
                                 contiguous(e.from.data() + 1, e.pooled), e.b),
                 Code::invalid_argument, {"to"});
    expect_error(convert_indices(2, e.frame, contiguous(e.from.data(), e.pooled), e.a,
                                 contiguous(static_cast<int64_t*>(nullptr), e.pooled), e.b),
                 Code::invalid_argument, {"to: expected data"});
  }
  {
    // i32 holds every plane offset of 2^32 elements over 1024 x 1024 planes, but not their
    // ONNX indices (checked on the shapes alone: no element here).
    Ints none;
    const Ints frame = {1024, 1024, 4096}, pooled = {1024, 1024, 0};
    TensorView from = contiguous(none.data(), pooled);
    TensorView to = contiguous(static_cast<int32_t*>(nullptr), pooled);
    EXPECT_TRUE(convert_indices(1, frame, from, IndexFormat::onnx, to, IndexFormat::plane).ok());
    expect_error(convert_indices(1, frame, from, IndexFormat::plane, to, IndexFormat::onnx),
                 Code::invalid_argument, {"to: expected i64", "reach 4294967295", "got i32"});
  }
}

TEST(IndexFormats, CApi) {
  int64_t frame[4] = {2, 3, 4, 4};
  Ints plane(24), onnx(24, -1);
  for (size_t i = 0; i < plane.size(); ++i) plane[i] = Ints{0, 2, 8, 10}[i % 4];  // 2x2 windows
  plane[20] = 4;
  poolgen_tensor from{}, to{};
  from.data = plane.data();
  to.data = onnx.data();
  from.dtype = to.dtype = POOLGEN_I64;
  from.rank = to.rank = 4;
  const int64_t pooled[4] = {2, 3, 2, 2};
  std::memcpy(from.shape, pooled, sizeof pooled);
  std::memcpy(to.shape, pooled, sizeof pooled);
  char message[256] = {};
  ASSERT_EQ(poolgen_convert_indices(2, 4, frame, &from, POOLGEN_INDEX_PLANE, &to,
                                    POOLGEN_INDEX_ONNX, nullptr, message, sizeof message),
            POOLGEN_OK)
      << message;
  EXPECT_EQ(onnx[20], 84);
  poolgen_pool_options window{};
  window.kernel_size[0] = window.kernel_size[1] = 2;
  ASSERT_EQ(poolgen_convert_indices(2, 4, frame, &from, POOLGEN_INDEX_PLANE, &to,
                                    POOLGEN_INDEX_WINDOW, &window, message, sizeof message),
            POOLGEN_OK)
      << message;
  EXPECT_EQ(onnx[20], 1);  // (1, 0) in the 2x2 window of element (0, 0): x * KH + y
  EXPECT_EQ(poolgen_convert_indices(2, 4, frame, &from, POOLGEN_INDEX_PLANE, &to,
                                    POOLGEN_INDEX_WINDOW, nullptr, message, sizeof message),
            POOLGEN_INVALID_ARGUMENT);
  EXPECT_EQ(poolgen_convert_indices(0, 4, frame, &from, 0, &to, 1, nullptr, message,
                                    sizeof message),
            POOLGEN_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(message, "nd: expected 1, 2 or 3, got 0"), nullptr) << message;
  EXPECT_EQ(poolgen_convert_indices(2, 4, nullptr, &from, 0, &to, 1, nullptr, message,
                                    sizeof message),
            POOLGEN_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(message, "frame_shape: expected an array"), nullptr) << message;
  EXPECT_EQ(poolgen_convert_indices(2, 6, frame, &from, 0, &to, 1, nullptr, message,
                                    sizeof message),
            POOLGEN_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(message, "frame_rank: expected 0 to 5, got 6"), nullptr) << message;
  EXPECT_EQ(poolgen_convert_indices(2, 4, frame, nullptr, 0, &to, 1, nullptr, message,
                                    sizeof message),
            POOLGEN_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(message, "from: expected a poolgen_tensor"), nullptr) << message;
}

}  // namespace
}  // namespace poolgen
