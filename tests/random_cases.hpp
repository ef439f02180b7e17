// Random pooling and unpooling configurations shared by the randomized tests
// (differential_test.cpp: f32, contiguous and strided views; typed_test.cpp: every dtype, index
// dtype and layout). Every generator draws from an Rng with a fixed seed, so runs repeat; the
// reference (reference.hpp) decides which configurations are valid.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "poolgen/poolgen.hpp"
#include "reference.hpp"
#include "test_util.hpp"

namespace poolgen::test {

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  int64_t uniform(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen_);
  }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(gen_) < p; }
  double normal() { return std::normal_distribution<double>(0.0, 1.0)(gen_); }
  uint64_t bits() { return gen_(); }
  template <typename V>
  void shuffle(std::vector<V>& v) {
    std::shuffle(v.begin(), v.end(), gen_);
  }

 private:
  std::mt19937_64 gen_;
};

// A list of nd entries, written as one entry when they are equal and the coin says so.
inline Ints maybe_short(Rng& rng, const Ints& v) {
  if (std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == v[0]; }) && rng.chance(0.5)) {
    return {v[0]};
  }
  return v;
}

// Which window random_pool_config() makes: with probability p one of the specialised windows
// (1: k2s2p0, 2: k3s2p1), otherwise 0 (random).
inline int random_window(Rng& rng, double p) {
  return rng.chance(p) ? static_cast<int>(rng.uniform(1, 2)) : 0;
}

// Fewer contiguous configurations than this, of `configs` with random_window's draws, reaching a
// fast-window kernel means the draws no longer exercise them. 3-D has one fast window (k2s2p0:
// k3s2p1 is not built, cmake/PoolgenKernels.cmake), and ceil_mode's windows leave it whenever
// one of three extents is odd (bf16 with i32 indices: 3 of its valid configurations reach it).
inline int min_fast_hits(int nd, int configs) { return configs / (nd == 3 ? 40 : 5); }

// The product of the last nd extents of a shape: one (n, c) plane.
inline int64_t plane_size(int nd, const Ints& shape) {
  int64_t plane = 1;
  for (int i = 0; i < nd; ++i) plane *= shape[shape.size() - nd + i];
  return plane;
}

// Kinds of configurations random_pool_config() makes besides the common ones.
struct PoolConfigOptions {
  bool unit_dilation = false;  // dilation 1 everywhere (unpooling has none)
  bool many_channels = false;  // sometimes 13 to 40 channels on a small plane
  // How often (percent of the draws) rows are long (full vectors plus tails; the contiguous
  // gathers take only rows of whole vectors of windows) and many_channels gives them (the
  // channels-last gathers take only channels a whole vector wide).
  int64_t long_rows_percent = 15;
  int64_t many_channels_percent = 12;
};

// (N, C, spatial...) or (C, spatial...); N sometimes 0; C mostly small, sometimes many channels
// (channel vectors and their tails in channels-last kernels).
inline Ints random_shape(Rng& rng, const Ints& spatial, bool many_channels) {
  Ints shape;
  if (!rng.chance(0.2)) shape.push_back(rng.chance(0.06) ? 0 : rng.uniform(1, 2));
  shape.push_back(many_channels ? rng.uniform(13, 40) : rng.uniform(1, 4));
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  return shape;
}

// A valid random pooling configuration. window: 0 random, 1 k2s2p0, 2 k3s2p1 (dilation 1).
inline void random_pool_config(Rng& rng, int nd, int window, const PoolConfigOptions& opts,
                               Ints* shape, PoolOptions* o) {
  const int64_t max_extent = nd == 3 ? 7 : (nd == 2 ? 11 : 16);
  for (;;) {
    Ints k(nd), s(nd), p(nd), d(nd), sp(nd);
    bool default_stride = false;
    for (int i = 0; i < nd; ++i) {
      if (window == 1) {
        k[i] = 2, s[i] = 2, p[i] = 0, d[i] = 1;
      } else if (window == 2) {
        k[i] = 3, s[i] = 2, p[i] = 1, d[i] = 1;
      } else {
        k[i] = rng.uniform(1, 4);
        d[i] = opts.unit_dilation || rng.chance(0.7) ? 1 : rng.uniform(2, 3);
        s[i] = rng.uniform(1, 3);
        const int64_t limit = nd == 3 ? k[i] / 2 : (d[i] * (k[i] - 1) + 1) / 2;
        p[i] = rng.uniform(0, limit);
      }
      sp[i] = rng.uniform(1, max_extent);
    }
    const int64_t r = rng.uniform(0, 99);
    bool many_channels = false;
    if (r < opts.long_rows_percent) {
      // Long innermost rows: full vectors plus tails, work split across threads.
      sp[nd - 1] = rng.uniform(max_extent, 6 * max_extent);
      // An even row at k2s2p0 gets even extents throughout, in 2-D and 3-D also whole vectors
      // of windows (32 columns: 16 lanes): windows that tile the plane, the contiguous gathers'
      // only calls (an odd extent leaves a last row or column to no window; 1-D gathers take
      // tails). Odd rows keep every tail.
      if (window == 1 && sp[nd - 1] % 2 == 0) {
        if (nd > 1) sp[nd - 1] = (sp[nd - 1] + 31) / 32 * 32;
        for (int i = 0; i < nd - 1; ++i) sp[i] += sp[i] % 2;
      }
    } else if (opts.many_channels && r < opts.long_rows_percent + opts.many_channels_percent) {
      // Many channels on a small plane, e.g. 2x37x5x9 (rows of 2 to 4 outputs at k2s2p0).
      many_channels = true;
      if (nd == 2) sp = {5, rng.uniform(5, 9)};
      if (nd == 3) sp = {3, 5, rng.uniform(4, 9)};
      if (nd == 1) sp = {rng.uniform(9, 23)};
    }
    if (window == 0 && rng.chance(0.15)) {
      default_stride = true;
      s = k;
    }
    o->kernel_size = maybe_short(rng, k);
    o->stride = default_stride ? Ints{} : maybe_short(rng, s);
    o->padding = maybe_short(rng, p);
    o->dilation = maybe_short(rng, d);
    o->ceil_mode = rng.chance(0.5);
    *shape = random_shape(rng, sp, many_channels);
    Ints out;
    if (ref::max_pool_output_shape(nd, *shape, *o, &out).ok()) return;
  }
}

struct UnpoolCaseOptions {
  double window_p = 0.5;       // chance of a k2s2p0 / k3s2p1 window (random_window)
  bool many_channels = false;  // as in PoolConfigOptions
  int64_t long_rows_percent = 15;  // likewise
};

// Unpooling inputs: values/indices (int64, logical order) and options. mode 0: indices from a
// real pooling with the same window (the fast gather where compiled); 1: random indices with
// duplicates; 2: pooled indices with a few replaced by other valid ones; 3: like 1 with an
// invalid index injected (one that fits I). random_values(rng, n) makes n values of type T.
template <typename T>
struct UnpoolCase {
  Ints shape;  // of the values and the indices
  std::vector<T> values;
  std::vector<int64_t> indices;
  UnpoolOptions o;
};

template <typename T, typename I, typename Values>
UnpoolCase<T> random_unpool_case(Rng& rng, int nd, int mode, const UnpoolCaseOptions& opts,
                                 Values random_values) {
  UnpoolCase<T> c;
  UnpoolOptions* o = &c.o;
  std::vector<T>* values = &c.values;
  std::vector<int64_t>* indices = &c.indices;
  PoolConfigOptions pool_opts;
  pool_opts.unit_dilation = true;
  pool_opts.many_channels = opts.many_channels;
  pool_opts.long_rows_percent = opts.long_rows_percent;
  for (;;) {
    Ints pool_shape;
    PoolOptions po;
    random_pool_config(rng, nd, random_window(rng, opts.window_p), pool_opts, &pool_shape, &po);
    Ints pooled_shape;
    if (!ref::max_pool_output_shape(nd, pool_shape, po, &pooled_shape).ok()) continue;
    o->kernel_size = po.kernel_size;
    o->stride = po.stride;
    o->padding = po.padding;
    o->output_size.clear();
    // output_size: empty, the pooled input's extents, or a random in-range value; nd or nd+2.
    const int os_style = static_cast<int>(rng.uniform(0, 2));
    if (os_style > 0) {
      Ints def;
      if (!ref::max_unpool_output_shape(nd, pooled_shape, *o, &def).ok()) continue;
      ref::PoolWindow w;
      ref::expand_unpool_options(nd, *o, &w);
      Ints os(nd);
      for (int i = 0; i < nd; ++i) {
        const int64_t dflt = def[def.size() - nd + i];
        os[i] = os_style == 1 ? pool_shape[pool_shape.size() - nd + i]
                              : rng.uniform(dflt - w.stride[i] + 1, dflt + w.stride[i] - 1);
      }
      if (rng.chance(0.3)) os.insert(os.begin(), {rng.uniform(0, 9), rng.uniform(0, 9)});
      o->output_size = os;
    }
    Ints out_shape;
    if (!ref::max_unpool_output_shape(nd, pooled_shape, *o, &out_shape).ok()) continue;
    const int64_t plane = plane_size(nd, out_shape);
    const int64_t n = ref::numel(pooled_shape);
    if (mode == 0 || mode == 2) {
      const std::vector<T> input = random_values(rng, ref::numel(pool_shape));
      Ints tmp;
      ref::max_pool<T>(nd, pool_shape, input, po, &tmp, values, indices);
      // The pooled indices must fit the unpooled plane (an output_size smaller than the pooled
      // input can cut them off); otherwise pick another case.
      if (std::any_of(indices->begin(), indices->end(),
                      [&](int64_t i) { return i < 0 || i >= plane; })) {
        continue;
      }
      if (mode == 2 && n > 0) {
        const int64_t changes = rng.uniform(1, 3);
        for (int64_t c = 0; c < changes; ++c) {
          (*indices)[rng.uniform(0, n - 1)] = rng.uniform(0, plane - 1);
        }
      }
    } else {
      *values = random_values(rng, n);
      indices->resize(n);
      const int64_t range = rng.chance(0.3) ? std::min<int64_t>(plane, 3) : plane;
      for (int64_t& i : *indices) i = rng.uniform(0, range - 1);
      if (mode == 3 && n > 0) {
        const int64_t bad[] = {-1,
                               plane,
                               plane + 7,
                               -1000,
                               static_cast<int64_t>(std::numeric_limits<I>::max()),
                               static_cast<int64_t>(std::numeric_limits<I>::min())};
        (*indices)[rng.uniform(0, n - 1)] = bad[rng.uniform(0, 5)];
      }
    }
    c.shape = pooled_shape;
    return c;
  }
}

// Gradients whose sums depend on the order of the additions (1e8, 1, -1e8, 3e-8, and 1, 3*2^-10
// for the 16-bit floats' per-addition rounding), with signed zeros, infinities and NaN now and
// then. make(double) converts to the element type.
template <typename T, typename Make>
std::vector<T> random_gradients(Rng& rng, int64_t n, Make make) {
  static const double kPalette[] = {1e8,  1.0, -1e8, 3e-8, -1.0, 0.5, 3.0 / 1024, -3.0 / 1024,
                                    -0.0, 0.0, 2.0,  -2.5, 1e-3, 7.0};
  const double special_p = rng.chance(0.3) ? 0.05 : 0.0;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<T> g;
  g.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double x = rng.chance(0.7) ? kPalette[rng.uniform(0, 13)] : rng.normal();
    if (rng.chance(special_p)) {
      const double specials[] = {inf, -inf, std::numeric_limits<double>::quiet_NaN()};
      x = specials[rng.uniform(0, 2)];
    }
    g.push_back(make(x));
  }
  return g;
}

// Pooling backward inputs: a pooling configuration, indices from a real pooling of random
// values (ties, NaN, empty dilated windows), and random_gradients. mode 0: those indices; 1: a
// few replaced by other positions of the plane (outside their windows, which the window gather
// must notice); 2: a few outside the plane (dropped) or replaced as in 1.
template <typename T>
struct PoolBackwardCase {
  Ints input_shape, output_shape;
  std::vector<T> grad_output;
  std::vector<int64_t> indices;
  PoolOptions o;
};

template <typename T, typename Values, typename Make>
PoolBackwardCase<T> random_pool_backward_case(Rng& rng, int nd, int mode, double window_p,
                                              const PoolConfigOptions& opts, Values random_values,
                                              Make make) {
  PoolBackwardCase<T> c;
  random_pool_config(rng, nd, random_window(rng, window_p), opts, &c.input_shape, &c.o);
  const std::vector<T> input = random_values(rng, ref::numel(c.input_shape));
  std::vector<T> pooled;
  ref::max_pool<T>(nd, c.input_shape, input, c.o, &c.output_shape, &pooled, &c.indices);
  const int64_t n = static_cast<int64_t>(c.indices.size()), plane = plane_size(nd, c.input_shape);
  if (mode > 0 && n > 0) {
    for (int64_t k = rng.uniform(1, 3); k > 0; --k) {
      int64_t& index = c.indices[rng.uniform(0, n - 1)];
      const int64_t outside[] = {-1, plane, plane + 5, -1000};
      index = mode == 2 && rng.chance(0.6) ? outside[rng.uniform(0, 3)]
                                           : rng.uniform(0, plane - 1);
    }
  }
  c.grad_output = random_gradients<T>(rng, n, make);
  return c;
}

// Unpooling's mode (see random_unpool_case): 0 below cut[0] percent, 1 below cut[1], 2 below
// cut[2], 3 for the rest.
inline int random_unpool_mode(Rng& rng, const int (&cut)[3]) {
  const int64_t r = rng.uniform(0, 99);
  return r < cut[0] ? 0 : r < cut[1] ? 1 : r < cut[2] ? 2 : 3;
}

inline std::string describe(const PoolOptions& o) {
  std::ostringstream os;
  os << "kernel_size " << str(o.kernel_size) << " stride " << str(o.stride) << " padding "
     << str(o.padding) << " dilation " << str(o.dilation) << " ceil_mode " << o.ceil_mode;
  return os.str();
}

inline std::string describe(const UnpoolOptions& o) {
  std::ostringstream os;
  os << "kernel_size " << str(o.kernel_size) << " stride " << str(o.stride) << " padding "
     << str(o.padding) << " output_size " << str(o.output_size);
  return os.str();
}

// With the shape of the op's input first.
inline std::string describe(const Ints& input_shape, const PoolOptions& o) {
  return "input " + str(input_shape) + " " + describe(o);
}

inline std::string describe(const Ints& values_shape, const UnpoolOptions& o) {
  return "values " + str(values_shape) + " " + describe(o);
}

// Duplicate unpool indices on a shape big enough to be split across threads: (2, channels,
// spatial...) values of kernel_size 2, indices (int64, logical order) drawn from the first 40
// positions of each plane, so that many collide.
struct DuplicatesCase {
  Status status;  // of the output shape (ok: the case is made)
  Ints shape, out_shape;
  UnpoolOptions o;
  std::vector<int64_t> indices;
};

inline DuplicatesCase duplicates_case(Rng& rng, int nd, int64_t channels) {
  DuplicatesCase c;
  const Ints spatial = nd == 1 ? Ints{300} : nd == 2 ? Ints{24, 20} : Ints{8, 9, 10};
  c.shape = {2, channels};
  c.shape.insert(c.shape.end(), spatial.begin(), spatial.end());
  c.o.kernel_size = {2};
  c.status = ref::max_unpool_output_shape(nd, c.shape, c.o, &c.out_shape);
  if (!c.status.ok()) return c;
  const int64_t plane = plane_size(nd, c.out_shape);
  c.indices.resize(static_cast<size_t>(ref::numel(c.shape)));
  for (int64_t& i : c.indices) i = rng.uniform(0, std::min<int64_t>(plane, 40) - 1);
  return c;
}

}  // namespace poolgen::test
