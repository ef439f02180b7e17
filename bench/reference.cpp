// The scalar reference (docs/semantics.md, dilation 1): one loop nest, one thread. The
// channels-last loop nest runs (n, spatial, c) so that it walks its memory in order, as the NCHW
// one does.
#include "bench.h"

#include <algorithm>

namespace bench {

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

namespace {

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

}  // namespace

void Spec::reference_pool(void* vals, void* idx) const {
  with_types(vt, it, [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    (cl ? reference_pool_t<T, I, true> : reference_pool_t<T, I, false>)(
        g, input.as<T>(), static_cast<T*>(vals), static_cast<I*>(idx));
  });
}

bool Spec::reference_unpool(const void* vals, const void* idx, void* out) const {
  bool ok = false;
  with_types(vt, it, [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    ok = (cl ? reference_unpool_t<T, I, true> : reference_unpool_t<T, I, false>)(
        g, static_cast<const T*>(vals), static_cast<const I*>(idx), static_cast<T*>(out));
  });
  return ok;
}

}  // namespace bench
