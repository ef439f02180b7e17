// The scalar reference (docs/semantics.md, dilation 1): one loop nest, one thread. The
// channels-last loop nest runs (n, spatial, c) so that it walks its memory in order, as the NCHW
// one does. Unpooling and the backward passes share one walk over the indices.
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

uint16_t float_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // 65520 and up round to infinity
  if (x < 0x38800000u)  // below 2^-14: a subnormal, |f| * 2^24 rounded (exact scaling)
    return sign | static_cast<uint16_t>(std::nearbyint(std::fabs(f) * 16777216.0f));
  const uint32_t rest = x & 0x1fffu;  // the 13 mantissa bits dropped
  uint32_t h = ((x >> 23) - 112) << 10 | ((x >> 13) & 0x3ffu);
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;  // a carry moves into the exponent
  return sign | static_cast<uint16_t>(h);
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

// Calls f(p, u) for each pooled element p and the element u of the unpooled extent its index
// names (offsets into whole buffers), in memory order, which within each (n, c) plane is
// ascending order. An index outside its plane is skipped (drop_invalid) or ends the walk: false.
template <bool CL, class I, class F>
bool for_each_index(const Geometry& g, const I* idx, bool drop_invalid, F&& f) {
  const int64_t pp = g.out_plane(), up = g.in_plane();
  const int64_t C = CL ? g.c : 1;
  const int64_t outer = CL ? g.n : g.planes, inner = CL ? g.c : 1;  // NCHW: a plane at a time
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < pp; ++i)
      for (int64_t c = 0; c < inner; ++c) {
        const int64_t p = (o * pp + i) * C + c, j = idx[p];
        if (j < 0 || j >= up) {
          if (drop_invalid) continue;
          return false;
        }
        f(p, (o * up + j) * C + c);
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

bool Spec::reference_by_index(Op op, const void* src, const void* idx, void* dst) const {
  bool ok = false;
  with_types(vt, it, [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    const T* in = static_cast<const T*>(src);
    T* out = static_cast<T*>(dst);
    auto walk = [&](bool drop_invalid, auto&& f) {
      const I* x = static_cast<const I*>(idx);
      return cl ? for_each_index<true>(g, x, drop_invalid, f)
                : for_each_index<false>(g, x, drop_invalid, f);
    };
    switch (op) {
      case Op::unpool:  // zero, then each value at its index: the latest duplicate wins
        std::memset(static_cast<void*>(out), 0, sizeof(T) * in_elems());
        ok = walk(false, [&](int64_t p, int64_t u) { out[u] = in[p]; });
        break;
      case Op::pool_backward:  // zero, then add in ascending order; invalid indices add nothing
        std::memset(static_cast<void*>(out), 0, sizeof(T) * in_elems());
        ok = walk(true, [&](int64_t p, int64_t u) { out[u] = ValueTraits<T>::add(out[u], in[p]); });
        break;
      case Op::unpool_backward:  // the gather
        ok = walk(false, [&](int64_t p, int64_t u) { out[p] = in[u]; });
        break;
      case Op::pool: break;  // reference_pool
    }
  });
  return ok;
}

}  // namespace bench
