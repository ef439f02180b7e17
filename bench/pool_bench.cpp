// poolgen_bench: max pooling with indices and max unpooling against its peers on the same shapes
// and the same memory, in one run:
//   poolgen    the library, on 1 thread and on all threads (std::thread::hardware_concurrency());
//   memcpy     a plain copy whose reads + writes equal the op's compulsory traffic (the roofline);
//   reference  a plain scalar loop nest written here from SEMANTICS.md (1 thread), in the
//              shape's own layout;
//   ATen       PyTorch's CPU kernels (only with -DPOOLGEN_BENCH_ATEN=ON), 1 and all threads, on
//              the same input memory; "n/a" where ATen has no kernel for the dtype (ATen 1.13 CPU:
//              max_pool takes f32/f64/bf16, max_unpool f32/f64 only; no f16, no integers; i64
//              indices only).
// A shape is (rank, N/C/spatial extents, cubic window k/s/p, value dtype, index dtype, layout):
// f32 NCHW with i64 indices (PyTorch's default) for the first rows, then channels-last
// (NHWC/NDHWC), i32 indices and f16/bf16/i8/u8 values. Every shape is first checked bit for bit
// against the reference (and ATen where it runs) so that the timings are of correct kernels.
// Unpool inputs come from a real pooling of random data (the SegNet case); for the f32 NCHW shapes
// the unpool is timed on the automatic path (which may take the SegNet gather) and, as separate
// rows, on Path::general. Bytes/s count compulsory traffic with the dtypes' sizes: pool = input +
// values + indices, unpool = values + indices + output (the same number). memcpy rows are shared
// by all shapes of one traffic (benchmarks "memcpy/<bytes>B/threads:<t>"; include them in a
// --benchmark_filter to get the roofline column). After the Google Benchmark output a Markdown
// table of medians and ratios is printed, then the kernel each shape ran and the layouts ATen
// chose.
//
// Extra flags (besides Google Benchmark's): --poolgen_min_time=SECONDS (default 0.1) and
// --poolgen_repetitions=N (default 5).

#include <benchmark/benchmark.h>
#include <poolgen/poolgen.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <unistd.h>

#ifdef POOLGEN_BENCH_ATEN
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#endif

namespace {

using poolgen::DType;
using poolgen::Ints;

int all_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

// ---------------------------------------------------------------------------------------------
// Value types: the reference compares keys (floats widened to float, integers as they are) and
// copies the original bits.

float f16_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    const float f = std::ldexp(static_cast<float>(man), -24);
    return sign ? -f : f;
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
float bf16_to_float(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <class T> struct ValueTraits {  // integers
  static T key(T v) { return v; }
  static T lowest() { return std::numeric_limits<T>::lowest(); }
  static T random(uint64_t r) { return static_cast<T>(r >> 56); }
};
template <> struct ValueTraits<float> {
  static float key(float v) { return v; }
  static float lowest() { return -std::numeric_limits<float>::infinity(); }
  // uniform in [-1, 1) (the sequence of the first f32 benchmarks)
  static float random(uint64_t r) { return static_cast<float>(r >> 40) / 8388608.0f - 1.0f; }
};
template <> struct ValueTraits<poolgen::f16_t> {
  static float key(poolgen::f16_t v) { return f16_to_float(v.bits); }
  static poolgen::f16_t lowest() { return {0xFC00}; }
  static poolgen::f16_t random(uint64_t r) {  // finite, |v| < 1: exponent 0..14, any mantissa
    return {static_cast<uint16_t>(((r >> 63) << 15) | (((r >> 40) % 15) << 10) | ((r >> 20) & 0x3ff))};
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
    case DType::f16: with_index(poolgen::f16_t{}); break;
    case DType::bf16: with_index(poolgen::bf16_t{}); break;
    case DType::i8: with_index(int8_t{}); break;
    case DType::u8: with_index(uint8_t{}); break;
    default: with_index(float{}); break;  // f32 (the shapes below use no other dtype)
  }
}

// ---------------------------------------------------------------------------------------------
// One benchmark shape: (N, C, spatial...) input, cubic kernel/stride/padding, dilation 1, floor
// mode, a value and an index dtype, contiguous (NCHW) or channels-last (NHWC/NDHWC).

struct Geometry {  // spatial dims padded to 3 (leading extents 1)
  int64_t n = 1, c = 1, planes = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0};
  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
};

struct Buffer {  // bytes of any dtype
  std::vector<unsigned char> bytes;
  void* data() { return bytes.data(); }
  template <class T> T* as() { return reinterpret_cast<T*>(bytes.data()); }
  void resize(size_t n) { bytes.assign(n, 0); }
  void release() { std::vector<unsigned char>().swap(bytes); }
};

#ifdef POOLGEN_BENCH_ATEN
// ATen's side of a shape: views of the shared input memory and the outputs in the layout ATen
// itself chooses (learned from its functional call; the timed _out calls write into them).
struct AtenState {
  bool pool = false, unpool = false;  // ATen has a kernel for this dtype
  at::Tensor input, values, indices;    // pool: input (our memory) -> values, indices (ATen's)
  at::Tensor uvalues, uindices, output;  // unpool: reference values/indices (our memory) -> output
  std::vector<int64_t> k, s, p, out_size;
  std::string pool_layout, unpool_layout;  // what ATen did, for the notes after the table
};
#endif

struct Spec {
  int nd;
  Ints shape;  // N, C, spatial...
  int64_t k, s, p;
  DType vt = DType::f32, it = DType::i64;
  bool cl = false;             // channels-last
  bool unpool = true;          // also time unpooling (indices from this pooling)
  bool general_rows = false;   // also time unpooling on Path::general
  bool aten_pool = false, aten_unpool = false;  // ATen has kernels (probed at registration)

  // Filled by ensure(), on first use; freed by release() when the next shape starts.
  bool ready = false;
  Geometry g;
  Ints pooled_shape;
  Buffer input, values, indices, pvalues, pindices, output;
  std::string pool_kernel, unpool_kernel;
#ifdef POOLGEN_BENCH_ATEN
  AtenState aten;
#endif

  size_t vsize() const { return poolgen::dtype_size(vt); }
  size_t isize() const { return poolgen::dtype_size(it); }
  std::string tag() const {
    return "k" + std::to_string(k) + "s" + std::to_string(s) + "p" + std::to_string(p);
  }
  std::string shape_str() const {
    std::string r;
    for (size_t i = 0; i < shape.size(); ++i) r += (i ? "x" : "") + std::to_string(shape[i]);
    return r;
  }
  // What sets this shape apart from f32 NCHW with i64 indices: for labels and names.
  // " bf16 NHWC i32 indices" for labels, "_bf16_NHWC_i32idx" for benchmark names.
  std::string attrs(bool name = false) const {
    const std::string sep = name ? "_" : " ";
    std::string r;
    if (vt != DType::f32) r += sep + poolgen::dtype_name(vt);
    if (cl) r += sep + (nd == 3 ? "NDHWC" : nd == 2 ? "NHWC" : "NLC");
    if (it != DType::i64) r += sep + poolgen::dtype_name(it) + (name ? "idx" : " indices");
    return r;
  }
  int64_t in_elems() const { return g.planes * g.in_plane(); }
  int64_t out_elems() const { return g.planes * g.out_plane(); }
  // Compulsory traffic; pool (input + values + indices) and unpool (values + indices + output)
  // move the same number of bytes.
  int64_t traffic() const { return in_elems() * vsize() + out_elems() * (vsize() + isize()); }

  poolgen::TensorView view(void* data, DType dtype, const Ints& sh) const {
    return cl ? poolgen::channels_last(data, dtype, sh) : poolgen::contiguous(data, dtype, sh);
  }
  poolgen::PoolOptions pool_options() const {
    poolgen::PoolOptions o;
    o.kernel_size = {k};
    o.stride = {s};
    o.padding = {p};
    return o;
  }
  poolgen::UnpoolOptions unpool_options(poolgen::Path path) const {
    poolgen::UnpoolOptions o;
    o.kernel_size = {k};
    o.stride = {s};
    o.padding = {p};
    o.output_size.assign(shape.end() - nd, shape.end());
    o.path = path;
    return o;
  }
  poolgen::Status run_pool(void* vals, void* idx) {
    return poolgen::max_pool(nd, view(input.data(), vt, shape),
                             view(vals, vt, pooled_shape), view(idx, it, pooled_shape),
                             pool_options());
  }
  poolgen::Status run_unpool(poolgen::Path path) {
    return poolgen::max_unpool(nd, view(values.data(), vt, pooled_shape),
                               view(indices.data(), it, pooled_shape),
                               view(output.data(), vt, shape), unpool_options(path));
  }
  void reference_pool(void* vals, void* idx);
  bool reference_unpool(void* out);
  void init_geometry();
  void ensure();
  void release();
};

std::vector<std::string> g_problems;  // correctness mismatches found while setting up
Spec* g_current = nullptr;            // the shape whose buffers are allocated

// ---------------------------------------------------------------------------------------------
// The scalar reference (SEMANTICS.md, dilation 1): one loop nest, one thread. The channels-last
// loop nest runs (n, spatial, c) so that it walks its memory in order, as the NCHW one does.

template <class T, class I>
inline void reference_cell(const Geometry& g, const T* in, int64_t cs, int64_t od, int64_t oh,
                           int64_t ow, T* val, I* idx) {  // in: plane origin, cs: spatial step
  using V = ValueTraits<T>;
  int64_t lo[3], hi[3];
  const int64_t pos[3] = {od, oh, ow};
  for (int i = 0; i < 3; ++i) {
    lo[i] = pos[i] * g.s[i] - g.p[i];
    hi[i] = std::min(lo[i] + g.k[i], g.in[i]);
    lo[i] = std::max<int64_t>(lo[i], 0);
  }
  T best = V::lowest();
  auto best_k = V::key(best);
  int64_t best_i = (lo[0] * g.in[1] + lo[1]) * g.in[2] + lo[2];
  for (int64_t d = lo[0]; d < hi[0]; ++d)
    for (int64_t h = lo[1]; h < hi[1]; ++h)
      for (int64_t w = lo[2]; w < hi[2]; ++w) {
        const int64_t i = (d * g.in[1] + h) * g.in[2] + w;
        const T v = in[i * cs];
        const auto vk = V::key(v);
        if (vk > best_k || is_nan(vk)) {
          best = v;
          best_k = vk;
          best_i = i;
        }
      }
  *val = best;
  *idx = static_cast<I>(best_i);
}

template <class T, class I, bool CL>
void reference_pool_t(const Geometry& g, const T* in, T* vals, I* idx) {
  const int64_t ip = g.in_plane(), op = g.out_plane();
  if (!CL) {
    for (int64_t c = 0; c < g.planes; ++c, in += ip, vals += op, idx += op) {
      int64_t o = 0;
      for (int64_t od = 0; od < g.out[0]; ++od)
        for (int64_t oh = 0; oh < g.out[1]; ++oh)
          for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o)
            reference_cell(g, in, 1, od, oh, ow, vals + o, idx + o);
    }
    return;
  }
  const int64_t C = g.c;
  for (int64_t n = 0; n < g.n; ++n, in += ip * C) {
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow, vals += C, idx += C)
          for (int64_t c = 0; c < C; ++c)
            reference_cell(g, in + c, C, od, oh, ow, vals + c, idx + c);
  }
}

template <class T, class I, bool CL>
bool reference_unpool_t(const Geometry& g, const T* vals, const I* idx, T* out) {
  const int64_t ip = g.out_plane(), op = g.in_plane();  // unpool maps pooled -> input extent
  std::memset(static_cast<void*>(out), 0, sizeof(T) * g.planes * op);
  if (!CL) {
    for (int64_t c = 0; c < g.planes; ++c, vals += ip, idx += ip, out += op)
      for (int64_t i = 0; i < ip; ++i) {
        const int64_t j = idx[i];
        if (j < 0 || j >= op) return false;
        out[j] = vals[i];
      }
    return true;
  }
  // Per plane (n, c) the elements still come in input order: the latest duplicate wins.
  const int64_t C = g.c;
  for (int64_t n = 0; n < g.n; ++n, out += op * C)
    for (int64_t i = 0; i < ip; ++i, vals += C, idx += C)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t j = idx[c];
        if (j < 0 || j >= op) return false;
        out[j * C + c] = vals[c];
      }
  return true;
}

void Spec::reference_pool(void* vals, void* idx) {
  with_types(vt, it, [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    (cl ? reference_pool_t<T, I, true> : reference_pool_t<T, I, false>)(
        g, input.as<T>(), static_cast<T*>(vals), static_cast<I*>(idx));
  });
}

bool Spec::reference_unpool(void* out) {
  bool ok = false;
  with_types(vt, it, [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    ok = (cl ? reference_unpool_t<T, I, true> : reference_unpool_t<T, I, false>)(
        g, values.as<T>(), indices.as<I>(), static_cast<T*>(out));
  });
  return ok;
}

// ---------------------------------------------------------------------------------------------
// The memcpy roofline: `threads` threads each copy one contiguous chunk. One pair of buffers,
// sized for the benchmark that runs.

void parallel_memcpy(char* dst, const char* src, size_t bytes, int threads) {
  if (threads <= 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  std::vector<std::thread> pool;
  const size_t chunk = (bytes + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const size_t b = std::min(bytes, t * chunk), e = std::min(bytes, b + chunk);
    pool.emplace_back([=] { std::memcpy(dst + b, src + b, e - b); });
  }
  for (auto& th : pool) th.join();
}

std::vector<char> g_copy_src, g_copy_dst;

// ---------------------------------------------------------------------------------------------
// ATen peers (1-D goes through the 2-D kernels on an (N, C, 1, L) view).
//
// What ATen 1.13 does with channels-last data (checked in setup() below on every run, reported
// after the table): max_pool2d_with_indices and max_unpool2d have channels-last CPU kernels
// ("max_pool2d_channels_last", "max_unpool2d_channels_last", vectorized across C) and keep the
// format: NHWC input gives NHWC values/indices, NHWC values/indices give an NHWC output. In 3-D
// they have none: max_pool3d_with_indices and max_unpool3d copy an NDHWC input to contiguous and
// return NCDHW outputs (an NDHWC out= tensor is written as if contiguous, i.e. wrongly, for
// pooling and refused, "output must be contiguous", for unpooling), so the 3-D ATen rows time
// that copy plus the NCDHW kernel, into NCDHW outputs. The timed calls are the _out variants into
// output tensors of the layout ATen's own functional call returned, allocated once.

#ifdef POOLGEN_BENCH_ATEN
at::ScalarType aten_type(DType d) {
  switch (d) {
    case DType::f16: return at::kHalf;
    case DType::bf16: return at::kBFloat16;
    case DType::i8: return at::kChar;
    case DType::u8: return at::kByte;
    case DType::i64: return at::kLong;
    case DType::i32: return at::kInt;
    default: return at::kFloat;
  }
}

std::vector<int64_t> aten_shape(const Ints& shape, int nd) {  // 1-D -> (N, C, 1, L)
  std::vector<int64_t> r(shape.begin(), shape.end());
  if (nd == 1) r.insert(r.end() - 1, 1);
  return r;
}

std::vector<int64_t> aten_strides(const std::vector<int64_t>& sh, bool cl) {
  std::vector<int64_t> st(sh.size());
  int64_t m = 1;
  if (!cl) {
    for (size_t i = sh.size(); i-- > 0;) st[i] = m, m *= sh[i];
    return st;
  }
  st[1] = 1, m = sh[1];  // C innermost, then spatial, then N
  for (size_t i = sh.size(); i-- > 2;) st[i] = m, m *= sh[i];
  st[0] = m;
  return st;
}

at::Tensor aten_view(void* data, const Spec& sp, const Ints& shape, DType dt) {
  const auto sh = aten_shape(shape, sp.nd);
  return at::from_blob(data, sh, aten_strides(sh, sp.cl), at::TensorOptions().dtype(aten_type(dt)));
}

std::string aten_layout(const at::Tensor& t) {
  const bool r5 = t.dim() == 5;
  if (!t.is_contiguous() && t.is_contiguous(r5 ? at::MemoryFormat::ChannelsLast3d
                                               : at::MemoryFormat::ChannelsLast))
    return r5 ? "NDHWC" : "NHWC";
  return t.is_contiguous() ? (r5 ? "NCDHW" : "NCHW") : "strided";
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const at::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// ATen's kernel tables differ per dtype and layout: try each op once on a tiny tensor.
bool aten_has(bool unpool, int nd, DType vt, DType it, bool cl) {
  if (it != DType::i64) return false;  // ATen's indices are int64
  const int snd = nd == 1 ? 2 : nd;
  std::vector<int64_t> sh{1, 2, 4, 4};  // spatial > 1: a layout of its own
  if (snd == 3) sh.push_back(4);
  const auto mf = !cl ? at::MemoryFormat::Contiguous
                      : snd == 3 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
  const std::vector<int64_t> k(snd, 2), one(snd, 1), zero(snd, 0), out(sh.end() - snd, sh.end());
  try {
    at::Tensor x = at::zeros(sh, at::TensorOptions().dtype(aten_type(vt))).contiguous(mf);
    if (!unpool) {
      if (snd == 3) at::max_pool3d_with_indices(x, k, k, zero, one, false);
      else at::max_pool2d_with_indices(x, k, k, zero, one, false);
      return true;
    }
    std::vector<int64_t> psh = sh;
    for (int i = 2; i < static_cast<int>(psh.size()); ++i) psh[i] = 2;
    at::Tensor v = at::zeros(psh, x.options()).contiguous(mf);
    at::Tensor ix = at::zeros(psh, at::TensorOptions().dtype(at::kLong)).contiguous(mf);
    if (snd == 3) at::max_unpool3d(v, ix, out, k, zero);
    else at::max_unpool2d(v, ix, out);
    return true;
  } catch (const std::exception&) {  // c10::Error: "... not implemented for 'Half'"
    return false;
  }
}

void aten_pool(AtenState& a, int nd) {
  if (nd == 3)
    at::max_pool3d_with_indices_out(a.values, a.indices, a.input, a.k, a.s, a.p, {1, 1, 1}, false);
  else
    at::max_pool2d_with_indices_out(a.values, a.indices, a.input, a.k, a.s, a.p, {1, 1}, false);
}

void aten_unpool(AtenState& a, int nd) {
  if (nd == 3)
    at::max_unpool3d_out(a.output, a.uvalues, a.uindices, a.out_size, a.s, a.p);
  else
    at::max_unpool2d_out(a.output, a.uvalues, a.uindices, a.out_size);
}

// Learns ATen's output layouts from its functional calls, then runs the _out calls once into
// those outputs and checks them (and that they were written in place) against the reference.
void aten_setup(Spec& sp, const std::string& what, const at::Tensor& ref_values,
                const at::Tensor& ref_indices, const at::Tensor& ref_output) {
  AtenState& a = sp.aten;
  const int snd = sp.nd == 1 ? 2 : sp.nd;
  a.k.assign(snd, sp.k);
  a.s.assign(snd, sp.s);
  a.p.assign(snd, sp.p);
  if (sp.nd == 1) a.k[0] = a.s[0] = 1, a.p[0] = 0;
  const auto in_sh = aten_shape(sp.shape, sp.nd);
  a.out_size.assign(in_sh.end() - snd, in_sh.end());
  a.input = aten_view(sp.input.data(), sp, sp.shape, sp.vt);
  a.uvalues = ref_values;
  a.uindices = ref_indices;
  at::set_num_threads(all_threads());
  if (sp.aten_pool) {
    const std::vector<int64_t> one(snd, 1);
    auto r = snd == 3 ? at::max_pool3d_with_indices(a.input, a.k, a.s, a.p, one, false)
                      : at::max_pool2d_with_indices(a.input, a.k, a.s, a.p, one, false);
    a.values = std::get<0>(r);
    a.indices = std::get<1>(r);
    a.pool_layout = aten_layout(a.input) + " input -> " + aten_layout(a.values) + " values, " +
                    aten_layout(a.indices) + " indices";
    const void *pv = a.values.data_ptr(), *pi = a.indices.data_ptr();
    a.values.fill_(7);
    a.indices.fill_(7);
    aten_pool(a, snd);
    if (a.values.data_ptr() != pv || a.indices.data_ptr() != pi)
      g_problems.push_back(what + ": ATen pool reallocated its out= tensors");
    if (!same_bits(a.values, ref_values) || !same_bits(a.indices, ref_indices))
      g_problems.push_back(what + ": ATen pool differs from the reference");
  }
  if (sp.aten_unpool && sp.unpool) {
    a.output = snd == 3 ? at::max_unpool3d(a.uvalues, a.uindices, a.out_size, a.s, a.p)
                        : at::max_unpool2d(a.uvalues, a.uindices, a.out_size);
    a.unpool_layout = aten_layout(a.uvalues) + " values/indices -> " + aten_layout(a.output) +
                      " output";
    const void* po = a.output.data_ptr();
    a.output.fill_(7);
    aten_unpool(a, snd);
    if (a.output.data_ptr() != po)
      g_problems.push_back(what + ": ATen unpool reallocated its out= tensor");
    if (!same_bits(a.output, ref_output))
      g_problems.push_back(what + ": ATen unpool differs from the reference");
  }
}
#endif

// ---------------------------------------------------------------------------------------------
// Setup: random input, reference pooling (the unpool inputs), and a one-off correctness check of
// poolgen (and ATen) against the reference so that the timings are of correct kernels.

void Spec::init_geometry() {
  g.n = shape[0];
  g.c = shape[1];
  g.planes = shape[0] * shape[1];
  for (int i = 0; i < nd; ++i) {
    const int j = 3 - nd + i;
    g.in[j] = shape[2 + i];
    g.k[j] = k;
    g.s[j] = s;
    g.p[j] = p;
    g.out[j] = (g.in[j] + 2 * p - k) / s + 1;
  }
  pooled_shape = {shape[0], shape[1]};
  for (int i = 0; i < nd; ++i) pooled_shape.push_back(g.out[3 - nd + i]);
}

void Spec::release() {
  for (Buffer* b : {&input, &values, &indices, &pvalues, &pindices, &output}) b->release();
#ifdef POOLGEN_BENCH_ATEN
  AtenState kept;
  kept.pool_layout = aten.pool_layout;
  kept.unpool_layout = aten.unpool_layout;
  aten = kept;
#endif
  ready = false;
}

void Spec::ensure() {
  if (ready) return;
  if (g_current && g_current != this) g_current->release();
  g_current = this;
  ready = true;

  const size_t vs = vsize(), is = isize();
  input.resize(in_elems() * vs);
  with_types(vt, it, [&](auto t, auto) {
    using T = decltype(t);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    T* in = input.as<T>();
    for (int64_t i = 0; i < in_elems(); ++i) {  // xorshift64*
      x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
      in[i] = ValueTraits<T>::random(x * 2685821657736338717ull);
    }
  });
  values.resize(out_elems() * vs);
  indices.resize(out_elems() * is);
  pvalues.resize(out_elems() * vs);
  pindices.resize(out_elems() * is);
  output.resize(in_elems() * vs);
  reference_pool(values.data(), indices.data());

  const std::string what = "max_pool" + std::to_string(nd) + "d " + tag() + attrs() + " " +
                           shape_str();
  auto check_pool = [&](const char* who) {
    if (pvalues.bytes != values.bytes || pindices.bytes != indices.bytes)
      g_problems.push_back(what + ": " + who + " pool differs from the reference");
  };
  Buffer expect;
  expect.resize(in_elems() * vs);
  if (!reference_unpool(expect.data()))
    g_problems.push_back(what + ": reference unpool saw an invalid index");
  auto check_unpool = [&](const char* who) {
    if (output.bytes != expect.bytes)
      g_problems.push_back(what + ": " + who + " unpool differs from the reference");
  };

  poolgen::set_num_threads(all_threads());
  poolgen::max_pool_kernel_name(nd, view(input.data(), vt, shape), it, pool_options(), &pool_kernel);
  poolgen::max_unpool_kernel_name(nd, view(values.data(), vt, pooled_shape), it,
                                  unpool_options(poolgen::Path::automatic), &unpool_kernel);
  std::memset(pvalues.data(), 7, pvalues.bytes.size());
  std::memset(pindices.data(), 7, pindices.bytes.size());
  auto st = run_pool(pvalues.data(), pindices.data());
  if (!st.ok())
    g_problems.push_back(what + ": poolgen pool failed: " + st.message());
  else
    check_pool("poolgen");
  for (auto path : {poolgen::Path::automatic, poolgen::Path::general}) {
    std::memset(output.data(), 7, output.bytes.size());
    st = run_unpool(path);
    const char* who = path == poolgen::Path::general ? "poolgen (general)" : "poolgen";
    if (!st.ok())
      g_problems.push_back(what + ": " + who + " unpool failed: " + st.message());
    else
      check_unpool(who);
  }
#ifdef POOLGEN_BENCH_ATEN
  if (aten_pool || aten_unpool)
    aten_setup(*this, what, aten_view(values.data(), *this, pooled_shape, vt),
               aten_view(indices.data(), *this, pooled_shape, it),
               aten_view(expect.data(), *this, shape, vt));
#endif
}

// ---------------------------------------------------------------------------------------------
// Benchmark bodies.

enum class Impl { poolgen, poolgen_general, reference, aten };

void bench_memcpy(benchmark::State& state, int64_t bytes, int threads) {
  if (g_copy_src.size() != static_cast<size_t>(bytes / 2)) {
    std::vector<char>(bytes / 2, 1).swap(g_copy_src);
    std::vector<char>(bytes / 2, 0).swap(g_copy_dst);
  }
  for (auto _ : state)
    parallel_memcpy(g_copy_dst.data(), g_copy_src.data(), g_copy_src.size(), threads);
  benchmark::ClobberMemory();
  state.SetBytesProcessed(state.iterations() * bytes);
}

void bench_pool(benchmark::State& state, Spec* sp, Impl impl, int threads) {
  sp->ensure();
  if (impl == Impl::poolgen) {
    poolgen::set_num_threads(threads);
    const auto in = sp->view(sp->input.data(), sp->vt, sp->shape);
    const auto vals = sp->view(sp->pvalues.data(), sp->vt, sp->pooled_shape);
    const auto idx = sp->view(sp->pindices.data(), sp->it, sp->pooled_shape);
    const auto opt = sp->pool_options();
    for (auto _ : state) {
      auto st = poolgen::max_pool(sp->nd, in, vals, idx, opt);
      if (!st.ok()) {
        state.SkipWithError(st.message().c_str());
        break;
      }
    }
  } else if (impl == Impl::reference) {
    for (auto _ : state) sp->reference_pool(sp->pvalues.data(), sp->pindices.data());
  } else if (impl == Impl::aten) {
#ifdef POOLGEN_BENCH_ATEN
    at::set_num_threads(threads);
    const int snd = sp->nd == 1 ? 2 : sp->nd;
    for (auto _ : state) aten_pool(sp->aten, snd);
#endif
  }
  benchmark::ClobberMemory();
  state.SetBytesProcessed(state.iterations() * sp->traffic());
}

void bench_unpool(benchmark::State& state, Spec* sp, Impl impl, int threads) {
  sp->ensure();
  if (impl == Impl::poolgen || impl == Impl::poolgen_general) {
    poolgen::set_num_threads(threads);
    const auto vals = sp->view(sp->values.data(), sp->vt, sp->pooled_shape);
    const auto idx = sp->view(sp->indices.data(), sp->it, sp->pooled_shape);
    const auto out = sp->view(sp->output.data(), sp->vt, sp->shape);
    const auto opt = sp->unpool_options(impl == Impl::poolgen_general ? poolgen::Path::general
                                                                      : poolgen::Path::automatic);
    for (auto _ : state) {
      auto st = poolgen::max_unpool(sp->nd, vals, idx, out, opt);
      if (!st.ok()) {
        state.SkipWithError(st.message().c_str());
        break;
      }
    }
  } else if (impl == Impl::reference) {
    for (auto _ : state)
      if (!sp->reference_unpool(sp->output.data())) {
        state.SkipWithError("reference unpool: invalid index");
        break;
      }
  } else if (impl == Impl::aten) {
#ifdef POOLGEN_BENCH_ATEN
    at::set_num_threads(threads);
    const int snd = sp->nd == 1 ? 2 : sp->nd;
    for (auto _ : state) aten_unpool(sp->aten, snd);
#endif
  }
  benchmark::ClobberMemory();
  state.SetBytesProcessed(state.iterations() * sp->traffic());
}

// ---------------------------------------------------------------------------------------------
// Registration and the summary table.

struct Row {  // one line of the summary table; the strings are benchmark names
  std::string op, shape;
  int threads;
  std::string poolgen, memcpy, reference, aten;  // aten "": not built; "n/a": no ATen kernel
  int64_t traffic;
};
std::vector<Row> g_rows;

// Wraps the console reporter and keeps each benchmark's median real time (ms).
class MedianReporter : public benchmark::ConsoleReporter {
 public:
  explicit MedianReporter(OutputOptions opts) : ConsoleReporter(opts) {}
  std::map<std::string, double> median_ms;
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      const bool single = r.run_type == Run::RT_Iteration && r.repetitions <= 1;
      if (!median && !single) continue;
      median_ms[r.run_name.function_name] =
          r.GetAdjustedRealTime() * 1e3 / benchmark::GetTimeUnitMultiplier(r.time_unit);
    }
  }
  double get(const std::string& name) const {
    auto it = median_ms.find(name);
    return it == median_ms.end() ? -1.0 : it->second;
  }
};

std::string fmt(const char* f, double v) {
  if (v <= 0 || !std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void print_table(const MedianReporter& rep, const std::vector<std::unique_ptr<Spec>>& specs) {
#ifdef POOLGEN_BENCH_ATEN
  const bool aten = true;
#else
  const bool aten = false;
#endif
  std::printf("\n| op | shape | threads | poolgen ms | poolgen GB/s | memcpy ms | reference ms (1 thread) |%s"
              " poolgen vs memcpy | speed-up vs reference |%s\n",
              aten ? " ATen ms |" : "", aten ? " speed-up vs ATen |" : "");
  std::printf("|---|---|---:|---:|---:|---:|---:|%s---:|---:|%s\n", aten ? "---:|" : "",
              aten ? "---:|" : "");
  for (const Row& r : g_rows) {
    const bool na = r.aten == "n/a";
    const double pg = rep.get(r.poolgen), mc = rep.get(r.memcpy), ref = rep.get(r.reference),
                 at = na ? -1 : rep.get(r.aten);
    if (pg < 0 && ref < 0 && at < 0) continue;  // filtered out
    const double gbs = pg > 0 ? r.traffic / (pg * 1e-3) / 1e9 : -1;
    std::printf("| %s | %s | %d | %s | %s | %s | %s |", r.op.c_str(), r.shape.c_str(), r.threads,
                fmt("%.3f", pg).c_str(), fmt("%.1f", gbs).c_str(), fmt("%.3f", mc).c_str(),
                fmt("%.3f", ref).c_str());
    if (aten) std::printf(" %s |", na ? "n/a" : fmt("%.3f", at).c_str());
    std::printf(" %s | %s |", fmt("%.0f%%", pg > 0 && mc > 0 ? 100.0 * mc / pg : -1).c_str(),
                fmt("%.1fx", pg > 0 && ref > 0 ? ref / pg : -1).c_str());
    if (aten) std::printf(" %s |", na ? "n/a" : fmt("%.1fx", pg > 0 && at > 0 ? at / pg : -1).c_str());
    std::printf("\n");
  }
  std::printf(
      "\npoolgen vs memcpy: memcpy time / poolgen time for a copy whose reads + writes equal the "
      "op's compulsory traffic (100%% = at the copy roofline). Speed-ups: peer time / poolgen "
      "time. Times are medians of the repetitions. Unmarked rows are f32 NCHW/NCDHW/NCL with i64 "
      "indices; n/a: ATen 1.13 has no CPU kernel for that dtype (or takes i64 indices only).\n");
  std::printf("\nKernels (automatic path):\n");
  for (const auto& sp : specs)
    if (!sp->pool_kernel.empty())
      std::printf("- %dd %s%s %s: %s%s%s\n", sp->nd, sp->tag().c_str(), sp->attrs().c_str(),
                  sp->shape_str().c_str(), sp->pool_kernel.c_str(), sp->unpool ? ", " : "",
                  sp->unpool ? sp->unpool_kernel.c_str() : "");
#ifdef POOLGEN_BENCH_ATEN
  std::printf("\nATen layouts (from its functional calls on the benchmark data):\n");
  for (const auto& sp : specs) {
    if (!sp->cl || (sp->aten.pool_layout.empty() && sp->aten.unpool_layout.empty())) continue;
    std::printf("- %dd %s%s: ", sp->nd, sp->tag().c_str(), sp->attrs().c_str());
    if (!sp->aten.pool_layout.empty()) std::printf("pool %s", sp->aten.pool_layout.c_str());
    if (!sp->aten.unpool_layout.empty()) std::printf("; unpool %s", sp->aten.unpool_layout.c_str());
    std::printf("\n");
  }
#endif
}

void register_all(std::vector<std::unique_ptr<Spec>>& specs, double min_time, int reps) {
  std::vector<int> thread_counts{1};
  if (all_threads() > 1) thread_counts.push_back(all_threads());
  auto configure = [&](benchmark::internal::Benchmark* b) {
    b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(min_time)->Repetitions(reps);
    b->ReportAggregatesOnly(true);
  };
  std::map<std::pair<int64_t, int>, std::string> memcpy_names;  // one per traffic and threads
  auto memcpy_for = [&](int64_t bytes, int t) {
    auto& name = memcpy_names[{bytes, t}];
    if (name.empty()) {
      name = "memcpy/" + std::to_string(bytes) + "B/threads:" + std::to_string(t);
      configure(benchmark::RegisterBenchmark(name.c_str(), bench_memcpy, bytes, t));
    }
    return name;
  };
  for (auto& owned : specs) {
    Spec* sp = owned.get();
    const std::string tag = std::to_string(sp->nd) + "d_" + sp->tag() + sp->attrs(true) + "/" +
                            sp->shape_str();
    const std::string label = std::to_string(sp->nd) + "d " + sp->tag() + sp->attrs();
    for (int unpool = 0; unpool < 2; ++unpool) {
      if (unpool && !sp->unpool) continue;
      const std::string base = (unpool ? "max_unpool" : "max_pool") + tag;
      auto reg = [&](const std::string& name, Impl impl, int threads) {
        configure(unpool ? benchmark::RegisterBenchmark(name.c_str(), bench_unpool, sp, impl, threads)
                         : benchmark::RegisterBenchmark(name.c_str(), bench_pool, sp, impl, threads));
        return name;
      };
      const std::string ref = reg(base + "/reference/threads:1", Impl::reference, 1);
      std::map<int, std::string> mc, at;
      for (int t : thread_counts) {
        mc[t] = memcpy_for(sp->traffic(), t);
#ifdef POOLGEN_BENCH_ATEN
        at[t] = (unpool ? sp->aten_unpool : sp->aten_pool)
                    ? reg(base + "/aten/threads:" + std::to_string(t), Impl::aten, t)
                    : "n/a";
#endif
      }
      std::vector<std::pair<Impl, std::string>> variants{{Impl::poolgen, ""}};
      if (unpool) variants = {{Impl::poolgen, " (SegNet indices)"}};
      if (unpool && sp->general_rows) variants.push_back({Impl::poolgen_general, " (general path)"});
      for (auto& [impl, suffix] : variants)
        for (int t : thread_counts) {
          const char* who = impl == Impl::poolgen_general ? "/poolgen_general" : "/poolgen";
          Row row;
          row.op = (unpool ? "max_unpool" : "max_pool") + label + suffix;
          row.shape = sp->shape_str();
          row.threads = t;
          row.poolgen = reg(base + who + "/threads:" + std::to_string(t), impl, t);
          row.memcpy = mc[t];
          row.reference = ref;
          row.aten = at.count(t) ? at[t] : "";
          row.traffic = sp->traffic();
          g_rows.push_back(row);
        }
    }
  }
}

// Removes "--name=value" from argv and returns value (or def).
const char* take_flag(int* argc, char** argv, const char* name, const char* def) {
  const size_t n = std::strlen(name);
  for (int i = 1; i < *argc; ++i)
    if (std::strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') {
      const char* v = argv[i] + n + 1;
      for (int j = i; j + 1 < *argc; ++j) argv[j] = argv[j + 1];
      --*argc;
      return v;
    }
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  const double min_time = std::atof(take_flag(&argc, argv, "--poolgen_min_time", "0.1"));
  const int reps = std::max(1, std::atoi(take_flag(&argc, argv, "--poolgen_repetitions", "5")));
  // Color as Google Benchmark's own console reporter would: --benchmark_color, else a terminal.
  bool color = isatty(STDOUT_FILENO) != 0;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--benchmark_color=", 18) == 0) {
      const std::string v = argv[i] + 18;
      color = v == "true" || v == "yes" || v == "1" || v == "force" || (v == "auto" && color);
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  struct Variant {  // what sets a shape apart from f32 NCHW with i64 indices
    DType vt = DType::f32, it = DType::i64;
    bool cl = false, unpool = true, general_rows = false;
  };
  std::vector<std::unique_ptr<Spec>> specs;
  auto add = [&](int nd, Ints shape, int64_t k, int64_t s, int64_t p, Variant v) {
    auto sp = std::make_unique<Spec>();
    sp->nd = nd;
    sp->shape = std::move(shape);
    sp->k = k;
    sp->s = s;
    sp->p = p;
    sp->vt = v.vt;
    sp->it = v.it;
    sp->cl = v.cl;
    sp->unpool = v.unpool;
    sp->general_rows = v.general_rows;
#ifdef POOLGEN_BENCH_ATEN
    sp->aten_pool = aten_has(false, nd, v.vt, v.it, v.cl);
    sp->aten_unpool = aten_has(true, nd, v.vt, v.it, v.cl);
#endif
    sp->init_geometry();
    specs.push_back(std::move(sp));
  };
  const Ints s2{8, 64, 112, 112}, s3{2, 16, 32, 64, 64}, s1{8, 64, 65536};
  // f32 NCHW, i64 indices: unpooling on both paths.
  Variant base;
  base.general_rows = true;
  add(2, s2, 2, 2, 0, base);
  add(2, s2, 3, 2, 1, base);
  add(3, s3, 2, 2, 0, base);
  add(1, s1, 2, 2, 0, base);
  // f32 channels-last: pooling in both windows, unpooling the k2s2p0 (SegNet) indices.
  Variant cl;
  cl.cl = true;
  add(2, s2, 2, 2, 0, cl);
  cl.unpool = false;
  add(2, s2, 3, 2, 1, cl);
  cl.unpool = true;
  add(3, s3, 2, 2, 0, cl);
  // f32 NCHW with i32 indices: a third less traffic than i64 in 2-D k2s2p0.
  Variant i32;
  i32.it = DType::i32;
  add(2, s2, 2, 2, 0, i32);
  // 16- and 8-bit values in both layouts (u8 unpooling is the i8 kernel: not repeated).
  for (DType dt : {DType::f16, DType::bf16, DType::i8, DType::u8})
    for (bool layout_cl : {false, true}) {
      Variant v;
      v.vt = dt;
      v.cl = layout_cl;
      v.unpool = dt != DType::u8;
      add(2, s2, 2, 2, 0, v);
      v.unpool = false;
      add(2, s2, 3, 2, 1, v);
    }
  register_all(specs, min_time, reps);

  MedianReporter reporter(color ? benchmark::ConsoleReporter::OO_ColorTabular
                                 : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  print_table(reporter, specs);

  for (const auto& p : g_problems) std::printf("MISMATCH: %s\n", p.c_str());
  return g_problems.empty() ? 0 : 2;
}
