// What the poolgen_bench sources share: value types, a benchmark case (Case: what is measured,
// Spec: a case with its buffers), the peer-library interface and the list of correctness problems.
#pragma once

#include <poolgen/poolgen.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace bench {

using poolgen::DType;
using poolgen::Ints;

int all_threads();  // std::thread::hardware_concurrency(), at least 1

// ---------------------------------------------------------------------------------------------
// Value types: the reference compares keys (floats widened to float, integers as they are) and
// copies the original bits; add() is the gradients' addition in the type's own arithmetic (16-bit
// floats round after every addition, as PyTorch's CPU kernels); random() makes the inputs.

float f16_to_float(uint16_t h);
uint16_t float_to_f16(float f);  // rounded to nearest, ties to even (reference.cpp)
inline uint16_t float_to_bf16(float f) {  // rounded to nearest, ties to even; NaN stays quiet NaN
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}
inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <class T> struct ValueTraits {  // integers: the top bits of r, the type's whole range
  static T key(T v) { return v; }
  static T lowest() { return std::numeric_limits<T>::lowest(); }
  static T random(uint64_t r) { return static_cast<T>(r >> (64 - 8 * sizeof(T))); }
  static T add(T a, T b) { return static_cast<T>(a + b); }  // unused: gradients are floats
};
template <> struct ValueTraits<float> {
  static float key(float v) { return v; }
  static float lowest() { return -std::numeric_limits<float>::infinity(); }
  // uniform in [-1, 1) on a grid of 2^-23 (the sequence of the first f32 benchmarks)
  static float random(uint64_t r) { return static_cast<float>(r >> 40) / 8388608.0f - 1.0f; }
  static float add(float a, float b) { return a + b; }
};
template <> struct ValueTraits<double> {
  static double key(double v) { return v; }
  static double lowest() { return -std::numeric_limits<double>::infinity(); }
  static double random(uint64_t r) { return static_cast<double>(r >> 11) / 4503599627370496.0 - 1.0; }
  static double add(double a, double b) { return a + b; }
};
template <> struct ValueTraits<poolgen::f16_t> {
  static float key(poolgen::f16_t v) { return f16_to_float(v.bits); }
  static poolgen::f16_t lowest() { return {0xFC00}; }
  static poolgen::f16_t random(uint64_t r) {  // finite, |v| < 1: exponent 0..14, any mantissa
    return {static_cast<uint16_t>(((r >> 63) << 15) | (((r >> 40) % 15) << 10) | ((r >> 20) & 0x3ff))};
  }
  static poolgen::f16_t add(poolgen::f16_t a, poolgen::f16_t b) {
    return {float_to_f16(key(a) + key(b))};
  }
};
template <> struct ValueTraits<poolgen::bf16_t> {
  static float key(poolgen::bf16_t v) { return bf16_to_float(v.bits); }
  static poolgen::bf16_t lowest() { return {0xFF80}; }
  static poolgen::bf16_t random(uint64_t r) {
    const float f = ValueTraits<float>::random(r);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return {static_cast<uint16_t>(bits >> 16)};
  }
  static poolgen::bf16_t add(poolgen::bf16_t a, poolgen::bf16_t b) {
    return {float_to_bf16(key(a) + key(b))};
  }
};
template <class K> bool is_nan(K k) {
  if constexpr (std::is_floating_point_v<K>) return std::isnan(k);
  return false;
}

// Calls f(T{}, I{}) with the value type T and index type I the dtypes name.
template <class F> void with_types(DType value, DType index, F&& f) {
  auto with_index = [&](auto t) {
    if (index == DType::i32)
      f(t, int32_t{});
    else
      f(t, int64_t{});
  };
  switch (value) {
    case DType::f32: with_index(float{}); break;
    case DType::f64: with_index(double{}); break;
    case DType::f16: with_index(poolgen::f16_t{}); break;
    case DType::bf16: with_index(poolgen::bf16_t{}); break;
    case DType::i8: with_index(int8_t{}); break;
    case DType::u8: with_index(uint8_t{}); break;
    case DType::i16: with_index(int16_t{}); break;
    case DType::i32: with_index(int32_t{}); break;
    case DType::i64: with_index(int64_t{}); break;
  }
}

// ---------------------------------------------------------------------------------------------
// The timed ops: the forward ops and their backward passes (the gradients: float dtypes only).
// The ops after pooling take the indices of a pooling of the case's input.

enum class Op { pool, unpool, pool_backward, unpool_backward };
constexpr Op kOps[] = {Op::pool, Op::unpool, Op::pool_backward, Op::unpool_backward};
constexpr int kNumOps = sizeof(kOps) / sizeof(kOps[0]);
constexpr unsigned op_bit(Op op) { return 1u << static_cast<int>(op); }
// In benchmark names: "max_pool", "max_unpool", "max_pool_backward", "max_unpool_backward".
const char* op_name(Op op);
// The op's result has the pooled extent (pool, unpool backward), not the input's.
inline bool to_pooled(Op op) { return op == Op::pool || op == Op::unpool_backward; }

// ---------------------------------------------------------------------------------------------
// A case: (N, C, spatial...) input, cubic kernel/stride/padding, dilation 1, floor mode, a value
// and an index dtype, contiguous (NCHW) or channels-last (NHWC/NDHWC), and which ops are timed.
// name() is its --poolgen_cases spelling (cases.cpp), also the middle of its benchmark names.

struct Case {
  int nd = 2;
  Ints shape;  // N, C, spatial...
  int64_t k = 2, s = 2, p = 0;
  DType vt = DType::f32, it = DType::i64;
  bool cl = false;             // channels-last
  unsigned ops = op_bit(Op::pool) | op_bit(Op::unpool);  // the timed ops (op_bit)
  bool general_rows = false;   // also time pool and unpool on Path::general (option "general")
  bool sweep = false;          // one of --poolgen_sweep's (marked in the JSON for the plots)

  bool times(Op op) const { return (ops & op_bit(op)) != 0; }
  std::string window() const;     // "k2s2p0"
  std::string shape_str() const;  // "8x64x112x112"
  std::string name() const;       // "2d/8x64x112x112/k2s2p0/cl/bf16/idx32"
  std::string label() const;      // "2d k2s2p0 bf16 NHWC i32 indices" (the table's op column)
  poolgen::PoolOptions pool_options(poolgen::Path path = poolgen::Path::automatic) const;
  poolgen::UnpoolOptions unpool_options(poolgen::Path path) const;
  poolgen::TensorView view(void* data, DType dtype, const Ints& sh) const;
  Ints pooled_shape() const;
  int64_t in_elems() const;
  int64_t out_elems() const;
  int64_t input_bytes() const { return in_elems() * poolgen::dtype_size(vt); }
  // Compulsory traffic, the same number of bytes for every op: pool (input + values + indices),
  // unpool (values + indices + output), pool backward (grad_output + indices + grad_input) and
  // unpool backward (indices + grad_output, counted whole, + grad_values).
  int64_t traffic() const {
    return input_bytes() + out_elems() * (poolgen::dtype_size(vt) + poolgen::dtype_size(it));
  }
};

// cases.cpp: the built-in list, --poolgen_cases and --poolgen_sweep.
std::vector<Case> builtin_cases();
// Parses "CASE[,CASE...]"; false with a message naming the bad case and field.
bool parse_cases(const std::string& list, std::vector<Case>* out, std::string* error);
std::vector<Case> sweep_cases(int64_t llc_bytes);
int64_t last_level_cache(std::string* source);  // bytes; source says where it came from
bool parse_int(const std::string& s, int64_t* v);  // a decimal integer, all of s, <= 12 digits

// ---------------------------------------------------------------------------------------------
// A case with its memory. Buffers are allocated on first use (ensure()) and freed when the next
// case starts, so that one case's memory exists at a time.

struct Geometry {  // spatial dims padded to 3 (leading extents 1)
  int64_t n = 1, c = 1, planes = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0};
  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
};

// Where buffers start past a 64-byte boundary (--poolgen_buffer_offset): 0 as frameworks' tensors
// (PyTorch's and TensorFlow's allocators align to 64), 16 as glibc's large blocks (a page plus
// its 16-byte header, where std::vector's land). Some kernels' speed depends on it
// (docs/kernels.md, "Alignment").
extern int64_t g_buffer_offset;

struct Buffer {  // bytes of any dtype
  std::vector<unsigned char> storage;
  size_t start = 0, count = 0;
  void* data() { return storage.data() + start; }
  const void* data() const { return storage.data() + start; }
  size_t size() const { return count; }
  template <class T> T* as() { return reinterpret_cast<T*>(data()); }
  template <class T> const T* as() const { return reinterpret_cast<const T*>(data()); }
  void resize(size_t n) {
    storage.assign(n + 64 + static_cast<size_t>(g_buffer_offset), 0);
    const size_t misalign = reinterpret_cast<uintptr_t>(storage.data()) % 64;
    start = (64 - misalign) % 64 + static_cast<size_t>(g_buffer_offset);
    count = n;
  }
  void release() {
    std::vector<unsigned char>().swap(storage);
    count = 0;
  }
};

struct Spec : Case {
  explicit Spec(const Case& c);
  Geometry g;
  Ints pooled;  // pooled_shape()
  // input; the reference's values/indices (the unpool and backward inputs) and unpool output
  // (expect); poolgen's pool outputs (pvalues, pindices) and unpool output. The backward ops:
  // random gradients of the pooled (grad_pooled) and the input extent (grad_unpooled), the
  // reference's results (expect_grad_input, expect_grad_values) and poolgen's.
  Buffer input, values, indices, expect, pvalues, pindices, output;
  Buffer grad_pooled, grad_unpooled, expect_grad_input, expect_grad_values, grad_input, grad_values;
  bool ready = false, ran = false;  // buffers allocated; ever allocated
  std::string kernel[kNumOps];      // per op: what the automatic path runs
  bool general_path[kNumOps] = {};  // per op: also timed on Path::general
  std::vector<std::string> notes;   // peers' remarks, printed after the table

  std::string what() const { return label() + " " + shape_str(); }  // for problems and notes
  void ensure();   // pool_bench.cpp
  void release();
  // The op's input that is not the indices: input, values, grad_pooled or grad_unpooled.
  Buffer& source(Op op);
  // The op's outputs, each with the reference's result it must equal (pool: values, indices).
  std::vector<std::pair<Buffer*, Buffer*>> results(Op op);
  // Runs the reference into the op's outputs (or, expected: into the results they must equal);
  // false on an invalid index.
  bool reference(Op op, bool expected);
  void reference_pool(void* vals, void* idx) const;  // reference.cpp
  // The ops driven by the indices (all but pool): src is source(op), dst the op's output.
  bool reference_by_index(Op op, const void* src, const void* idx, void* dst) const;
};

extern std::vector<std::string> g_problems;  // correctness mismatches (exit code 2)

// ---------------------------------------------------------------------------------------------
// A peer library timed on the same input memory as poolgen (aten_peer.cpp, xnnpack_peer.cpp).
// It holds the state (views, outputs, operators) of one case at a time, as Spec holds buffers.

class Peer {
 public:
  virtual ~Peer() = default;
  virtual const char* name() const = 0;   // in benchmark names and --poolgen_peers: "aten"
  virtual const char* title() const = 0;  // in the table: "ATen"
  // Whether it has a kernel for the case's op (called at registration, before any buffer).
  virtual bool has(const Case& c, Op op) const = 0;
  // After sp's reference outputs exist: builds its outputs and operators, runs each op it has
  // once and adds to g_problems where its results differ from the reference (= poolgen's).
  virtual void setup(Spec& sp) = 0;
  virtual void release() = 0;
  // Outside the timed loop: thread count and any per-thread-count setup its API needs.
  virtual void prepare(Op op, int threads) = 0;
  virtual bool run(Op op) = 0;  // the timed call; false: it failed
};

std::unique_ptr<Peer> make_aten_peer();     // only in builds with POOLGEN_BENCH_ATEN
std::unique_ptr<Peer> make_xnnpack_peer();  // only in builds with POOLGEN_BENCH_XNNPACK

}  // namespace bench
