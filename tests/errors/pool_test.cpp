// Every error path of max_pool and its shape and kernel-name queries (the C++ API).
#include "errors/common.hpp"

namespace poolgen {
namespace {

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

}  // namespace
}  // namespace poolgen
