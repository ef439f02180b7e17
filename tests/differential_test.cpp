// Randomized differential tests: the library (both paths) against the reference on thousands of
// small random configurations, fixed seeds. Covers the specialised fast paths (pool k2s2p0 and
// k3s2p1; unpool gather with indices from a real pooling), the general scatter with duplicate
// and invalid indices, output_size variations, strided views and guard bytes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lib_util.hpp"
#include "reference.hpp"
#include "test_util.hpp"

namespace poolgen {
namespace {

using test::same_floats;
using test::same_ints;
using test::str;

constexpr int kConfigsPerRank = 2000;
constexpr int kMaxReportedFailures = 5;

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  int64_t uniform(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen_);
  }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(gen_) < p; }
  float normal() { return std::normal_distribution<float>(0.f, 1.f)(gen_); }

 private:
  std::mt19937_64 gen_;
};

// Values with many ties and occasional NaN / -inf / signed zeros.
std::vector<float> random_values(Rng& rng, int64_t n) {
  const int style = static_cast<int>(rng.uniform(0, 3));
  const double nan_p = rng.chance(0.3) ? 0.03 : 0.0;
  const double ninf_p = rng.chance(0.3) ? 0.2 : 0.0;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    if (style == 0) {
      x = static_cast<float>(rng.uniform(0, 3));  // many ties
    } else if (style == 1) {
      x = rng.chance(0.5) ? -0.0f : 0.0f;
    } else {
      x = rng.normal();
    }
    if (rng.chance(nan_p)) x = kNan;
    if (rng.chance(ninf_p)) x = -kInf;
  }
  return v;
}

// A list of nd entries, written as one entry when they are equal and the coin says so.
Ints maybe_short(Rng& rng, const Ints& v) {
  if (std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == v[0]; }) && rng.chance(0.5)) {
    return {v[0]};
  }
  return v;
}

Ints random_batch_channels(Rng& rng, int nd, const Ints& spatial) {
  Ints shape;
  if (!rng.chance(0.2)) shape.push_back(rng.chance(0.05) ? 0 : rng.uniform(1, 2));
  shape.push_back(rng.uniform(1, 3));
  (void)nd;
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  return shape;
}

std::string describe(const Ints& shape, const PoolOptions& o) {
  std::ostringstream os;
  os << "input " << str(shape) << " kernel_size " << str(o.kernel_size) << " stride "
     << str(o.stride) << " padding " << str(o.padding) << " dilation " << str(o.dilation)
     << " ceil_mode " << o.ceil_mode;
  return os.str();
}

std::string describe(const Ints& shape, const UnpoolOptions& o) {
  std::ostringstream os;
  os << "values " << str(shape) << " kernel_size " << str(o.kernel_size) << " stride "
     << str(o.stride) << " padding " << str(o.padding) << " output_size " << str(o.output_size);
  return os.str();
}

// A valid random pooling configuration. fast: 0 random, 1 k2s2p0, 2 k3s2p1 (dilation 1).
void random_pool_config(Rng& rng, int nd, int fast, Ints* shape, PoolOptions* o) {
  const int64_t max_extent = nd == 3 ? 7 : (nd == 2 ? 11 : 16);
  for (;;) {
    Ints k(nd), s(nd), p(nd), d(nd), sp(nd);
    bool default_stride = false;
    for (int i = 0; i < nd; ++i) {
      if (fast == 1) {
        k[i] = 2, s[i] = 2, p[i] = 0, d[i] = 1;
      } else if (fast == 2) {
        k[i] = 3, s[i] = 2, p[i] = 1, d[i] = 1;
      } else {
        k[i] = rng.uniform(1, 4);
        d[i] = rng.chance(0.7) ? 1 : rng.uniform(2, 3);
        s[i] = rng.uniform(1, 3);
        const int64_t limit = nd == 3 ? k[i] / 2 : (d[i] * (k[i] - 1) + 1) / 2;
        p[i] = rng.uniform(0, limit);
      }
      sp[i] = rng.uniform(1, max_extent);
    }
    // Sometimes a long innermost row: full vectors plus tails, work split across threads.
    if (rng.chance(0.15)) sp[nd - 1] = rng.uniform(max_extent, 6 * max_extent);
    if (fast == 0 && rng.chance(0.15)) {
      default_stride = true;
      s = k;
    }
    o->kernel_size = maybe_short(rng, k);
    o->stride = default_stride ? Ints{} : maybe_short(rng, s);
    o->padding = maybe_short(rng, p);
    o->dilation = maybe_short(rng, d);
    o->ceil_mode = rng.chance(0.5);
    *shape = random_batch_channels(rng, nd, sp);
    Ints out;
    if (ref::max_pool_output_shape(nd, *shape, *o, &out).ok()) return;
  }
}

// True when the automatic path picks another kernel than the general one.
template <typename Options>
bool is_fast_kernel(Status (*kernel_name)(int, const Ints&, const Options&, std::string*), int nd,
                    const Ints& shape, Options o) {
  std::string automatic, general;
  o.path = Path::automatic;
  if (!kernel_name(nd, shape, o, &automatic).ok()) return false;
  o.path = Path::general;
  return kernel_name(nd, shape, o, &general).ok() && automatic != general;
}

bool is_fast_kernel(int nd, const Ints& shape, const PoolOptions& o) {
  return is_fast_kernel(max_pool_kernel_name, nd, shape, o);
}

bool is_fast_kernel(int nd, const Ints& shape, const UnpoolOptions& o) {
  return is_fast_kernel(max_unpool_kernel_name, nd, shape, o);
}

class DifferentialPool : public ::testing::TestWithParam<int> {};

TEST_P(DifferentialPool, LibraryMatchesReference) {
  const int nd = GetParam();
  Rng rng(0x9001 + nd);
  int failures = 0, fast_hits = 0;
  for (int iter = 0; iter < kConfigsPerRank && failures < kMaxReportedFailures; ++iter) {
    const int fast = nd == 1 ? 0 : static_cast<int>(rng.chance(0.35) ? rng.uniform(1, 2) : 0);
    Ints shape;
    PoolOptions o;
    random_pool_config(rng, nd, fast, &shape, &o);
    const std::vector<float> input = random_values(rng, ref::numel(shape));
    Ints out_shape;
    std::vector<float> values;
    std::vector<int64_t> indices;
    Status st = ref::max_pool<float>(nd, shape, input, o, &out_shape, &values, &indices);
    ASSERT_TRUE(st.ok()) << st.message();
    if (is_fast_kernel(nd, shape, o)) ++fast_hits;
    Ints lib_shape;
    st = max_pool_output_shape(nd, shape, o, &lib_shape);
    for (Path path : {Path::automatic, Path::general}) {
      test::PoolRun r = test::run_pool(nd, shape, input, out_shape, o, path);
      const bool ok = st.ok() && lib_shape == out_shape && r.status.ok() && r.guards_ok &&
                      same_floats(values, r.values) && same_ints(indices, r.indices);
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "config " << iter << ": " << describe(shape, o) << " path "
                      << test::path_name(path) << "\n  shape status: " << st.message()
                      << " lib shape " << str(lib_shape) << " expected " << str(out_shape)
                      << "\n  status: " << r.status.message() << "\n  guards intact: "
                      << r.guards_ok << "\n  values: " << same_floats(values, r.values).message()
                      << "\n  indices: " << same_ints(indices, r.indices).message();
        break;
      }
    }
  }
  if (nd >= 2) {
    EXPECT_GT(fast_hits, kConfigsPerRank / 5) << "too few fast-path configurations";
  }
}

INSTANTIATE_TEST_SUITE_P(Rank, DifferentialPool, ::testing::Values(1, 2, 3));

// Unpooling inputs: values/indices and options. mode 0: indices from a real pooling with the
// same window (fast gather where compiled); 1: random indices with duplicates; 2: pooled
// indices with a few replaced by other valid ones; 3: like 1 with an invalid index injected.
void random_unpool_case(Rng& rng, int nd, int mode, Ints* shape, std::vector<float>* values,
                        std::vector<int64_t>* indices, UnpoolOptions* o) {
  for (;;) {
    Ints pool_shape;
    PoolOptions po;
    const int fast = nd == 1 ? 0 : static_cast<int>(rng.chance(0.6) ? rng.uniform(1, 2) : 0);
    random_pool_config(rng, nd, fast, &pool_shape, &po);
    if (fast == 0) po.dilation = {1};  // unpooling has no dilation
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
    int64_t plane = 1;
    for (int i = 0; i < nd; ++i) plane *= out_shape[out_shape.size() - nd + i];
    const int64_t n = ref::numel(pooled_shape);
    if (mode == 0 || mode == 2) {
      const std::vector<float> input = random_values(rng, ref::numel(pool_shape));
      Ints tmp;
      ref::max_pool<float>(nd, pool_shape, input, po, &tmp, values, indices);
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
        const int64_t bad[] = {-1, plane, plane + 7, -1000, std::numeric_limits<int64_t>::max(),
                               std::numeric_limits<int64_t>::min()};
        (*indices)[rng.uniform(0, n - 1)] = bad[rng.uniform(0, 5)];
      }
    }
    *shape = pooled_shape;
    return;
  }
}

class DifferentialUnpool : public ::testing::TestWithParam<int> {};

TEST_P(DifferentialUnpool, LibraryMatchesReference) {
  const int nd = GetParam();
  Rng rng(0x5eed + 17 * nd);
  int failures = 0, fast_hits = 0, errors = 0;
  for (int iter = 0; iter < kConfigsPerRank && failures < kMaxReportedFailures; ++iter) {
    const int64_t r = rng.uniform(0, 99);
    const int mode = r < 45 ? 0 : r < 75 ? 1 : r < 92 ? 2 : 3;
    Ints shape;
    std::vector<float> values;
    std::vector<int64_t> indices;
    UnpoolOptions o;
    random_unpool_case(rng, nd, mode, &shape, &values, &indices, &o);
    Ints out_shape;
    std::vector<float> expected;
    Status ref_status =
        ref::max_unpool<float>(nd, shape, values, indices, o, &out_shape, &expected);
    if (!ref_status.ok()) {
      ASSERT_EQ(ref_status.code(), Code::index_out_of_range) << ref_status.message();
      ASSERT_TRUE(ref::max_unpool_output_shape(nd, shape, o, &out_shape).ok());
      ++errors;
    }
    if (mode == 0 && is_fast_kernel(nd, shape, o)) ++fast_hits;
    Ints lib_shape;
    Status st = max_unpool_output_shape(nd, shape, o, &lib_shape);
    for (Path path : {Path::automatic, Path::general}) {
      test::UnpoolRun run = test::run_unpool(nd, shape, values, indices, out_shape, o, path);
      bool ok = st.ok() && lib_shape == out_shape && run.guards_ok &&
                run.status.code() == ref_status.code();
      // An empty output (N = 0) has nothing to check indices against.
      if (ref_status.ok()) ok = ok && same_floats(expected, run.output);
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "config " << iter << " (mode " << mode << "): " << describe(shape, o)
                      << " path " << test::path_name(path) << "\n  indices " << str(indices)
                      << "\n  shape status: " << st.message() << " lib shape " << str(lib_shape)
                      << " expected " << str(out_shape) << "\n  status: " << run.status.message()
                      << " expected: " << ref_status.message()
                      << "\n  guards intact: " << run.guards_ok << "\n  output: "
                      << (ref_status.ok() ? same_floats(expected, run.output).message() : "");
        break;
      }
    }
  }
  // The gather kernels are opt-in (POOLGEN_UNPOOL_GATHER); when built, they must be reached.
  const auto kernels = compiled_kernels();
  const bool gather_built = std::any_of(kernels.begin(), kernels.end(), [](const KernelInfo& k) {
    return k.op == "unpool_gather";
  });
  if (nd >= 2 && gather_built) {
    EXPECT_GT(fast_hits, kConfigsPerRank / 10) << "too few gather-path configurations";
  }
  EXPECT_GT(errors, 0) << "no invalid-index configuration was generated";
}

INSTANTIATE_TEST_SUITE_P(Rank, DifferentialUnpool, ::testing::Values(1, 2, 3));

// ---------------------------------------------------------------------------------------------
// Strided views: inputs that are slices of bigger tensors (strides > packed in N, C and the
// spatial dims, innermost stride 1), outputs written through such views; nothing outside a
// view may change.

// A view of `shape` inside a bigger backing tensor.
struct StridedBuffer {
  Ints shape, backing_shape, offset, strides;
  std::vector<float> f;
  std::vector<int64_t> i;

  StridedBuffer(Rng& rng, const Ints& view_shape) : shape(view_shape) {
    const size_t rank = shape.size();
    backing_shape.resize(rank);
    offset.resize(rank);
    for (size_t d = 0; d < rank; ++d) {
      const int64_t extra = rng.uniform(0, 2);
      backing_shape[d] = shape[d] + extra;
      offset[d] = rng.uniform(0, extra);
    }
    if (rank > 0 && backing_shape[0] == 0) backing_shape[0] = 1;
    strides.assign(rank, 1);
    for (int d = static_cast<int>(rank) - 2; d >= 0; --d) {
      strides[d] = strides[d + 1] * backing_shape[d + 1];
    }
  }
  int64_t backing_elements() const { return ref::numel(backing_shape); }
  int64_t start() const {
    int64_t s = 0;
    for (size_t d = 0; d < shape.size(); ++d) s += offset[d] * strides[d];
    return s;
  }
  // Offsets (into the backing) of the view's elements, in row-major order of the view.
  std::vector<int64_t> element_offsets() const {
    std::vector<int64_t> out;
    const int64_t n = ref::numel(shape);
    out.reserve(n);
    Ints idx(shape.size(), 0);
    for (int64_t e = 0; e < n; ++e) {
      int64_t off = start();
      for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * strides[d];
      out.push_back(off);
      for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
    return out;
  }
  template <typename T>
  TensorView view(std::vector<T>& data, DType dtype) {
    TensorView v;
    v.data = data.data() + start();
    v.dtype = dtype;
    v.shape = shape;
    v.strides = strides;
    return v;
  }
};

template <typename T>
std::vector<T> gather(const std::vector<T>& backing, const std::vector<int64_t>& offsets) {
  std::vector<T> out;
  out.reserve(offsets.size());
  for (int64_t o : offsets) out.push_back(backing[o]);
  return out;
}

// Every element of `backing` not in `offsets` still equals `guard`.
template <typename T>
bool outside_untouched(const std::vector<T>& backing, const std::vector<int64_t>& offsets,
                       T guard) {
  std::vector<char> in_view(backing.size(), 0);
  for (int64_t o : offsets) in_view[o] = 1;
  for (size_t k = 0; k < backing.size(); ++k) {
    if (!in_view[k] && !test::bits_equal(backing[k], guard)) return false;
  }
  return true;
}

class StridedPool : public ::testing::TestWithParam<int> {};

TEST_P(StridedPool, ViewsMatchReference) {
  const int nd = GetParam();
  Rng rng(0xabc0 + nd);
  int failures = 0;
  for (int iter = 0; iter < 500 && failures < kMaxReportedFailures; ++iter) {
    const int fast = nd == 1 ? 0 : static_cast<int>(rng.uniform(0, 2));
    Ints shape;
    PoolOptions o;
    random_pool_config(rng, nd, fast, &shape, &o);
    Ints out_shape;
    ASSERT_TRUE(ref::max_pool_output_shape(nd, shape, o, &out_shape).ok());

    StridedBuffer in(rng, shape), vals(rng, out_shape), idxs(rng, out_shape);
    in.f = random_values(rng, in.backing_elements());
    const std::vector<int64_t> in_offsets = in.element_offsets();
    const std::vector<float> input = gather(in.f, in_offsets);
    std::vector<float> expected_values;
    std::vector<int64_t> expected_indices;
    Ints tmp;
    ASSERT_TRUE(
        ref::max_pool<float>(nd, shape, input, o, &tmp, &expected_values, &expected_indices).ok());

    for (Path path : {Path::automatic, Path::general}) {
      o.path = path;
      const std::vector<float> in_before = in.f;
      vals.f.assign(vals.backing_elements(), test::kGuardF);
      idxs.i.assign(idxs.backing_elements(), test::kGuardI);
      Status st = max_pool(nd, in.view(in.f, DType::f32), vals.view(vals.f, DType::f32),
                           idxs.view(idxs.i, DType::i64), o);
      const std::vector<int64_t> vo = vals.element_offsets(), io = idxs.element_offsets();
      const bool ok = st.ok() && same_floats(expected_values, gather(vals.f, vo)) &&
                      same_ints(expected_indices, gather(idxs.i, io)) &&
                      outside_untouched(vals.f, vo, test::kGuardF) &&
                      outside_untouched(idxs.i, io, test::kGuardI) &&
                      std::equal(in.f.begin(), in.f.end(), in_before.begin(),
                                 [](float a, float b) { return test::bits_equal(a, b); });
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "config " << iter << ": " << describe(shape, o) << " path "
                      << test::path_name(path) << "\n  input strides " << str(in.strides)
                      << " values strides " << str(vals.strides) << " indices strides "
                      << str(idxs.strides) << "\n  status: " << st.message() << "\n  values: "
                      << same_floats(expected_values, gather(vals.f, vo)).message()
                      << "\n  indices: " << same_ints(expected_indices, gather(idxs.i, io)).message()
                      << "\n  outside values untouched: "
                      << outside_untouched(vals.f, vo, test::kGuardF)
                      << " outside indices untouched: "
                      << outside_untouched(idxs.i, io, test::kGuardI);
        break;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rank, StridedPool, ::testing::Values(1, 2, 3));

class StridedUnpool : public ::testing::TestWithParam<int> {};

TEST_P(StridedUnpool, ViewsMatchReference) {
  const int nd = GetParam();
  Rng rng(0xdef0 + nd);
  int failures = 0;
  for (int iter = 0; iter < 500 && failures < kMaxReportedFailures; ++iter) {
    const int mode = static_cast<int>(rng.uniform(0, 3));
    Ints shape;
    std::vector<float> values;
    std::vector<int64_t> indices;
    UnpoolOptions o;
    random_unpool_case(rng, nd, mode, &shape, &values, &indices, &o);
    Ints out_shape;
    std::vector<float> expected;
    Status ref_status = ref::max_unpool<float>(nd, shape, values, indices, o, &out_shape, &expected);
    if (!ref_status.ok()) {
      ASSERT_TRUE(ref::max_unpool_output_shape(nd, shape, o, &out_shape).ok());
    }

    StridedBuffer v(rng, shape), ix(rng, shape), out(rng, out_shape);
    v.f.assign(v.backing_elements(), kNan);
    ix.i.assign(ix.backing_elements(), -1);  // invalid outside the view: must not be read
    const std::vector<int64_t> vo = v.element_offsets(), io = ix.element_offsets();
    for (size_t k = 0; k < vo.size(); ++k) v.f[vo[k]] = values[k];
    for (size_t k = 0; k < io.size(); ++k) ix.i[io[k]] = indices[k];
    const std::vector<int64_t> oo = out.element_offsets();

    for (Path path : {Path::automatic, Path::general}) {
      o.path = path;
      out.f.assign(out.backing_elements(), test::kGuardF);
      Status st = max_unpool(nd, v.view(v.f, DType::f32), ix.view(ix.i, DType::i64),
                             out.view(out.f, DType::f32), o);
      bool ok = st.code() == ref_status.code() && outside_untouched(out.f, oo, test::kGuardF);
      if (ref_status.ok()) ok = ok && same_floats(expected, gather(out.f, oo));
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "config " << iter << " (mode " << mode << "): " << describe(shape, o)
                      << " path " << test::path_name(path) << "\n  values strides "
                      << str(v.strides) << " indices strides " << str(ix.strides)
                      << " output strides " << str(out.strides) << "\n  status: " << st.message()
                      << " expected: " << ref_status.message() << "\n  outside untouched: "
                      << outside_untouched(out.f, oo, test::kGuardF) << "\n  output: "
                      << (ref_status.ok() ? same_floats(expected, gather(out.f, oo)).message()
                                          : "");
        break;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rank, StridedUnpool, ::testing::Values(1, 2, 3));

// Duplicate indices resolve the same way (latest in input order) on any thread count, on
// shapes big enough to be split across threads.
TEST(DifferentialThreads, UnpoolDuplicatesDeterministic) {
  Rng rng(0x7777);
  for (int nd = 1; nd <= 3; ++nd) {
    const Ints spatial = nd == 1 ? Ints{300} : nd == 2 ? Ints{24, 20} : Ints{8, 9, 10};
    Ints shape{2, 8};
    shape.insert(shape.end(), spatial.begin(), spatial.end());
    UnpoolOptions o;
    o.kernel_size = {2};
    Ints out_shape;
    ASSERT_TRUE(ref::max_unpool_output_shape(nd, shape, o, &out_shape).ok());
    int64_t plane = 1;
    for (int i = 0; i < nd; ++i) plane *= out_shape[2 + i];
    const int64_t n = ref::numel(shape);
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(i);  // all distinct
    std::vector<int64_t> indices(n);
    for (int64_t& i : indices) i = rng.uniform(0, std::min<int64_t>(plane, 40) - 1);
    std::vector<float> expected;
    ASSERT_TRUE(ref::max_unpool<float>(nd, shape, values, indices, o, &out_shape, &expected).ok());
    for (int threads : {1, 2, 3, 8}) {
      set_num_threads(threads);
      for (Path path : {Path::automatic, Path::general}) {
        test::UnpoolRun r = test::run_unpool(nd, shape, values, indices, out_shape, o, path);
        ASSERT_TRUE(r.status.ok()) << r.status.message();
        EXPECT_TRUE(r.guards_ok);
        EXPECT_TRUE(same_floats(expected, r.output))
            << "nd " << nd << " threads " << threads << " path " << test::path_name(path);
      }
    }
    set_num_threads(0);
  }
}

}  // namespace
}  // namespace poolgen
