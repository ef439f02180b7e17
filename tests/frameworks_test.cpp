// Other frameworks' definitions against those frameworks themselves: max_pool with ONNX
// Runtime's and TensorFlow's options (tests/golden/frameworks_pool.txt: their MaxPool and
// max_pool_with_argmax on values with ties, NaN and infinities), and convert_indices
// (tests/golden/index_formats.txt: their indices of the maxima PyTorch's name), the window format
// against the pooled values, round trips through every format, and every error.
#include "c_tensors.hpp"
#include "built_kernels.hpp"
#include "golden.hpp"
#include "typed_views.hpp"
#include "poolgen/poolgen.h"
#include "poolgen/poolgen.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
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

void expect_error(const Status& st, Code code, const std::vector<std::string>& parts) {
  EXPECT_EQ(st.code(), code) << st.message();
  for (const std::string& p : parts) {
    EXPECT_NE(st.message().find(p), std::string::npos) << "'" << p << "' in " << st.message();
  }
}

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

// Elements of `width` bytes in row-major order, laid out as packed channels-last memory.
std::vector<uint8_t> channels_last_bytes(const std::vector<uint8_t>& logical, size_t width,
                                         const Ints& shape, int nd) {
  std::vector<uint8_t> memory(logical.size());
  const std::vector<int64_t> offsets = test::typed::channels_last_offsets(shape, nd);
  for (size_t k = 0; k < offsets.size(); ++k) {
    std::memcpy(memory.data() + offsets[k] * width, logical.data() + k * width, width);
  }
  return memory;
}

// A pool_backward case (TensorFlow's MaxPoolGradWithArgmax from its own argmax, or Addons'
// unpooling by scatter_nd), counted in `checked`, or in `skipped` where the build lacks its
// kernel.
void check_pool_backward(const golden::Case& c, int* checked, int* skipped) {
  if (!test::pool_backward_kernel_built(c.dtype, DType::i64)) {
    ++*skipped;
    return;
  }
  ++*checked;
  std::vector<uint8_t> grad_input(c.grad_input.size(), 0xa5);
  const Status st = max_pool_backward(
      c.nd, contiguous(const_cast<uint8_t*>(c.grad_output.data()), c.dtype, c.output_shape),
      contiguous(const_cast<int64_t*>(c.out_indices.data()), c.output_shape),
      contiguous(grad_input.data(), c.dtype, c.input_shape), c.pool);
  EXPECT_TRUE(st.ok()) << c.name << ": " << st.message();
  EXPECT_TRUE(grad_input == c.grad_input)
      << c.name << ": " << golden::compare_values(c.dtype, c.grad_input, grad_input, c.input_shape);
  // In channels-last memory (TensorFlow's NHWC): the indices' plane offsets are packed in the
  // gradients' layout.
  const size_t width = golden::dtype_bytes(c.dtype);
  std::vector<uint8_t> grad_cl = channels_last_bytes(c.grad_output, width, c.output_shape, c.nd);
  std::vector<int64_t> indices_cl =
      test::typed::to_channels_last(c.out_indices, c.output_shape, c.nd);
  std::vector<uint8_t> grad_input_cl(c.grad_input.size(), 0xa5);
  const Status st_cl = max_pool_backward(
      c.nd, channels_last(grad_cl.data(), c.dtype, c.output_shape, c.nd),
      channels_last(indices_cl.data(), c.output_shape, c.nd),
      channels_last(grad_input_cl.data(), c.dtype, c.input_shape, c.nd), c.pool);
  EXPECT_TRUE(st_cl.ok()) << c.name << " channels-last: " << st_cl.message();
  EXPECT_TRUE(grad_input_cl == channels_last_bytes(c.grad_input, width, c.input_shape, c.nd))
      << c.name << " channels-last";
}

// ONNX Runtime's MaxPool and TensorFlow's max_pool_with_argmax and its gradient, bit for bit, in
// every dtype they take: values (NaN bits included), indices in their formats, gradient sums;
// and ONNX's own backend node tests for MaxPool (onnxnode_*).
TEST(Frameworks, PoolingGolden) {
  const std::vector<golden::Case> all = golden::load_file(POOLGEN_GOLDEN_DIR, "frameworks_pool.txt");
  std::map<std::string, int> checked;
  int skipped = 0;
  for (const golden::Case& c : all) {
    if (c.op == "pool_backward") {
      check_pool_backward(c, &checked["tf2d"], &skipped);
      continue;
    }
    if (c.refused) {
      Ints shape;
      expect_error(max_pool_output_shape(c.nd, c.input_shape, c.pool, &shape),
                   Code::invalid_argument, {"to hold a window", "would be -"});
      ++checked["refused"];
      continue;
    }
    if (!test::pool_kernel_built(c.dtype, DType::i64)) {
      ++skipped;
      continue;
    }
    std::vector<uint8_t> values(c.out_values.size(), 0xa5);
    Ints indices(c.out_indices.size(), -7);
    const Status st = max_pool(c.nd, contiguous(const_cast<uint8_t*>(c.in_values.data()),
                                                c.dtype, c.input_shape),
                               contiguous(values.data(), c.dtype, c.output_shape),
                               contiguous(indices.data(), c.output_shape), c.pool);
    ASSERT_TRUE(st.ok()) << c.name << ": " << st.message();
    EXPECT_TRUE(values == c.out_values)
        << c.name << ": " << golden::compare_values(c.dtype, c.out_values, values, c.output_shape)
        << " (or NaN bits)";
    EXPECT_EQ(golden::compare_indices(c.out_indices, indices), "") << c.name;
    ++checked[c.name.substr(0, c.name.find('_'))];
    // The same in channels-last memory (TensorFlow's own layout; the NaN rule's rescan and the
    // index rewrite then walk strided views).
    const size_t width = golden::dtype_bytes(c.dtype);
    const std::vector<uint8_t> in_cl = channels_last_bytes(c.in_values, width, c.input_shape, c.nd);
    std::vector<uint8_t> values_cl(values.size(), 0xa5);
    Ints indices_cl(indices.size(), -7);
    const Status st_cl = max_pool(
        c.nd, channels_last(const_cast<uint8_t*>(in_cl.data()), c.dtype, c.input_shape, c.nd),
        channels_last(values_cl.data(), c.dtype, c.output_shape, c.nd),
        channels_last(indices_cl.data(), c.output_shape, c.nd), c.pool);
    ASSERT_TRUE(st_cl.ok()) << c.name << " channels-last: " << st_cl.message();
    EXPECT_TRUE(values_cl == channels_last_bytes(c.out_values, width, c.output_shape, c.nd))
        << c.name << " channels-last values";
    EXPECT_TRUE(indices_cl == test::typed::to_channels_last(c.out_indices, c.output_shape, c.nd))
        << c.name << " channels-last indices";
  }
  EXPECT_GE(checked["onnx1d"] + checked["onnx2d"] + checked["onnx3d"] + skipped / 2, 100);
  EXPECT_GE(checked["tf2d"] + skipped / 2, 76);  // with 12 of explicit padding
  // ONNX's own backend node tests for MaxPool (all but the two largest; the u8 one needs u8).
  EXPECT_GE(checked["onnxnode"], 16);
  // pool_rule's: extents, empty outputs and refusals, windows with no tap, ceil_mode.
  EXPECT_GE(checked["onnxrule1d"] + checked["onnxrule2d"] + checked["onnxrule3d"], 20);
  EXPECT_GE(checked["tfrule2d"], 8);
  EXPECT_EQ(checked["refused"], 4);
}

// ONNX Runtime's MaxUnpool (of its MaxPool's indices, and of random ones crossing planes with
// duplicates), ONNX's reference and backend node tests where an output_shape is larger than the
// default (onnxref, onnxnode), and TensorFlow Addons' MaxUnpooling2D (scatter_nd: duplicates
// add) as max_pool_backward with tensorflow indices, bit for bit; the unpooling cases also with
// i32 indices and in channels-last memory.
TEST(Frameworks, UnpoolingGolden) {
  const std::vector<golden::Case> all =
      golden::load_file(POOLGEN_GOLDEN_DIR, "frameworks_unpool.txt");
  std::map<std::string, int> checked;
  int skipped = 0;
  for (const golden::Case& c : all) {
    const std::string kind = c.name.substr(0, c.name.find('_'));
    if (c.op == "pool_backward") {
      check_pool_backward(c, &checked[kind], &skipped);
      continue;
    }
    if (!test::unpool_kernel_built(c.dtype, DType::i64)) {
      ++skipped;
      continue;
    }
    Ints shape;
    ASSERT_TRUE(max_unpool_output_shape(c.nd, c.input_shape, c.unpool, &shape).ok()) << c.name;
    ASSERT_EQ(shape, c.output_shape) << c.name;
    std::vector<uint8_t> out(c.out_values.size(), 0xa5);
    uint8_t* values = const_cast<uint8_t*>(c.in_values.data());
    const Status st = max_unpool(c.nd, contiguous(values, c.dtype, c.input_shape),
                                 contiguous(const_cast<int64_t*>(c.in_indices.data()),
                                            c.input_shape),
                                 contiguous(out.data(), c.dtype, c.output_shape), c.unpool);
    ASSERT_TRUE(st.ok()) << c.name << ": " << st.message();
    EXPECT_TRUE(out == c.out_values)
        << c.name << ": " << golden::compare_values(c.dtype, c.out_values, out, c.output_shape);
    ++checked[kind];
    if (test::unpool_kernel_built(c.dtype, DType::i32)) {
      std::vector<int32_t> narrow(c.in_indices.begin(), c.in_indices.end());
      std::vector<uint8_t> out32(out.size(), 0xa5);
      ASSERT_TRUE(max_unpool(c.nd, contiguous(values, c.dtype, c.input_shape),
                             contiguous(narrow.data(), c.input_shape),
                             contiguous(out32.data(), c.dtype, c.output_shape), c.unpool)
                      .ok())
          << c.name << " i32";
      EXPECT_TRUE(out32 == c.out_values) << c.name << " i32";
    }
    const size_t width = golden::dtype_bytes(c.dtype);
    std::vector<uint8_t> values_cl = channels_last_bytes(c.in_values, width, c.input_shape, c.nd);
    std::vector<int64_t> indices_cl = test::typed::to_channels_last(c.in_indices, c.input_shape, c.nd);
    std::vector<uint8_t> out_cl(out.size(), 0xa5);
    const Status st_cl =
        max_unpool(c.nd, channels_last(values_cl.data(), c.dtype, c.input_shape, c.nd),
                   channels_last(indices_cl.data(), c.input_shape, c.nd),
                   channels_last(out_cl.data(), c.dtype, c.output_shape, c.nd), c.unpool);
    ASSERT_TRUE(st_cl.ok()) << c.name << " channels-last: " << st_cl.message();
    EXPECT_TRUE(out_cl == channels_last_bytes(c.out_values, width, c.output_shape, c.nd))
        << c.name << " channels-last";
  }
  EXPECT_GE(checked["onnxrt1d"] + checked["onnxrt2d"] + checked["onnxrt3d"] + skipped, 14);
  EXPECT_GE(checked["onnxref1d"] + checked["onnxref2d"], 2);
  EXPECT_EQ(checked["onnxnode"], 2);  // both of ONNX's MaxUnpool node tests
  EXPECT_GE(checked["tfaddons2d"] + skipped, 16);
}

// Every way to misuse unpooling's conventions, and ONNX Runtime's refusals (measured with 1.31:
// an index outside the tensor, an output_shape of other N or C, or of fewer elements).
TEST(Frameworks, UnpoolOptionErrors) {
  std::vector<float> values(8, 1.0f), out(64);
  Ints indices = {0, 1, 2, 3, 4, 5, 6, 7};  // 1x2x2x2, onnx: all in plane 0 of a 1x2x4x4 output
  auto run = [&](const UnpoolOptions& o, const Ints& out_shape = {1, 2, 4, 4}) {
    return max_unpool(2, contiguous(values.data(), {1, 2, 2, 2}),
                      contiguous(indices.data(), {1, 2, 2, 2}),
                      contiguous(out.data(), out_shape), o);
  };
  UnpoolOptions base;
  base.kernel_size = {2};
  base.index_format = IndexFormat::onnx;
  base.output_size_rule = OutputSizeRule::onnx_runtime;
  ASSERT_TRUE(run(base).ok());  // crossing into plane 0 from plane 1 is ONNX Runtime's too
  EXPECT_EQ(out[7], 1.0f);
  {
    UnpoolOptions o = base;
    o.output_size_rule = static_cast<OutputSizeRule>(4);
    expect_error(run(o), Code::invalid_argument, {"output_size_rule: expected an OutputSizeRule"});
    o.output_size_rule = OutputSizeRule::onnx_runtime;
    o.index_format = IndexFormat::window;
    expect_error(run(o), Code::invalid_argument, {"index_format: expected plane, onnx", "got window"});
    o.index_format = static_cast<IndexFormat>(9);
    expect_error(run(o), Code::invalid_argument, {"index_format: expected an IndexFormat"});
  }
  {
    UnpoolOptions o = base;
    o.output_size = {1, 3, 4, 4};  // ONNX Runtime: batch and channel dimensions must match
    expect_error(run(o), Code::invalid_argument,
                 {"output_size: expected the values' batch and channels [1, 2]", "got [1, 3, 4, 4]"});
    o.output_size = {1, 2, 3, 3};  // ONNX Runtime: smaller than the minimum required
    expect_error(run(o, {1, 2, 3, 3}), Code::invalid_argument,
                 {"at least the default shape's 16 elements", "with 9"});
    o.output_size = {2, 8};  // as many elements, another shape: ONNX Runtime takes it
    EXPECT_TRUE(run(o, {1, 2, 2, 8}).ok());
    o.output_size_rule = OutputSizeRule::onnx;  // ONNX's: each extent at least the default's
    expect_error(run(o, {1, 2, 2, 8}), Code::invalid_argument,
                 {"output_size: expected spatial dimension 0 at least the default extent 4",
                  "got 2"});
    o.output_size_rule = OutputSizeRule::pytorch;  // PyTorch's: within a stride of the default
    expect_error(run(o, {1, 2, 2, 8}), Code::invalid_argument,
                 {"output_size: expected spatial dimension 0 between 3 and 5, got 2"});
    o.output_size_rule = OutputSizeRule::any;
    EXPECT_TRUE(run(o, {1, 2, 2, 8}).ok());
  }
  {
    UnpoolOptions o = base;
    o.padding = {1};
    o.padding_end = {2};  // default 4 - 1 - 2 = 1
    EXPECT_TRUE(run(o, {1, 2, 1, 1}).code() == Code::index_out_of_range);
    o.padding_end = {3, 3, 3};
    expect_error(run(o), Code::invalid_argument, {"padding_end: expected 1 or 2 entries"});
    o.padding_end = {-1};
    expect_error(run(o), Code::invalid_argument, {"padding_end: expected every entry >= 0"});
    o.padding_end = {3};  // default 4 - 1 - 3 = 0
    expect_error(run(o), Code::invalid_argument, {"kernel_size: expected a default extent >= 1"});
  }
  {
    UnpoolOptions o = base;
    indices[5] = 32;  // ONNX Runtime: Index value out of bounds, valid range [0, 32)
    expect_error(run(o), Code::index_out_of_range,
                 {"indices: expected onnx indices in [0, 32)", "got 32 at element [0, 1, 0, 1]"});
    o.index_format = IndexFormat::tensorflow;  // one item: (offset * C + c) below 16 * 2
    expect_error(run(o), Code::index_out_of_range, {"tensorflow indices in [0, 32)"});
    indices[5] = 5;
    o.index_format = IndexFormat::plane;  // PyTorch's: inside the plane, or refused
    indices[2] = 16;
    expect_error(run(o), Code::index_out_of_range, {"16"});
    indices[2] = 2;
  }
  {
    UnpoolOptions o = base;  // no kernel: ONNX's rules measure against the default
    o.kernel_size = {};
    o.output_size = {4, 4};
    expect_error(run(o), Code::invalid_argument, {"kernel_size: expected one with output_size_rule 1"});
    o.output_size_rule = OutputSizeRule::any;
    EXPECT_TRUE(run(o).ok());
    o.padding_end = {0};
    expect_error(run(o), Code::invalid_argument, {"padding_end: expected none without a kernel_size"});
  }
  {
    UnpoolOptions o = base;  // the GPUs' algorithms take PyTorch's frame and plane offsets only
    o.path = Path::winner;
    expect_error(run(o), Code::unsupported, {"index_format: expected plane offsets", "got index_format onnx"});
    o.index_format = IndexFormat::plane;
    o.output_size_rule = OutputSizeRule::onnx;
    o.output_size = {5, 5};
    expect_error(run(o, {1, 2, 5, 5}), Code::unsupported, {"with output_size_rule 2"});
  }
  {
    // No gradient in other frameworks' formats.
    UnpoolOptions o = base;
    std::vector<float> grad_values(8);
    expect_error(max_unpool_backward(2, contiguous(out.data(), {1, 2, 4, 4}),
                                     contiguous(indices.data(), {1, 2, 2, 2}),
                                     contiguous(grad_values.data(), {1, 2, 2, 2}), o),
                 Code::unsupported, {"index_format: expected plane offsets in the output's frame",
                                     "max_unpool_backward"});
  }
}

// The C API's unpooling fields: ONNX's node test with an output_shape (ONNX's rule), then the
// same as ONNX Runtime reads it.
TEST(Frameworks, CApiUnpoolOptions) {
  float values[4] = {5, 6, 7, 8}, out[25];
  int64_t indices[4] = {5, 7, 13, 15};  // of a 4x4 pooling input
  const int64_t in_shape[4] = {1, 1, 2, 2}, out_shape[4] = {1, 1, 5, 5};
  const poolgen_tensor t_values = test::c_tensor(values, POOLGEN_F32, {1, 1, 2, 2}),
                       t_indices = test::c_tensor(indices, POOLGEN_I64, {1, 1, 2, 2}),
                       t_out = test::c_tensor(out, POOLGEN_F32, {1, 1, 5, 5});
  poolgen_unpool_options o{};
  o.kernel_size[0] = o.kernel_size[1] = 2;
  o.output_size_len = 4;
  std::memcpy(o.output_size, out_shape, sizeof out_shape);
  o.output_size_rule = POOLGEN_OUTPUT_SIZE_ONNX;
  o.index_format = POOLGEN_INDEX_ONNX;
  char message[256] = {};
  int64_t shape[4];
  ASSERT_EQ(poolgen_max_unpool_output_shape(2, 4, in_shape, &o, shape, message, sizeof message),
            POOLGEN_OK)
      << message;
  EXPECT_EQ(shape[3], 5);
  ASSERT_EQ(poolgen_max_unpool(2, &t_values, &t_indices, &t_out, &o, message, sizeof message),
            POOLGEN_OK)
      << message;
  EXPECT_EQ(out[6], 5.0f);  // (1, 1): the 4x4 frame's coordinates
  EXPECT_EQ(out[18], 8.0f);
  o.output_size_rule = POOLGEN_OUTPUT_SIZE_ONNX_RUNTIME;  // flat in the 5x5 output
  ASSERT_EQ(poolgen_max_unpool(2, &t_values, &t_indices, &t_out, &o, message, sizeof message),
            POOLGEN_OK)
      << message;
  EXPECT_EQ(out[5], 5.0f);
  EXPECT_EQ(out[15], 8.0f);
  EXPECT_EQ(out[6], 0.0f);
  o.padding_end_given = 1;  // pads (0, 0) begin, (1, 1) end: default 3x3, 5x5 still >= 9
  o.padding_end[0] = o.padding_end[1] = 1;
  EXPECT_EQ(poolgen_max_unpool(2, &t_values, &t_indices, &t_out, &o, message, sizeof message),
            POOLGEN_OK)
      << message;
  o.output_size_rule = POOLGEN_OUTPUT_SIZE_PYTORCH;  // 5 is beyond 3 + stride - 1
  EXPECT_EQ(poolgen_max_unpool(2, &t_values, &t_indices, &t_out, &o, message, sizeof message),
            POOLGEN_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(message, "between 2 and 4"), nullptr) << message;
}

// Every way to misuse the frameworks' options.
TEST(Frameworks, PoolOptionErrors) {
  std::vector<float> in(16, 1.0f), values(16);
  Ints indices(16);
  auto run = [&](const PoolOptions& o, const Ints& out_shape = {1, 1, 2, 2}) {
    return max_pool(2, contiguous(in.data(), {1, 1, 4, 4}), contiguous(values.data(), out_shape),
                    contiguous(indices.data(), out_shape), o);
  };
  PoolOptions base;
  base.kernel_size = {2};
  ASSERT_TRUE(run(base).ok());
  {
    PoolOptions o = base;
    o.auto_pad = static_cast<AutoPad>(4);
    expect_error(run(o), Code::invalid_argument, {"auto_pad: expected an AutoPad", "got 4"});
    o.auto_pad = AutoPad::same_upper;
    o.padding = {1};
    expect_error(run(o), Code::invalid_argument,
                 {"padding: expected 0 and no padding_end with auto_pad 1", "got padding [1]"});
    o.padding = {0};
    o.padding_end = {0};
    expect_error(run(o), Code::invalid_argument, {"padding_end [0]"});
    o.padding_end = {};
    o.ceil_mode = true;
    expect_error(run(o), Code::invalid_argument, {"ceil_mode: expected false with auto_pad 1"});
    o.auto_pad = AutoPad::valid;  // VALID keeps ceil_mode, as ONNX Runtime does
    EXPECT_TRUE(run(o).ok());
  }
  {
    PoolOptions o = base;
    o.padding_end = {1, 1, 1};
    expect_error(run(o), Code::invalid_argument, {"padding_end: expected 1 or 2 entries, got 3"});
    o.padding_end = {-1};
    expect_error(run(o), Code::invalid_argument, {"padding_end: expected every entry >= 0"});
    o.padding_end = {2};
    expect_error(run(o, {1, 1, 3, 3}), Code::invalid_argument,
                 {"padding_end: expected less than kernel_size (2)", "got 2"});
    o.padding_end = {0};
    o.padding = {1, 2};
    expect_error(run(o, {1, 1, 3, 3}), Code::invalid_argument,
                 {"padding: expected less than kernel_size (2)", "spatial dimension 1, got 2"});
    o.padding = {1};  // beyond PyTorch's half kernel, within ONNX's limit
    EXPECT_TRUE(run(o, {1, 1, 2, 2}).ok());
  }
  {
    PoolOptions o = base;
    o.max_rule = static_cast<MaxRule>(2);
    expect_error(run(o), Code::invalid_argument, {"max_rule: expected a MaxRule", "got 2"});
    o.max_rule = MaxRule::first_tap;
    o.index_format = static_cast<IndexFormat>(7);
    expect_error(run(o), Code::invalid_argument, {"index_format: expected an IndexFormat", "got 7"});
  }
  {
    // pool_rule: a known one; TensorFlow's has no ceil_mode; ONNX Runtime's SAME padding may be
    // negative (a stride past the kernel's reach: windows start inside the input), TensorFlow's
    // (and PyTorch's) SAME clamps it at 0.
    PoolOptions o = base;
    o.pool_rule = static_cast<PoolRule>(3);
    expect_error(run(o), Code::invalid_argument, {"pool_rule: expected a PoolRule", "got 3"});
    o.pool_rule = PoolRule::tensorflow;
    o.ceil_mode = true;
    expect_error(run(o), Code::invalid_argument,
                 {"ceil_mode: expected false with pool_rule tensorflow", "got true"});
    o.ceil_mode = false;
    o.kernel_size = {1};
    o.stride = {4};
    o.auto_pad = AutoPad::same_upper;
    in[0] = 2.0f;
    in[5] = 3.0f;
    EXPECT_TRUE(run(o, {1, 1, 1, 1}).ok());  // 4 -> 1: one window at 0 (padding 0, not -3)
    EXPECT_EQ(values[0], 2.0f);
    EXPECT_EQ(indices[0], 0);
    // ONNX Runtime: need -3, padding trunc(-3 / 2) = -1 before: the window at (1, 1); the same
    // for SAME_LOWER, trunc(-2 / 2).
    o.pool_rule = PoolRule::onnx_runtime;
    for (AutoPad same : {AutoPad::same_upper, AutoPad::same_lower}) {
      o.auto_pad = same;
      ASSERT_TRUE(run(o, {1, 1, 1, 1}).ok());
      EXPECT_EQ(values[0], 3.0f);
      EXPECT_EQ(indices[0], 5);
    }
    in[0] = in[5] = 1.0f;
    // An extent below the rule's minimum names the input and the extent it would have.
    Ints shape;
    o = base;
    o.kernel_size = {6};
    o.stride = {2};
    o.pool_rule = PoolRule::onnx_runtime;
    EXPECT_TRUE(max_pool_output_shape(2, {1, 1, 4, 4}, o, &shape).ok());
    EXPECT_EQ(shape, (Ints{1, 1, 0, 0}));  // 4 - 6 = -2: a stride short, an empty output
    o.kernel_size = {5};
    EXPECT_TRUE(max_pool_output_shape(2, {1, 1, 4, 4}, o, &shape).ok());
    EXPECT_EQ(shape, (Ints{1, 1, 1, 1}));  // -1 / 2 truncates to 0 (floor: -1)
    o.kernel_size = {8};
    expect_error(max_pool_output_shape(2, {1, 1, 4, 4}, o, &shape), Code::invalid_argument,
                 {"input: expected spatial dimension 0 to hold a window", "would be -1"});
    o.pool_rule = PoolRule::tensorflow;
    o.kernel_size = {5};
    EXPECT_TRUE(max_pool_output_shape(2, {1, 1, 4, 4}, o, &shape).ok());
    EXPECT_EQ(shape, (Ints{1, 1, 0, 0}));  // (4 - 5 + 2) / 2
    o.pool_rule = PoolRule::pytorch;
    expect_error(max_pool_output_shape(2, {1, 1, 4, 4}, o, &shape), Code::invalid_argument,
                 {"would be 0"});
  }
  {
    // A window with no tap inside (dilation and padding past the input): PyTorch's index for it
    // (its first tap's, outside the plane) no other format carries, so with PyTorch's rule that
    // is refused before anything is written; ONNX Runtime's rule gives its own answer.
    std::vector<float> row(2, 1.0f), v(1, 5.0f);
    Ints i(1, -7);
    PoolOptions o;
    o.kernel_size = {1, 2};
    o.stride = {3, 1};
    o.padding = {0, 1};
    o.dilation = {3, 3};
    const Ints out = {1, 1, 1, 1};
    const auto pool = [&](const PoolOptions& options) {
      return max_pool(2, contiguous(row.data(), {1, 1, 1, 2}), contiguous(v.data(), out),
                      contiguous(i.data(), out), options);
    };
    ASSERT_TRUE(pool(o).ok());
    EXPECT_EQ(i[0], 2);  // outside the 1x2 plane
    EXPECT_EQ(v[0], -std::numeric_limits<float>::infinity());
    v[0] = 5.0f;
    i[0] = -7;
    o.index_format = IndexFormat::onnx;
    expect_error(pool(o), Code::invalid_argument,
                 {"index_format: expected plane offsets where windows hold no tap",
                  "spatial dimension 1", "pool_rule 0", "got onnx"});
    EXPECT_EQ(v[0], 5.0f);  // nothing written
    EXPECT_EQ(i[0], -7);
    o.pool_rule = PoolRule::tensorflow;
    expect_error(pool(o), Code::invalid_argument,
                 {"padding: expected every window to hold a tap", "spatial dimension 1"});
    EXPECT_EQ(i[0], -7);
    // ONNX Runtime's: the lowest finite value, the index of coordinates (n, c, -1, -1): -W - 1
    // in row-major order, -H - 1 in column-major.
    o.pool_rule = PoolRule::onnx_runtime;
    ASSERT_TRUE(pool(o).ok());
    EXPECT_EQ(v[0], std::numeric_limits<float>::lowest());
    EXPECT_EQ(i[0], -3);
    o.index_format = IndexFormat::onnx_column_major;
    ASSERT_TRUE(pool(o).ok());
    EXPECT_EQ(i[0], -2);
    // Calls large enough to share their passes among threads, in blocks of images or of one
    // image's channels: each plane's window gets its own plane's answer.
    o.index_format = IndexFormat::onnx;
    set_num_threads(2);
    for (const Ints& shape : {Ints{4, 4096, 1, 2}, Ints{1, 16384, 1, 2}}) {
      std::vector<float> input(shape[0] * shape[1] * 2, 1.0f), values(input.size() / 2);
      Ints indices(values.size());
      const Ints pooled = {shape[0], shape[1], 1, 1};
      ASSERT_TRUE(max_pool(2, contiguous(input.data(), shape), contiguous(values.data(), pooled),
                           contiguous(indices.data(), pooled), o)
                      .ok());
      for (size_t p = 0; p < indices.size(); ++p) {
        ASSERT_EQ(indices[p], static_cast<int64_t>(p) * 2 - 3) << "plane " << p;
        ASSERT_EQ(values[p], std::numeric_limits<float>::lowest()) << "plane " << p;
      }
    }
    set_num_threads(0);
  }
  {
    // i32 indices must hold the format's largest index, checked before anything is read: the
    // planes of a 65536 x 65536 x 4 frame fit i32, its ONNX indices do not (with N = 0 there is
    // no index at all).
    PoolOptions o = base;
    o.index_format = IndexFormat::onnx;
    const Ints frame = {0, 65536, 65536, 4}, pooled = {0, 65536, 32768, 2};
    Status st = max_pool(2, contiguous(static_cast<float*>(nullptr), frame),
                         contiguous(static_cast<float*>(nullptr), pooled),
                         contiguous(static_cast<int32_t*>(nullptr), pooled), o);
    EXPECT_TRUE(st.ok()) << st.message();  // N = 0: no index at all
    const Ints big = {1, 65536, 65536, 4}, big_pooled = {1, 65536, 32768, 2};
    std::vector<float> one(1);
    st = max_pool(2, contiguous(one.data(), big), contiguous(one.data(), big_pooled),
                  contiguous(reinterpret_cast<int32_t*>(one.data()), big_pooled), o);
    expect_error(st, Code::invalid_argument, {"indices: expected i64", "reach", "got i32"});
  }
}

// The gradient under the frameworks' window arithmetic: TensorFlow's empty VALID output has an
// all-zero gradient; ONNX Runtime's negative SAME padding (windows inside the input) scatters
// to the indices its forward gave.
TEST(Frameworks, PoolRuleGradients) {
  PoolOptions o;
  o.kernel_size = {3, 1};
  o.stride = {2, 1};
  o.auto_pad = AutoPad::valid;
  o.pool_rule = PoolRule::tensorflow;
  o.max_rule = MaxRule::first_tap;
  o.index_format = IndexFormat::tensorflow;
  std::vector<float> grad_input(6, 7.0f), none;
  Ints no_indices;
  ASSERT_TRUE(max_pool_backward(2, contiguous(none.data(), {1, 1, 0, 3}),
                                contiguous(no_indices.data(), {1, 1, 0, 3}),
                                contiguous(grad_input.data(), {1, 1, 2, 3}), o)
                  .ok());
  EXPECT_EQ(grad_input, std::vector<float>(6, 0.0f));
  // Prepared, and the forward op: the empty side without data reaches no kernel.
  PreparedCall call;
  ASSERT_TRUE(prepare_max_pool_backward(2, contiguous(none.data(), {1, 1, 0, 3}),
                                        contiguous(no_indices.data(), {1, 1, 0, 3}),
                                        contiguous(grad_input.data(), {1, 1, 2, 3}), o, &call)
                  .ok());
  grad_input.assign(6, 7.0f);
  ASSERT_TRUE(call.run(nullptr, nullptr, grad_input.data()).ok());
  EXPECT_EQ(grad_input, std::vector<float>(6, 0.0f));
  EXPECT_TRUE(max_pool(2, contiguous(grad_input.data(), {1, 1, 2, 3}),
                       contiguous(none.data(), {1, 1, 0, 3}),
                       contiguous(no_indices.data(), {1, 1, 0, 3}), o)
                  .ok());

  std::vector<float> in(16, 1.0f), values(1), grad(1, 2.5f), grad_in(16, 7.0f);
  in[5] = 3.0f;
  Ints indices(1);
  o = PoolOptions();
  o.kernel_size = {1};
  o.stride = {4};
  o.auto_pad = AutoPad::same_upper;
  o.pool_rule = PoolRule::onnx_runtime;
  o.index_format = IndexFormat::onnx;
  ASSERT_TRUE(max_pool(2, contiguous(in.data(), {1, 1, 4, 4}), contiguous(values.data(), {1, 1, 1, 1}),
                       contiguous(indices.data(), {1, 1, 1, 1}), o)
                  .ok());
  ASSERT_EQ(indices[0], 5);
  ASSERT_TRUE(max_pool_backward(2, contiguous(grad.data(), {1, 1, 1, 1}),
                                contiguous(indices.data(), {1, 1, 1, 1}),
                                contiguous(grad_in.data(), {1, 1, 4, 4}), o)
                  .ok());
  for (int p = 0; p < 16; ++p) EXPECT_EQ(grad_in[p], p == 5 ? 2.5f : 0.0f) << p;
}

// The C API's fields for the same options: ONNX's pads (1, 0) on a 1x4 row, first tap, global
// indices in the second plane.
TEST(Frameworks, CApiPoolOptions) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float in[8] = {0, 0, 0, 0, 1, nan, 2, 3};  // planes (0, 0) and (0, 1) of 1x2x1x4
  float values[4];
  int64_t indices[4];
  const poolgen_tensor t_in = test::c_tensor(in, POOLGEN_F32, {1, 2, 4}),
                       t_values = test::c_tensor(values, POOLGEN_F32, {1, 2, 2}),
                       t_indices = test::c_tensor(indices, POOLGEN_I64, {1, 2, 2});
  poolgen_pool_options o{};
  o.kernel_size[0] = 2;
  o.stride[0] = 2;
  o.padding[0] = 1;
  o.padding_end_given = 1;  // (1, 0): windows [-1, 0] and [1, 2]
  o.max_rule = POOLGEN_MAX_FIRST_TAP;
  o.index_format = POOLGEN_INDEX_ONNX;
  char message[256] = {};
  ASSERT_EQ(poolgen_max_pool(1, &t_in, &t_values, &t_indices, &o, message, sizeof message),
            POOLGEN_OK)
      << message;
  // Plane (0, 1): window [-1, 0] holds 1; [1, 2] holds NaN then 2: the NaN first tap stays.
  EXPECT_EQ(values[2], 1.0f);
  EXPECT_TRUE(std::isnan(values[3]));
  EXPECT_EQ(indices[2], 4 + 0);
  EXPECT_EQ(indices[3], 4 + 1);
  o.padding_end_given = 0;  // symmetric (1, 1): three windows, a 1x2 output is refused
  EXPECT_EQ(poolgen_max_pool(1, &t_in, &t_values, &t_indices, &o, message, sizeof message),
            POOLGEN_INVALID_ARGUMENT);
  o.padding[0] = 0;
  o.auto_pad = POOLGEN_SAME_UPPER;  // 4 / 2 = 2 windows, no padding needed
  ASSERT_EQ(poolgen_max_pool(1, &t_in, &t_values, &t_indices, &o, message, sizeof message),
            POOLGEN_OK)
      << message;
  EXPECT_EQ(indices[2], 4 + 0);  // (1, NaN): first tap 1, NaN never wins
  EXPECT_EQ(values[2], 1.0f);
  EXPECT_EQ(indices[3], 4 + 3);
  // pool_rule: ONNX Runtime's truncation gives a kernel of 5 over 4 one window per plane
  // (PyTorch's floor none); the output shape query follows it too.
  o.auto_pad = POOLGEN_EXPLICIT_PADDING;
  o.padding[0] = 0;
  o.kernel_size[0] = 5;
  o.stride[0] = 2;
  int64_t shape[3] = {};
  const int64_t in_shape[3] = {1, 2, 4};
  EXPECT_EQ(poolgen_max_pool_output_shape(1, 3, in_shape, &o, shape, message, sizeof message),
            POOLGEN_INVALID_ARGUMENT);
  o.pool_rule = POOLGEN_POOL_RULE_ONNX_RUNTIME;
  ASSERT_EQ(poolgen_max_pool_output_shape(1, 3, in_shape, &o, shape, message, sizeof message),
            POOLGEN_OK)
      << message;
  EXPECT_EQ(shape[2], 1);
  const poolgen_tensor t_one = test::c_tensor(values, POOLGEN_F32, {1, 2, 1}),
                       t_one_index = test::c_tensor(indices, POOLGEN_I64, {1, 2, 1});
  ASSERT_EQ(poolgen_max_pool(1, &t_in, &t_one, &t_one_index, &o, message, sizeof message),
            POOLGEN_OK)
      << message;
  EXPECT_EQ(values[1], 3.0f);  // plane (0, 1): 1, NaN, 2, 3 from its first tap
  EXPECT_EQ(indices[1], 4 + 3);
  o.pool_rule = 7;
  EXPECT_EQ(poolgen_max_pool(1, &t_in, &t_one, &t_one_index, &o, message, sizeof message),
            POOLGEN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(message).find("pool_rule"), std::string::npos) << message;
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

// Frames of up to 2^59 elements (the library's limit), whose TensorFlow and column-major
// indices are decoded by a multiplication (the divisions' stand-in): exact to the last index,
// each way, for divisors of every kind (odd, even, a power of two, large).
TEST(IndexFormats, LargeFramesDecodeExactly) {
  for (const int64_t channels : {3, 7, 64, 96, 1021}) {
    const int64_t width = (int64_t{1} << 58) / channels / 6;  // 2 x C x 3 x width < 2^59
    const Ints frame = {2, channels, 3, width}, pooled = {2, channels, 1, 4};
    const int64_t plane = 3 * width;
    // Offsets at the plane's ends and inside it, the same four in every plane.
    const Ints four = {plane - 1, plane / 3 + 1, 0, width - 1};
    Ints offsets;
    for (int64_t k = 0; k < 2 * channels; ++k) offsets.insert(offsets.end(), four.begin(), four.end());
    for (const IndexFormat f : {IndexFormat::tensorflow, IndexFormat::tensorflow_with_batch,
                                IndexFormat::onnx_column_major}) {
      SCOPED_TRACE(std::string(index_format_name(f)) + " C " + std::to_string(channels));
      Ints formatted(offsets.size()), back(offsets.size());
      ASSERT_TRUE(convert_indices(2, frame, contiguous(offsets.data(), pooled), IndexFormat::plane,
                                  contiguous(formatted.data(), pooled), f)
                      .ok());
      for (size_t j = 0; j < offsets.size(); ++j) {
        const int64_t n = static_cast<int64_t>(j) / (4 * channels);
        const int64_t c = static_cast<int64_t>(j) / 4 % channels, p = offsets[j];
        const int64_t y = p / width, x = p % width;
        const int64_t want = f == IndexFormat::tensorflow ? p * channels + c
                             : f == IndexFormat::tensorflow_with_batch
                                 ? (n * plane + p) * channels + c
                                 : (n * channels + c) * plane + x * 3 + y;
        ASSERT_EQ(formatted[j], want) << "element " << j;
      }
      ASSERT_TRUE(convert_indices(2, frame, contiguous(formatted.data(), pooled), f,
                                  contiguous(back.data(), pooled), IndexFormat::plane)
                      .ok());
      EXPECT_EQ(back, offsets);
      formatted[3] += f == IndexFormat::onnx_column_major ? plane : 1;  // another plane's
      EXPECT_EQ(convert_indices(2, frame, contiguous(formatted.data(), pooled), f,
                                contiguous(back.data(), pooled), IndexFormat::plane)
                    .code(),
                Code::index_out_of_range);
    }
  }
}

// TensorFlow's indices are decoded by an exact division by C (a shift and a multiplication by
// the odd part's inverse, with no remainder computed): every index within a few planes of the
// valid ones, each way, must decode where (index - c) is a multiple of C naming an element of
// the frame, and be refused elsewhere; on the affine loop (i64 into another view) and the
// rows' loop (in place), for channel counts odd, even and powers of two.
TEST(IndexFormats, TensorFlowIndicesDecodeOnlyInTheirOwnChannel) {
  for (const int64_t channels : {1, 2, 3, 6, 12, 64}) {
    for (const IndexFormat f : {IndexFormat::tensorflow, IndexFormat::tensorflow_with_batch}) {
      SCOPED_TRACE(std::string(index_format_name(f)) + " C " + std::to_string(channels));
      const Ints frame = {2, channels, 2, 2}, pooled = {2, channels, 1, 1};
      const int64_t plane = 4, n = 1;  // the element under test is in the second image
      const int64_t base = f == IndexFormat::tensorflow ? 0 : n * plane * channels;
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t v = base - 3 * channels; v < base + (plane + 3) * channels; ++v) {
          Ints formatted(2 * channels);
          for (int64_t k = 0; k < 2 * channels; ++k) {  // all valid: offset 0 of their plane
            formatted[k] = (f == IndexFormat::tensorflow ? 0 : k / channels * plane * channels) +
                           k % channels;
          }
          formatted[n * channels + c] = v;
          const bool valid = (v - base - c) % channels == 0 && v - base - c >= 0 &&
                             (v - base - c) / channels < plane;
          Ints out(formatted.size(), -1);
          const Status affine = convert_indices(2, frame, contiguous(formatted.data(), pooled),
                                                f, contiguous(out.data(), pooled),
                                                IndexFormat::plane);
          ASSERT_EQ(affine.ok(), valid) << "index " << v << " in channel " << c;
          if (valid) {
            ASSERT_EQ(out[n * channels + c], (v - base - c) / channels);
          }
          const Status rows = convert_indices(2, frame, contiguous(formatted.data(), pooled), f,
                                              contiguous(formatted.data(), pooled),
                                              IndexFormat::plane);
          ASSERT_EQ(rows.ok(), valid) << "in place: index " << v << " in channel " << c;
          if (valid) {
            ASSERT_EQ(formatted, out);
          }
        }
      }
    }
  }
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
    // Any value may come in: the extremes are refused, never overflowed (UBSan's build checks).
    for (IndexFormat f : {IndexFormat::plane, IndexFormat::onnx, IndexFormat::tensorflow,
                          IndexFormat::tensorflow_with_batch, IndexFormat::onnx_column_major}) {
      for (int64_t extreme : {std::numeric_limits<int64_t>::min(),
                              std::numeric_limits<int64_t>::max()}) {
        ErrorCase e;
        e.a = f;
        e.b = IndexFormat::plane;
        e.from.assign(8, extreme);
        expect_error(e.run(), Code::index_out_of_range, {"got " + std::to_string(extreme)});
      }
    }
  }
  {
    // In place, through the affine loop: the planes and chunks before the bad index are already
    // rewritten when it is found, and it is named as it came, at its own coordinates (planes of
    // 32x32 pooled elements, chunks of 256; contiguous, then channels-last memory).
    const Ints frame = {2, 3, 64, 64}, pooled = {2, 3, 32, 32};
    for (const bool last : {false, true}) {
      Ints indices(2 * 3 * 32 * 32);
      for (size_t k = 0; k < indices.size(); ++k) indices[k] = static_cast<int64_t>(k % 4096);
      const TensorView view = last ? channels_last(indices.data(), pooled)
                                   : contiguous(indices.data(), pooled);
      // Element [1, 2, 20, 7]: its offset in either memory order.
      const int64_t at = last ? ((1 * 32 + 20) * 32 + 7) * 3 + 2 : ((1 * 3 + 2) * 32 + 20) * 32 + 7;
      indices[at] = 4096;
      expect_error(convert_indices(2, frame, view, IndexFormat::plane, view, IndexFormat::onnx),
                   Code::index_out_of_range, {"got 4096 at element [1, 2, 20, 7]"});
    }
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
