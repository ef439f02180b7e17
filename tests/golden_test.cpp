// The library against PyTorch's golden vectors (the reference is checked against them by
// reference_test). Every case runs with i64 and i32 indices, with all its tensors contiguous and
// with all of them channels-last (whichever layout PyTorch computed the case in: layouts must
// agree), on Path::automatic and Path::general (not the unpooling backward's: it has one
// kernel), plus once with the outputs in the other layout than the inputs. Outputs sit between
// guard elements that must come back untouched and are filled with a sentinel beforehand (twice,
// with two sentinels, so no element can pass unwritten by matching the sentinel); inputs must
// come back unchanged.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "built_kernels.hpp"
#include "golden_cases.hpp"
#include "poolgen/poolgen.hpp"

namespace poolgen {
namespace {

using golden::Case;
using golden::LibraryRun;

constexpr int64_t kGuard = 16;       // guard elements on each side of every output
constexpr uint8_t kGuardByte = 0xa7;
constexpr uint8_t kSentinels[] = {0x5c, 0xc3};

const char* path_str(Path p) { return p == Path::automatic ? "automatic" : "general"; }

Layout other(Layout l) {
  return l == Layout::contiguous ? Layout::channels_last : Layout::contiguous;
}

int64_t count(const Ints& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

// Strides (in elements, PyTorch order) of a dense `layout` tensor of `shape` (rank nd+2, or
// nd+1 batch-less). Channels-last memory holds (N, spatial..., C).
Ints layout_strides(int nd, Layout layout, const Ints& shape) {
  const size_t rank = shape.size();
  Ints s(rank, 1);
  if (layout == Layout::contiguous) {
    for (size_t d = rank - 1; d-- > 0;) s[d] = s[d + 1] * shape[d + 1];
    return s;
  }
  const size_t c = rank == static_cast<size_t>(nd) + 2 ? 1 : 0;  // channel dimension
  s[c] = 1;
  int64_t step = shape[c];
  for (size_t d = rank; d-- > c + 1;) {  // spatial, innermost first
    s[d] = step;
    step *= shape[d];
  }
  if (c == 1) s[0] = step;
  return s;
}

// Memory offset (elements) of every logical row-major position.
std::vector<int64_t> offsets(const Ints& shape, const Ints& strides) {
  std::vector<int64_t> off(static_cast<size_t>(count(shape)));
  Ints idx(shape.size(), 0);
  for (size_t i = 0; i < off.size(); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d) o += idx[d] * strides[d];
    off[i] = o;
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return off;
}

// A tensor of `count(shape)` elements of `elem` bytes in `layout`, between guard elements.
struct Buffer {
  int nd;
  Ints shape, strides;
  std::vector<int64_t> off;
  size_t elem = 0;
  std::vector<uint8_t> bytes;

  Buffer(int nd_, Layout layout, const Ints& s, size_t element_size, uint8_t fill)
      : nd(nd_), shape(s), strides(layout_strides(nd_, layout, s)), off(offsets(shape, strides)),
        elem(element_size),
        bytes(static_cast<size_t>(count(s) + 2 * kGuard) * element_size, kGuardByte) {
    std::memset(data(), fill, static_cast<size_t>(count(s)) * elem);
  }
  uint8_t* data() { return bytes.data() + kGuard * elem; }

  // Logical row-major bytes in, memory order out, and back.
  void store(const std::vector<uint8_t>& logical) {
    for (size_t i = 0; i < off.size(); ++i) {
      std::memcpy(data() + off[i] * elem, logical.data() + i * elem, elem);
    }
  }
  std::vector<uint8_t> load() {
    std::vector<uint8_t> logical(off.size() * elem);
    for (size_t i = 0; i < off.size(); ++i) {
      std::memcpy(logical.data() + i * elem, data() + off[i] * elem, elem);
    }
    return logical;
  }
  bool guards_intact() const {
    const size_t g = static_cast<size_t>(kGuard) * elem;
    for (size_t i = 0; i < g; ++i) {
      if (bytes[i] != kGuardByte || bytes[bytes.size() - 1 - i] != kGuardByte) return false;
    }
    return true;
  }
};

// The view of a buffer: poolgen::contiguous / poolgen::channels_last, except for batch-less
// channels-last tensors, which get explicit strides: channels_last() sees only a shape, and reads
// rank 3 as (N, C, L) and rank 4 as (N, C, H, W), so it cannot describe a batch-less (C, H, W)
// or (C, D, H, W) tensor with the channel innermost.
TensorView view(Buffer& b, DType dtype, Layout layout) {
  if (layout == Layout::contiguous) return contiguous(b.data(), dtype, b.shape);
  if (b.shape.size() == static_cast<size_t>(b.nd) + 2) {
    return channels_last(b.data(), dtype, b.shape);
  }
  TensorView v;
  v.data = b.data();
  v.dtype = dtype;
  v.shape = b.shape;
  v.strides = b.strides;
  return v;
}

// Effective strides of a view (empty means row-major).
Ints view_strides(const TensorView& v) {
  if (!v.strides.empty()) return v.strides;
  Ints s(v.shape.size(), 1);
  for (size_t d = v.shape.size(); d-- > 1;) s[d - 1] = s[d] * v.shape[d];
  return s;
}

std::vector<uint8_t> index_bytes(const std::vector<int64_t>& idx, DType index_dtype) {
  if (index_dtype == DType::i64) return golden::bytes_of(idx);
  std::vector<int32_t> narrow(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    EXPECT_EQ(idx[i], static_cast<int32_t>(idx[i])) << "index does not fit i32";
    narrow[i] = static_cast<int32_t>(idx[i]);
  }
  return golden::bytes_of(narrow);
}

std::vector<int64_t> widen_indices(const std::vector<uint8_t>& b, DType index_dtype) {
  if (index_dtype == DType::i64) return golden::values_as<int64_t>(b);
  std::vector<int32_t> narrow = golden::values_as<int32_t>(b);
  return std::vector<int64_t>(narrow.begin(), narrow.end());
}

// What a run is, for failure messages.
std::string run_trace(const char* inputs, Layout in_layout, const char* outputs,
                      Layout out_layout, Path path, uint8_t sentinel) {
  return std::string(inputs) + " " + golden::layout_str(in_layout) + ", " + outputs + " " +
         golden::layout_str(out_layout) + ", path " + path_str(path) + ", sentinel 0x" +
         (sentinel == kSentinels[0] ? "5c" : "c3");
}

#define EXPECT_NO_DIFF(diff)                      \
  do {                                            \
    const std::string d_ = (diff);                \
    EXPECT_TRUE(d_.empty()) << d_;                \
  } while (0)

void run_pool(const Case& c, DType index_dtype, Layout in_layout, Layout out_layout, Path path,
              uint8_t sentinel) {
  const size_t w = golden::dtype_bytes(c.dtype), iw = golden::dtype_bytes(index_dtype);
  SCOPED_TRACE(run_trace("input", in_layout, "outputs", out_layout, path, sentinel));
  Buffer in(c.nd, in_layout, c.input_shape, w, 0);
  in.store(c.in_values);
  Buffer vals(c.nd, out_layout, c.output_shape, w, sentinel);
  Buffer idx(c.nd, out_layout, c.output_shape, iw, sentinel);
  PoolOptions o = c.pool;
  o.path = path;
  const TensorView iv = view(in, c.dtype, in_layout);
  EXPECT_EQ(view_strides(iv), in.strides) << "view maker strides";
  std::string kernel;
  Status st = max_pool_kernel_name(c.nd, iv, index_dtype, o, &kernel);
  ASSERT_TRUE(st.ok()) << "max_pool_kernel_name: " << st.message();
  SCOPED_TRACE("kernel " + kernel);
  const std::vector<uint8_t> before = in.bytes;
  st = max_pool(c.nd, iv, view(vals, c.dtype, out_layout), view(idx, index_dtype, out_layout), o);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(in.bytes == before) << "the input was written";
  EXPECT_TRUE(vals.guards_intact()) << "elements around the values were written";
  EXPECT_TRUE(idx.guards_intact()) << "elements around the indices were written";
  EXPECT_NO_DIFF(golden::compare_values(c.dtype, c.out_values, vals.load(), c.output_shape));
  EXPECT_NO_DIFF(golden::compare_indices(c.out_indices, widen_indices(idx.load(), index_dtype)));
}

void run_unpool(const Case& c, DType index_dtype, Layout in_layout, Layout out_layout, Path path,
                uint8_t sentinel) {
  const size_t w = golden::dtype_bytes(c.dtype), iw = golden::dtype_bytes(index_dtype);
  SCOPED_TRACE(run_trace("inputs", in_layout, "output", out_layout, path, sentinel));
  Buffer vals(c.nd, in_layout, c.input_shape, w, 0);
  vals.store(c.in_values);
  Buffer idx(c.nd, in_layout, c.input_shape, iw, 0);
  idx.store(index_bytes(c.in_indices, index_dtype));
  Buffer out(c.nd, out_layout, c.output_shape, w, sentinel);
  UnpoolOptions o = c.unpool;
  o.path = path;
  const TensorView vv = view(vals, c.dtype, in_layout);
  EXPECT_EQ(view_strides(vv), vals.strides) << "view maker strides";
  std::string kernel;
  Status st = max_unpool_kernel_name(c.nd, vv, index_dtype, o, &kernel);
  ASSERT_TRUE(st.ok()) << "max_unpool_kernel_name: " << st.message();
  SCOPED_TRACE("kernel " + kernel);
  const std::vector<uint8_t> vbefore = vals.bytes, ibefore = idx.bytes;
  st = max_unpool(c.nd, vv, view(idx, index_dtype, in_layout), view(out, c.dtype, out_layout), o);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(vals.bytes == vbefore && idx.bytes == ibefore) << "an input was written";
  EXPECT_TRUE(out.guards_intact()) << "elements around the output were written";
  EXPECT_NO_DIFF(golden::compare_values(c.dtype, c.out_values, out.load(), c.output_shape));
}

// One backward call: grad_output (output_shape) and the indices (index_shape) in in_layout, the
// gradient (input_shape, `expected`) computed in out_layout. name(grad_output view, &kernel) and
// run(grad_output, indices, gradient views) call the op's kernel_name and the op.
template <typename Name, typename Run>
void run_backward(const Case& c, const std::vector<int64_t>& indices, const Ints& index_shape,
                  const std::vector<uint8_t>& expected, DType index_dtype, Layout in_layout,
                  Layout out_layout, uint8_t sentinel, Name name, Run run) {
  const size_t w = golden::dtype_bytes(c.dtype), iw = golden::dtype_bytes(index_dtype);
  Buffer grad(c.nd, in_layout, c.output_shape, w, 0);
  grad.store(c.grad_output);
  Buffer idx(c.nd, in_layout, index_shape, iw, 0);
  idx.store(index_bytes(indices, index_dtype));
  Buffer out(c.nd, out_layout, c.input_shape, w, sentinel);
  const TensorView gv = view(grad, c.dtype, in_layout);
  EXPECT_EQ(view_strides(gv), grad.strides) << "view maker strides";
  std::string kernel;
  Status st = name(gv, &kernel);
  ASSERT_TRUE(st.ok()) << "kernel name: " << st.message();
  SCOPED_TRACE("kernel " + kernel);
  const std::vector<uint8_t> gbefore = grad.bytes, ibefore = idx.bytes;
  st = run(gv, view(idx, index_dtype, in_layout), view(out, c.dtype, out_layout));
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(grad.bytes == gbefore && idx.bytes == ibefore) << "an input was written";
  EXPECT_TRUE(out.guards_intact()) << "elements around the gradient were written";
  EXPECT_NO_DIFF(golden::compare_values(c.dtype, expected, out.load(), c.input_shape));
}

void run_pool_backward(const Case& c, DType index_dtype, Layout in_layout, Layout out_layout,
                       Path path, uint8_t sentinel) {
  SCOPED_TRACE(run_trace("grad_output and indices", in_layout, "grad_input", out_layout, path,
                         sentinel));
  PoolOptions o = c.pool;
  o.path = path;
  run_backward(
      c, c.out_indices, c.output_shape, c.grad_input, index_dtype, in_layout, out_layout,
      sentinel,
      [&](const TensorView& g, std::string* kernel) {
        return max_pool_backward_kernel_name(c.nd, g, index_dtype, c.input_shape, o, kernel);
      },
      [&](const TensorView& g, const TensorView& i, const TensorView& gi) {
        return max_pool_backward(c.nd, g, i, gi, o);
      });
}

void run_unpool_backward(const Case& c, DType index_dtype, Layout in_layout, Layout out_layout,
                         uint8_t sentinel) {
  SCOPED_TRACE(run_trace("grad_output and indices", in_layout, "grad_values", out_layout,
                         Path::automatic, sentinel));
  run_backward(
      c, c.in_indices, c.input_shape, c.grad_values, index_dtype, in_layout, out_layout, sentinel,
      [&](const TensorView& g, std::string* kernel) {
        return max_unpool_backward_kernel_name(c.nd, g, index_dtype, c.input_shape, c.unpool,
                                               kernel);
      },
      [&](const TensorView& g, const TensorView& i, const TensorView& gv) {
        return max_unpool_backward(c.nd, g, i, gv, c.unpool);
      });
}

// Whether this build compiled a kernel for the case's op, value dtype and index dtype.
bool kernel_built(const Case& c, DType index_dtype) {
  if (c.op == "pool") return test::pool_kernel_built(c.dtype, index_dtype);
  if (c.op == "unpool") return test::unpool_kernel_built(c.dtype, index_dtype);
  if (c.op == "pool_backward") return test::pool_backward_kernel_built(c.dtype, index_dtype);
  return test::unpool_backward_kernel_built(c.dtype, index_dtype);
}

class Golden : public ::testing::TestWithParam<LibraryRun> {};

TEST_P(Golden, LibraryBitExact) {
  const LibraryRun& r = GetParam();
  const Case& c = r.golden();
  ASSERT_TRUE(golden::known_op(c.op)) << c.op;
  SCOPED_TRACE(c.file + ":" + c.name + " (" + golden::dtype_str(c.dtype) + ", PyTorch layout " +
               golden::layout_str(c.layout) + "), " + golden::dtype_str(r.index_dtype) +
               " indices");
  if (!kernel_built(c, r.index_dtype)) {
    GTEST_SKIP() << "this build compiles no " << c.op << " kernel for " << dtype_name(c.dtype)
                 << " values with " << dtype_name(r.index_dtype)
                 << " indices (POOLGEN_VALUE_TYPES, POOLGEN_INDEX_TYPES)";
  }
  if (c.op == "pool") {
    Ints shape;
    Status st = max_pool_output_shape(c.nd, c.input_shape, c.pool, &shape);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(shape, c.output_shape) << "max_pool_output_shape";
    for (Path path : {Path::automatic, Path::general}) {
      for (uint8_t s : kSentinels) run_pool(c, r.index_dtype, r.layout, r.layout, path, s);
    }
    run_pool(c, r.index_dtype, r.layout, other(r.layout), Path::automatic, kSentinels[0]);
  } else if (c.op == "pool_backward") {
    for (Path path : {Path::automatic, Path::general}) {
      for (uint8_t s : kSentinels) {
        run_pool_backward(c, r.index_dtype, r.layout, r.layout, path, s);
      }
    }
    run_pool_backward(c, r.index_dtype, r.layout, other(r.layout), Path::automatic,
                      kSentinels[0]);
  } else if (c.op == "unpool_backward") {
    for (uint8_t s : kSentinels) run_unpool_backward(c, r.index_dtype, r.layout, r.layout, s);
    run_unpool_backward(c, r.index_dtype, r.layout, other(r.layout), kSentinels[0]);
  } else {
    Ints shape;
    Status st = max_unpool_output_shape(c.nd, c.input_shape, c.unpool, &shape);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(shape, c.output_shape) << "max_unpool_output_shape";
    for (Path path : {Path::automatic, Path::general}) {
      for (uint8_t s : kSentinels) run_unpool(c, r.index_dtype, r.layout, r.layout, path, s);
    }
    run_unpool(c, r.index_dtype, r.layout, other(r.layout), Path::automatic, kSentinels[0]);
  }
}

INSTANTIATE_TEST_SUITE_P(PyTorch, Golden, ::testing::ValuesIn(golden::runs_for_gtest()),
                         golden::run_name);

// The runs above cover every dtype in both layouts for every op (the backward ops: the float
// dtypes) and both index dtypes.
TEST(GoldenCoverage, EveryDTypeInBothLayouts) {
  ASSERT_GT(golden::all_cases().size(), 1u) << golden::all_cases()[0].op;
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::u8,
                  DType::i16, DType::i32, DType::i64}) {
    for (Layout l : {Layout::contiguous, Layout::channels_last}) {
      for (const char* op : golden::kOps) {
        if (golden::is_backward(op) && !golden::is_float(t)) continue;
        int n = 0;
        for (const Case& c : golden::all_cases()) n += c.dtype == t && c.layout == l && c.op == op;
        EXPECT_GT(n, 0) << golden::dtype_str(t) << " " << golden::layout_str(l) << " " << op;
      }
    }
  }
}

}  // namespace
}  // namespace poolgen
