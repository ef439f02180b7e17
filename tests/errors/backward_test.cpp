// Every error path of max_pool_backward and max_unpool_backward (the C++ API), and the order
// in which their checks report.
#include "errors/common.hpp"

namespace poolgen {
namespace {

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

}  // namespace
}  // namespace poolgen
