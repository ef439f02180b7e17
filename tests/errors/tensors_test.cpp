// Errors about tensors across the ops: value and index dtypes, arguments sharing memory, and
// the error kinds bindings map to their exception types.
#include "errors/common.hpp"

namespace poolgen {
namespace {

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

}  // namespace
}  // namespace poolgen
