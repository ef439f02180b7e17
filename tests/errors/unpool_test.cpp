// Every error path of max_unpool (the C++ API): its options, tensors and invalid indices, which
// must be named (the first in input order) and never cause a write outside the output.
#include "errors/common.hpp"

namespace poolgen {
namespace {

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
