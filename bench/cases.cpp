// Cases: naming, the built-in list, --poolgen_cases parsing and --poolgen_sweep.
#include "bench.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace bench {

// A decimal integer of at most 12 digits filling all of s.
bool parse_int(const std::string& s, int64_t* v) {
  if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *v = std::stoll(s);
  return true;
}

namespace {

const char* layout_name(int nd) { return nd == 3 ? "NDHWC" : nd == 2 ? "NHWC" : "NLC"; }

int64_t product(const Ints& v, size_t from = 0) {
  int64_t r = 1;
  for (size_t i = from; i < v.size(); ++i) r *= v[i];
  return r;
}

const DType kValueTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8,
                             DType::u8,  DType::i16, DType::i32, DType::i64};

// The ops' names in benchmark names and as case options, in Op's order (op_name indexes it).
struct OpSpelling {
  Op op;
  const char* name;
  const char* option;
};
const OpSpelling kOpSpellings[] = {{Op::pool, "max_pool", "pool"},
                                   {Op::unpool, "max_unpool", "unpool"},
                                   {Op::pool_backward, "max_pool_backward", "pool_backward"},
                                   {Op::unpool_backward, "max_unpool_backward", "unpool_backward"}};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> r;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);) r.push_back(part);
  if (!s.empty() && s.back() == sep) r.push_back("");
  return r;
}

// One case; on failure *error names the field.
bool parse_case(const std::string& text, Case* c, std::string* error) {
  const auto f = split(text, '/');
  if (f.size() < 3) {
    *error = "expected <nd>d/<NxCxD1x...>/k<k>s<s>p<p>[/<opt>...]";
    return false;
  }
  int64_t v = 0;
  if (f[0].size() != 2 || f[0][1] != 'd' || !parse_int(f[0].substr(0, 1), &v) || v < 1 || v > 3) {
    *error = "rank \"" + f[0] + "\": expected 1d, 2d or 3d";
    return false;
  }
  c->nd = static_cast<int>(v);
  c->shape.clear();
  for (const auto& e : split(f[1], 'x')) {
    if (!parse_int(e, &v) || v < 1) {
      *error = "shape \"" + f[1] + "\": expected positive integers joined by 'x'";
      return false;
    }
    c->shape.push_back(v);
  }
  if (c->shape.size() != static_cast<size_t>(c->nd) + 2) {
    *error = "shape \"" + f[1] + "\": expected N x C x " + std::to_string(c->nd) +
             " spatial extents (" + std::to_string(c->nd + 2) + " numbers), got " +
             std::to_string(c->shape.size());
    return false;
  }
  const std::string& w = f[2];
  const size_t ps = w.find('s'), pp = w.find('p');
  if (w.empty() || w[0] != 'k' || ps == std::string::npos || pp == std::string::npos || ps > pp ||
      !parse_int(w.substr(1, ps - 1), &c->k) || !parse_int(w.substr(ps + 1, pp - ps - 1), &c->s) ||
      !parse_int(w.substr(pp + 1), &c->p) || c->k < 1 || c->s < 1) {
    *error = "window \"" + w + "\": expected k<kernel>s<stride>p<padding>, e.g. k2s2p0";
    return false;
  }
  unsigned ops = 0;  // the op options given
  for (size_t i = 3; i < f.size(); ++i) {
    const std::string& o = f[i];
    bool dtype = false, op = false;
    for (DType d : kValueTypes)
      if (o == poolgen::dtype_name(d)) c->vt = d, dtype = true;
    for (const OpSpelling& spelling : kOpSpellings)
      if (o == spelling.option) ops |= op_bit(spelling.op), op = true;
    if (dtype || op) continue;
    if (o == "cl") c->cl = true;
    else if (o == "idx32") c->it = DType::i32;
    else if (o == "general") c->general_rows = true;
    else {
      *error = "option \"" + o + "\": expected cl, a value dtype (f32 f64 f16 bf16 i8 u8 i16 i32 "
               "i64), idx32, general or an op (pool, unpool, pool_backward, unpool_backward)";
      return false;
    }
  }
  if (ops) c->ops = ops;  // else the default, pool and unpool
  const bool float_values = c->vt == DType::f32 || c->vt == DType::f64 || c->vt == DType::f16 ||
                            c->vt == DType::bf16;
  if (!float_values && (c->times(Op::pool_backward) || c->times(Op::unpool_backward))) {
    *error = std::string("options pool_backward and unpool_backward: the gradients are floats "
                         "(f32 f64 f16 bf16), got ") + poolgen::dtype_name(c->vt);
    return false;
  }
  Ints out;  // poolgen's own validation of the window against the shape
  const auto st = poolgen::max_pool_output_shape(c->nd, c->shape, c->pool_options(), &out);
  if (!st.ok()) {
    *error = "window \"" + w + "\" on shape \"" + f[1] + "\": " + st.message();
    return false;
  }
  return true;
}

}  // namespace

const char* op_name(Op op) { return kOpSpellings[static_cast<int>(op)].name; }

std::string Case::window() const {
  return "k" + std::to_string(k) + "s" + std::to_string(s) + "p" + std::to_string(p);
}

std::string Case::shape_str() const {
  std::string r;
  for (size_t i = 0; i < shape.size(); ++i) r += (i ? "x" : "") + std::to_string(shape[i]);
  return r;
}

std::string Case::name() const {
  std::string r = std::to_string(nd) + "d/" + shape_str() + "/" + window();
  if (cl) r += "/cl";
  if (vt != DType::f32) r += std::string("/") + poolgen::dtype_name(vt);
  if (it == DType::i32) r += "/idx32";
  if (general_rows) r += "/general";
  return r;
}

std::string Case::label() const {
  std::string r = std::to_string(nd) + "d " + window();
  if (vt != DType::f32) r += std::string(" ") + poolgen::dtype_name(vt);
  if (cl) r += std::string(" ") + layout_name(nd);
  if (it != DType::i64) r += std::string(" ") + poolgen::dtype_name(it) + " indices";
  return r;
}

poolgen::PoolOptions Case::pool_options(poolgen::Path path) const {
  poolgen::PoolOptions o;
  o.path = path;
  o.kernel_size = {k};
  o.stride = {s};
  o.padding = {p};
  return o;
}

poolgen::UnpoolOptions Case::unpool_options(poolgen::Path path) const {
  poolgen::UnpoolOptions o;
  o.kernel_size = {k};
  o.stride = {s};
  o.padding = {p};
  o.output_size.assign(shape.end() - nd, shape.end());
  o.path = path;
  return o;
}

poolgen::TensorView Case::view(void* data, DType dtype, const Ints& sh) const {
  return cl ? poolgen::channels_last(data, dtype, sh) : poolgen::contiguous(data, dtype, sh);
}

Ints Case::pooled_shape() const {
  Ints r{shape[0], shape[1]};
  for (int i = 0; i < nd; ++i) r.push_back((shape[2 + i] + 2 * p - k) / s + 1);
  return r;
}

int64_t Case::in_elems() const { return product(shape); }
int64_t Case::out_elems() const { return product(pooled_shape()); }

std::vector<Case> builtin_cases() {
  std::vector<Case> r;
  auto add = [&](int nd, Ints shape, int64_t k, int64_t s, int64_t p, Case c) {
    c.nd = nd, c.shape = std::move(shape), c.k = k, c.s = s, c.p = p;
    r.push_back(c);
  };
  const Ints s2{8, 64, 112, 112}, s3{2, 16, 32, 64, 64}, s1{8, 64, 65536};
  const unsigned pool = op_bit(Op::pool), unpool = op_bit(Op::unpool);
  const unsigned backward = op_bit(Op::pool_backward) | op_bit(Op::unpool_backward);
  // f32 NCHW, i64 indices: both forward ops on both paths (the fast windows against the general
  // kernel), and their backward passes.
  Case base;
  base.general_rows = true;
  base.ops = pool | unpool | backward;
  add(2, s2, 2, 2, 0, base);
  add(2, s2, 3, 2, 1, base);
  add(3, s3, 2, 2, 0, base);
  add(1, s1, 2, 2, 0, base);
  // f32 channels-last: pooling in both windows, unpooling the k2s2p0 (SegNet) indices, the
  // backward passes of both.
  Case cl;
  cl.cl = true;
  cl.ops = pool | unpool | backward;
  add(2, s2, 2, 2, 0, cl);
  cl.ops = pool | backward;
  add(2, s2, 3, 2, 1, cl);
  cl.ops = pool | unpool | backward;
  add(3, s3, 2, 2, 0, cl);
  // f32 with i32 indices: a third less traffic than i64 in 2-D k2s2p0, and in NHWC the
  // like-for-like comparison with XNNPACK (which writes 4-byte indices).
  Case i32;
  i32.it = DType::i32;
  add(2, s2, 2, 2, 0, i32);
  i32.cl = true;
  add(2, s2, 2, 2, 0, i32);
  // Small tensors, where a call's fixed cost and the choice of threads decide: 2-D f32 k2s2p0,
  // one image, in both layouts (1x1x2x2 is the per-call cost); the backward passes too, but for
  // 1x1x2x2 and 1x64x16x16.
  for (int64_t h : {2, 7, 14, 16, 28, 56})
    for (bool layout_cl : {false, true}) {
      Case small;
      small.cl = layout_cl;
      small.ops = pool | unpool | (h == 2 || h == 16 ? 0 : backward);
      add(2, {1, h == 2 ? 1 : 64, h, h}, 2, 2, 0, small);
    }
  // 16- and 8-bit values in both layouts (u8 unpooling is the i8 kernel: not repeated).
  for (DType dt : {DType::f16, DType::bf16, DType::i8, DType::u8})
    for (bool layout_cl : {false, true}) {
      Case v;
      v.vt = dt;
      v.cl = layout_cl;
      v.ops = dt != DType::u8 ? pool | unpool : pool;
      add(2, s2, 2, 2, 0, v);
      v.ops = pool;
      add(2, s2, 3, 2, 1, v);
    }
  return r;
}

bool parse_cases(const std::string& list, std::vector<Case>* out, std::string* error) {
  for (const auto& text : split(list, ',')) {
    Case c;
    std::string why;
    if (!parse_case(text, &c, &why)) {
      *error = "case \"" + text + "\": " + why;
      return false;
    }
    out->push_back(c);
  }
  return true;
}

std::vector<Case> sweep_cases(int64_t llc_bytes) {
  // 2-D f32, N=1, C=64, square planes (H even) of 64 KiB, 128 KiB, ... up to 8x the LLC:
  // from L2-resident to well past the LLC, where only memory bandwidth counts. The backward
  // passes run at every other size (4x apart: the added time stays small) up to 2x the LLC:
  // past it bandwidth already decides, and a case holding the buffers of all four ops, ATen's
  // and the copy's needs about 13x its input: 26 GB at 8x a 260 MiB LLC, more than a 23 GB VM.
  std::vector<Case> r;
  int step = 0;
  for (int64_t bytes = 64 << 10; bytes <= 8 * llc_bytes; bytes *= 2, ++step) {
    const int64_t h = std::max<int64_t>(2, 2 * std::llround(std::sqrt(bytes / (64.0 * 4)) / 2));
    const bool backward = step % 2 == 0 && bytes <= 2 * llc_bytes;
    for (int64_t k : {2, 3})
      for (bool cl : {false, true}) {
        Case c;
        c.shape = {1, 64, h, h};
        c.k = k, c.s = 2, c.p = k == 3 ? 1 : 0;
        c.cl = cl;
        c.ops = op_bit(Op::pool) | (k == 2 ? op_bit(Op::unpool) : 0);
        if (backward)
          c.ops |= op_bit(Op::pool_backward) | (k == 2 ? op_bit(Op::unpool_backward) : 0);
        c.sweep = true;
        r.push_back(c);
        if (cl && k == 2) {  // XNNPACK's own ground, with its index width (forward only)
          c.it = DType::i32;
          c.ops &= op_bit(Op::pool) | op_bit(Op::unpool);
          r.push_back(c);
        }
      }
  }
  return r;
}

int64_t last_level_cache(std::string* source) {
  // The kernel's cache description first: glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) can be far off
  // in VMs (320 MiB on a 32 MiB AMD EPYC guest), which would make the sweep 10x too long.
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level(dir + "level"), size(dir + "size");
    int lv = 0;
    std::string text;
    if (!(level >> lv) || lv != 3 || !(size >> text)) continue;
    int64_t v = std::atoll(text.c_str());
    if (!text.empty() && (text.back() == 'K' || text.back() == 'k')) v <<= 10;
    if (!text.empty() && text.back() == 'M') v <<= 20;
    if (v > 0) {
      *source = dir + "size";
      return v;
    }
  }
  const long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (v > 0) {
    *source = "sysconf(_SC_LEVEL3_CACHE_SIZE)";
    return v;
  }
  *source = "default (neither /sys nor sysconf reports an L3)";
  return 32 << 20;
}

}  // namespace bench
