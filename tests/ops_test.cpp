// Each op through its builder-style tester (op_testers.hpp): the cases that pick its kernels
// and drivers (fixed windows and the general kernel, both layouts, both index dtypes, the
// gathers and the scatter, one thread and two), against the reference.
#include <gtest/gtest.h>

#include "op_testers.hpp"

namespace poolgen::test {
namespace {

TEST(MaxPoolTester, WindowsLayoutsIndexTypes) {
  for (bool cl : {false, true}) {
    for (DType index : {DType::i64, DType::i32}) {
      EXPECT_TRUE(MaxPoolTester().channels_last(cl).index_dtype(index).Test());  // k2s2p0
      EXPECT_TRUE(MaxPoolTester().kernel_size({3}).stride({2}).padding({1}).channels_last(cl)
                      .index_dtype(index).Test());
      EXPECT_TRUE(MaxPoolTester().input_shape({2, 5, 9, 11}).kernel_size({3, 2}).dilation({2, 1})
                      .ceil_mode().channels_last(cl).index_dtype(index).Test());
    }
  }
}

TEST(MaxPoolTester, RanksPathsAndThreads) {
  EXPECT_TRUE(MaxPoolTester().input_shape({2, 3, 40}).kernel_size({3}).Test());
  EXPECT_TRUE(MaxPoolTester().input_shape({1, 4, 6, 8, 10}).kernel_size({2}).channels_last().Test());
  EXPECT_TRUE(MaxPoolTester().path(Path::general).Test());
  EXPECT_TRUE(MaxPoolTester().input_shape({4, 64, 56, 56}).threads(2).Test());
}

// Frameworks' 1-D pooling arrives as 2-D on (N, C, 1, L) with a window (1, k): it runs as the
// 1-D call it is, on that rank's kernels, with the same plane offsets.
TEST(MaxPoolTester, OneRowPlanesRunOneRankLower) {
  auto kernel = [](int nd, const Ints& shape, Ints k, Ints s, bool cl) {
    PoolOptions o;
    o.kernel_size = k;
    o.stride = s;
    const TensorView in = cl ? channels_last(nullptr, DType::f32, shape)
                             : contiguous(nullptr, DType::f32, shape);
    std::string name;
    const Status st = max_pool_kernel_name(nd, in, DType::i64, o, &name);
    return st.ok() ? name : st.message();
  };
  for (bool cl : {false, true}) {
    for (DType index : {DType::i64, DType::i32}) {
      EXPECT_TRUE(MaxPoolTester().input_shape({2, 16, 1, 64}).kernel_size({1, 2}).stride({1, 2})
                      .channels_last(cl).index_dtype(index).Test());
      EXPECT_TRUE(MaxPoolTester().input_shape({1, 3, 1, 1, 40}).kernel_size({1, 1, 3})
                      .stride({4, 1, 2}).padding({0, 0, 1}).channels_last(cl)
                      .index_dtype(index).Test());
      // A leading extent of 1 that the window pads keeps its rank.
      EXPECT_TRUE(MaxPoolTester().input_shape({1, 3, 1, 12}).kernel_size({2, 2}).padding({1, 0})
                      .channels_last(cl).index_dtype(index).Test());
    }
    EXPECT_EQ(kernel(2, {8, 64, 1, 4096}, {1, 2}, {1, 2}, cl),
              kernel(1, {8, 64, 4096}, {2}, {2}, cl));
    EXPECT_EQ(kernel(3, {8, 64, 1, 1, 4096}, {1, 1, 3}, {1, 1, 2}, cl),
              kernel(1, {8, 64, 4096}, {3}, {2}, cl));
    EXPECT_EQ(kernel(3, {8, 64, 1, 32, 32}, {1, 2, 2}, {1, 2, 2}, cl),
              kernel(2, {8, 64, 32, 32}, {2, 2}, {2, 2}, cl));
  }
  // A plane of more than one row keeps its rank.
  EXPECT_NE(kernel(2, {8, 64, 2, 4096}, {1, 2}, {1, 2}, false),
            kernel(1, {8, 64, 4096}, {2}, {2}, false));
}

TEST(MaxUnpoolTester, GatherScatterAndInvalidIndices) {
  for (bool cl : {false, true}) {
    for (DType index : {DType::i64, DType::i32}) {
      EXPECT_TRUE(MaxUnpoolTester().channels_last(cl).index_dtype(index).Test());
      // Wide enough rows and channels for the gathers' vectors.
      EXPECT_TRUE(MaxUnpoolTester().input_shape({2, 32, 16, 64}).channels_last(cl)
                      .index_dtype(index).Test());
      // An index outside its window (the gather declines, the scatter serves), then outside
      // its plane (named).
      EXPECT_TRUE(MaxUnpoolTester().input_shape({2, 32, 16, 64}).move_index(5, 900)
                      .channels_last(cl).index_dtype(index).Test());
      EXPECT_TRUE(MaxUnpoolTester().move_index(7, 64).channels_last(cl).index_dtype(index)
                      .Test());
    }
  }
  EXPECT_TRUE(MaxUnpoolTester().path(Path::general).Test());
  EXPECT_TRUE(MaxUnpoolTester().input_shape({1, 2, 4, 6, 8}).Test());
  EXPECT_TRUE(MaxUnpoolTester().input_shape({8, 64, 32, 32}).threads(2).Test());
}

TEST(MaxPoolBackwardTester, GatherScatterLayoutsThreads) {
  for (bool cl : {false, true}) {
    for (DType index : {DType::i64, DType::i32}) {
      EXPECT_TRUE(MaxPoolBackwardTester().channels_last(cl).index_dtype(index).Test());
      EXPECT_TRUE(MaxPoolBackwardTester().input_shape({2, 32, 16, 64}).channels_last(cl)
                      .index_dtype(index).Test());
      EXPECT_TRUE(MaxPoolBackwardTester().kernel_size({3}).stride({2}).padding({1})
                      .channels_last(cl).index_dtype(index).Test());
    }
  }
  EXPECT_TRUE(MaxPoolBackwardTester().input_shape({2, 3, 30}).kernel_size({4}).stride({3}).Test());
  EXPECT_TRUE(MaxPoolBackwardTester().input_shape({8, 64, 32, 32}).threads(2).Test());
}

TEST(MaxUnpoolBackwardTester, LayoutsRanksThreads) {
  for (bool cl : {false, true}) {
    for (DType index : {DType::i64, DType::i32}) {
      EXPECT_TRUE(MaxUnpoolBackwardTester().channels_last(cl).index_dtype(index).Test());
    }
  }
  EXPECT_TRUE(MaxUnpoolBackwardTester().input_shape({1, 2, 4, 6, 8}).Test());
  EXPECT_TRUE(MaxUnpoolBackwardTester().input_shape({8, 64, 32, 32}).threads(2).Test());
}

::testing::AssertionResult ok(const Status& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status.message();
}

// Tensors without elements (an empty batch) may come without data. Each op then runs no
// kernel: those built without Halide's bounds query would fail on a null host. Both layouts, the
// call and its prepared run. (TensorFlow's empty VALID gradient, which still zeroes its
// grad_input: frameworks_test.cpp.)
TEST(EmptyTensors, WithoutDataEveryOpAndLayout) {
  for (bool cl : {false, true}) {
    for (const Ints& input_shape : {Ints{0, 3, 4, 4}, Ints{0, 3, 7, 7}}) {
      Ints pooled = input_shape;
      pooled[2] = input_shape[2] / 2;
      pooled[3] = input_shape[3] / 2;
      const auto view = [cl](DType dtype, const Ints& shape) {
        return cl ? channels_last(nullptr, dtype, shape) : contiguous(nullptr, dtype, shape);
      };
      const TensorView input = view(DType::f32, input_shape), values = view(DType::f32, pooled),
                       indices = view(DType::i64, pooled);
      PoolOptions pool;
      pool.kernel_size = {2};
      UnpoolOptions unpool;
      unpool.kernel_size = {2};
      unpool.output_size = {input_shape[2], input_shape[3]};
      SCOPED_TRACE(str(input_shape) + (cl ? " channels-last" : " contiguous"));
      EXPECT_TRUE(ok(max_pool(2, input, values, indices, pool)));
      EXPECT_TRUE(ok(max_unpool(2, values, indices, input, unpool)));
      EXPECT_TRUE(ok(max_pool_backward(2, values, indices, input, pool)));
      EXPECT_TRUE(ok(max_unpool_backward(2, input, indices, values, unpool)));
      PreparedCall call;
      ASSERT_TRUE(ok(prepare_max_pool(2, input, values, indices, pool, &call)));
      EXPECT_TRUE(ok(call.run(nullptr, nullptr, nullptr)));
      ASSERT_TRUE(ok(prepare_max_unpool(2, values, indices, input, unpool, &call)));
      EXPECT_TRUE(ok(call.run(nullptr, nullptr, nullptr)));
      ASSERT_TRUE(ok(prepare_max_pool_backward(2, values, indices, input, pool, &call)));
      EXPECT_TRUE(ok(call.run(nullptr, nullptr, nullptr)));
      ASSERT_TRUE(ok(prepare_max_unpool_backward(2, input, indices, values, unpool, &call)));
      EXPECT_TRUE(ok(call.run(nullptr, nullptr, nullptr)));
    }
  }
}

}  // namespace
}  // namespace poolgen::test
