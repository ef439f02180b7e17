// Randomized differential tests: the library (both paths) against the reference on thousands of
// small random configurations, fixed seeds. Covers the specialised fast paths (pool k2s2p0 and
// k3s2p1; unpool gather with indices from a real pooling), the general scatter with duplicate
// and invalid indices, output_size variations, strided views and guard bytes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "built_kernels.hpp"
#include "lib_util.hpp"
#include "random_cases.hpp"
#include "reference.hpp"
#include "test_util.hpp"

namespace poolgen {
namespace {

using test::describe;
using test::outside_untouched;
using test::PoolConfigOptions;
using test::random_pool_config;
using test::random_unpool_mode;
using test::random_window;
using test::Rng;
using test::same_floats;
using test::same_ints;
using test::str;

constexpr int kConfigsPerRank = 2000;
constexpr int kMaxReportedFailures = 5;
// The automatic path runs twice: the second call repeats the first's shapes in buffers of its
// own, so it takes the checks the runtime remembers of the first (runtime/ops/call_memo.hpp);
// then once more prepared (PreparedCall), which keeps them without the memo's key.
struct RunMode {
  Path path;
  test::Calling calling = test::Calling::call;
};
constexpr RunMode kRuns[] = {{Path::automatic}, {Path::automatic}, {Path::general},
                         {Path::automatic, test::Calling::prepared}};
std::string run_name(const RunMode& run) {
  return std::string(test::path_name(run.path)) + test::calling_name(run.calling);
}

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

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
      x = static_cast<float>(rng.normal());
    }
    if (rng.chance(nan_p)) x = kNan;
    if (rng.chance(ninf_p)) x = -kInf;
  }
  return v;
}

// Dilated windows; few channels (typed_test.cpp covers many channels).
const PoolConfigOptions kConfigKinds{};

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
    const int fast = random_window(rng, nd == 1 ? 0.0 : 0.35);
    Ints shape;
    PoolOptions o;
    random_pool_config(rng, nd, fast, kConfigKinds, &shape, &o);
    const std::vector<float> input = random_values(rng, ref::numel(shape));
    Ints out_shape;
    std::vector<float> values;
    std::vector<int64_t> indices;
    Status st = ref::max_pool<float>(nd, shape, input, o, &out_shape, &values, &indices);
    ASSERT_TRUE(st.ok()) << st.message();
    if (is_fast_kernel(nd, shape, o)) ++fast_hits;
    Ints lib_shape;
    st = max_pool_output_shape(nd, shape, o, &lib_shape);
    // Every other configuration as if out of cache: the kernels' prefetches run then
    // (prefetch_pays).
    set_streaming_bytes(iter % 2 == 0 ? 0 : -1);
    for (const RunMode& run : kRuns) {
      test::PoolRun r = test::run_pool(nd, shape, input, out_shape, o, run.path, run.calling);
      const bool ok = st.ok() && lib_shape == out_shape && r.status.ok() && r.guards_ok &&
                      same_floats(values, r.values) && same_ints(indices, r.indices);
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "config " << iter << ": " << describe(shape, o) << " path "
                      << run_name(run) << "\n  shape status: " << st.message()
                      << " lib shape " << str(lib_shape) << " expected " << str(out_shape)
                      << "\n  status: " << r.status.message() << "\n  guards intact: "
                      << r.guards_ok << "\n  values: " << same_floats(values, r.values).message()
                      << "\n  indices: " << same_ints(indices, r.indices).message();
        break;
      }
    }
  }
  set_streaming_bytes(-1);
  if (nd >= 2) {
    EXPECT_GT(fast_hits, test::min_fast_hits(nd, kConfigsPerRank))
        << "too few fast-path configurations";
  }
}

INSTANTIATE_TEST_SUITE_P(Rank, DifferentialPool, ::testing::Values(1, 2, 3));

// A random configuration in other frameworks' terms: asymmetric padding up to kernel - 1 (ONNX),
// auto_pad, ONNX Runtime's and TensorFlow's NaN rule, any index format.
void random_conventions(Rng& rng, int nd, Ints* shape, PoolOptions* o) {
  for (;;) {
    *o = PoolOptions();
    random_pool_config(rng, nd, random_window(rng, 0.3), kConfigKinds, shape, o);
    const int form = static_cast<int>(rng.uniform(0, 3));
    if (form == 1) {  // explicit, each side below the kernel
      Ints k = o->kernel_size, begin(nd), end(nd);
      if (k.size() == 1) k.assign(nd, k[0]);
      for (int i = 0; i < nd; ++i) {
        begin[i] = rng.uniform(0, k[i] - 1);
        end[i] = rng.uniform(0, k[i] - 1);
      }
      o->padding = begin;
      o->padding_end = end;
    } else if (form == 2) {
      static constexpr AutoPad kModes[] = {AutoPad::same_upper, AutoPad::same_lower,
                                           AutoPad::valid};
      o->auto_pad = kModes[rng.uniform(0, 2)];
      o->padding = {0};
      if (o->auto_pad != AutoPad::valid) o->ceil_mode = false;
    }
    o->max_rule = rng.chance(0.7) ? MaxRule::first_tap : MaxRule::any_nan;
    o->index_format = static_cast<IndexFormat>(rng.uniform(0, 5));
    // Whose window arithmetic; small inputs often, where windows stop fitting (empty outputs,
    // ONNX Runtime's extent of 1 where floor gives 0).
    o->pool_rule = static_cast<PoolRule>(rng.uniform(0, 2));
    if (o->pool_rule == PoolRule::tensorflow) o->ceil_mode = false;
    if (o->pool_rule != PoolRule::pytorch && rng.chance(0.3)) {
      for (int i = 0; i < nd; ++i) (*shape)[shape->size() - nd + i] = rng.uniform(1, 3);
      // Dilated windows over them: taps that step over the whole input.
      if (rng.chance(0.5)) o->dilation = {rng.uniform(2, 4)};
    }
    Ints out;
    if (ref::max_pool_output_shape(nd, *shape, *o, &out).ok()) return;
  }
}

std::string describe_conventions(const Ints& shape, const PoolOptions& o) {
  return describe(shape, o) + " padding_end " + str(o.padding_end) + " auto_pad " +
         std::to_string(static_cast<int>(o.auto_pad)) + " max_rule " +
         std::to_string(static_cast<int>(o.max_rule)) + " index_format " +
         index_format_name(o.index_format) + " pool_rule " +
         std::to_string(static_cast<int>(o.pool_rule));
}

class DifferentialConventions : public ::testing::TestWithParam<int> {};

TEST_P(DifferentialConventions, LibraryMatchesReference) {
  const int nd = GetParam();
  Rng rng(0x7a11 + nd);
  int failures = 0, first_tap_differs = 0, refused = 0, empty_outputs = 0, empty_windows = 0;
  for (int iter = 0; iter < kConfigsPerRank / 2 && failures < kMaxReportedFailures; ++iter) {
    Ints shape;
    PoolOptions o;
    random_conventions(rng, nd, &shape, &o);
    const std::vector<float> input = random_values(rng, ref::numel(shape));
    Ints out_shape;
    std::vector<float> values;
    std::vector<int64_t> indices;
    const Status expected = ref::max_pool<float>(nd, shape, input, o, &out_shape, &values, &indices);
    if (!expected.ok()) {
      // Only a window without a tap inside is refused (PyTorch's rule in another index format,
      // TensorFlow's), before anything is written.
      ASSERT_EQ(expected.code(), Code::invalid_argument) << expected.message();
      ASSERT_TRUE(ref::max_pool_output_shape(nd, shape, o, &out_shape).ok());
      ++refused;
    }
    if (expected.ok()) {
      empty_outputs += values.empty() && ref::numel(shape) != 0;
      const uint32_t lowest_bits = 0xff7fffffu;  // ONNX Runtime's answer to an empty window
      empty_windows += std::any_of(values.begin(), values.end(), [&](float v) {
        uint32_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        return bits == lowest_bits;
      });
    }
    if (o.max_rule == MaxRule::first_tap && expected.ok()) {
      // Cases where the rule decides: PyTorch's scan gives other indices.
      PoolOptions pytorch = o;
      pytorch.max_rule = MaxRule::any_nan;
      Ints unused_shape;
      std::vector<float> unused_values;
      std::vector<int64_t> pytorch_indices;
      ref::max_pool<float>(nd, shape, input, pytorch, &unused_shape, &unused_values,
                           &pytorch_indices);
      first_tap_differs += pytorch_indices != indices;
    }
    Ints lib_shape;
    const Status shape_status = max_pool_output_shape(nd, shape, o, &lib_shape);
    for (const RunMode& run : kRuns) {
      test::PoolRun r = test::run_pool(nd, shape, input, out_shape, o, run.path, run.calling);
      const bool ok =
          shape_status.ok() && lib_shape == out_shape && r.guards_ok &&
          (expected.ok() ? r.status.ok() && same_floats(values, r.values) &&
                               same_ints(indices, r.indices)
                         : r.status.code() == Code::invalid_argument);
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "config " << iter << ": " << describe_conventions(shape, o) << " path "
                      << run_name(run) << "\n  shape status: " << shape_status.message()
                      << " lib shape " << str(lib_shape) << " expected " << str(out_shape)
                      << "\n  expected status: " << expected.message()
                      << "\n  status: " << r.status.message() << "\n  guards intact: "
                      << r.guards_ok << "\n  values: " << same_floats(values, r.values).message()
                      << "\n  indices: " << same_ints(indices, r.indices).message();
        break;
      }
    }
  }
  EXPECT_GT(first_tap_differs, kConfigsPerRank / 40) << "too few cases where first_tap decides";
  EXPECT_LT(refused, kConfigsPerRank / 20) << "too many empty windows";
  EXPECT_GT(empty_outputs, kConfigsPerRank / 100) << "too few windows that do not fit";
  EXPECT_GT(empty_windows, 0) << "no window without a tap under ONNX Runtime's rule";
}

INSTANTIATE_TEST_SUITE_P(Rank, DifferentialConventions, ::testing::Values(1, 2, 3));

// Unpooling cases: pooling windows of dilation 1, a specialised window in 60% (2-D and 3-D).
test::UnpoolCase<float> random_unpool_case(Rng& rng, int nd, int mode) {
  test::UnpoolCaseOptions opts;
  opts.window_p = nd == 1 ? 0.0 : 0.6;
  return test::random_unpool_case<float, int64_t>(rng, nd, mode, opts, random_values);
}

// The same unpooling by the indices alone (no window: output_size gives the extents), the form
// aten::max_unpool2d calls: it must give the same output and the same index errors.
UnpoolOptions by_indices(int nd, const Ints& out_shape) {
  UnpoolOptions o;
  o.kernel_size = {};
  o.output_size.assign(out_shape.end() - nd, out_shape.end());
  return o;
}

class DifferentialUnpool : public ::testing::TestWithParam<int> {};

TEST_P(DifferentialUnpool, LibraryMatchesReference) {
  const int nd = GetParam();
  Rng rng(0x5eed + 17 * nd);
  int failures = 0, fast_hits = 0, errors = 0;
  for (int iter = 0; iter < kConfigsPerRank && failures < kMaxReportedFailures; ++iter) {
    const int mode = random_unpool_mode(rng, {45, 75, 92});
    auto [shape, values, indices, o] = random_unpool_case(rng, nd, mode);
    Ints out_shape;
    std::vector<float> expected;
    Status ref_status =
        ref::max_unpool<float>(nd, shape, values, indices, o, &out_shape, &expected);
    if (!ref_status.ok()) {
      ASSERT_EQ(ref_status.code(), Code::index_out_of_range) << ref_status.message();
      ASSERT_TRUE(ref::max_unpool_output_shape(nd, shape, o, &out_shape).ok());
      ++errors;
    }
    // Every other configuration as if out of cache (as DifferentialPoolBackward's).
    set_streaming_bytes(iter % 2 == 0 ? 0 : -1);
    if (mode == 0 && is_fast_kernel(nd, shape, o)) ++fast_hits;
    for (const UnpoolOptions& form : {o, by_indices(nd, out_shape)})
    for (const RunMode& how : kRuns) {
      Ints lib_shape;
      const Status st = max_unpool_output_shape(nd, shape, form, &lib_shape);
      test::UnpoolRun run =
          test::run_unpool(nd, shape, values, indices, out_shape, form, how.path, how.calling);
      bool ok = st.ok() && lib_shape == out_shape && run.guards_ok &&
                run.status.code() == ref_status.code();
      // An empty output (N = 0) has nothing to check indices against.
      if (ref_status.ok()) ok = ok && same_floats(expected, run.output);
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "config " << iter << " (mode " << mode << "): " << describe(shape, o)
                      << (form.kernel_size.empty() ? " by indices alone" : "") << " path "
                      << run_name(how) << "\n  indices " << str(indices)
                      << "\n  shape status: " << st.message() << " lib shape " << str(lib_shape)
                      << " expected " << str(out_shape) << "\n  status: " << run.status.message()
                      << " expected: " << ref_status.message()
                      << "\n  guards intact: " << run.guards_ok << "\n  output: "
                      << (ref_status.ok() ? same_floats(expected, run.output).message() : "");
        break;
      }
    }
  }
  set_streaming_bytes(-1);
  // The contiguous gathers this build has for f32 and i64 indices (2-D k2s2p0 by default, every
  // fast window with POOLGEN_UNPOOL_GATHER_LAYOUTS) must be reached (this test's views are
  // contiguous), out of cache: a few configurations for each window.
  const auto kernels = compiled_kernels();
  const auto windows = std::count_if(kernels.begin(), kernels.end(), [&](const KernelInfo& k) {
    return k.op == "unpool_gather" && k.layout == Layout::contiguous && k.nd == nd &&
           k.value_dtype == DType::i32 && k.index_dtype == DType::i64;
  });
  EXPECT_GE(fast_hits, 4 * windows) << "too few gather-path configurations";
  EXPECT_GT(errors, 0) << "no invalid-index configuration was generated";
}

INSTANTIATE_TEST_SUITE_P(Rank, DifferentialUnpool, ::testing::Values(1, 2, 3));

// Unpooling in other frameworks' conventions: a random window and values (random_unpool_case),
// then end padding, an output_size rule with an output_size it allows, an index format, and
// indices drawn in the frame the rule gives: most in their own plane, some anywhere the format
// reaches (crossing planes or channels), now and then one out of range.
UnpoolOptions random_unpool_conventions(Rng& rng, int nd, const Ints& shape, UnpoolOptions o) {
  for (;;) {
    UnpoolOptions c = o;
    c.output_size.clear();
    Ints k = c.kernel_size;
    if (k.size() == 1) k.assign(nd, k[0]);
    if (rng.chance(0.4)) {
      c.padding_end.assign(nd, 0);
      for (int i = 0; i < nd; ++i) c.padding_end[i] = rng.uniform(0, k[i] - 1);
    }
    c.output_size_rule = static_cast<OutputSizeRule>(rng.uniform(0, 3));
    c.index_format = static_cast<IndexFormat>(rng.uniform(0, 4));  // all but window
    Ints def;
    if (!ref::max_unpool_output_shape(nd, shape, c, &def).ok()) continue;
    if (rng.chance(0.6)) {  // extents the rule allows (pytorch: the default itself)
      Ints size(def.end() - nd, def.end());
      for (int64_t& e : size) {
        if (c.output_size_rule == OutputSizeRule::any) e = rng.uniform(1, e + 2);
        if (c.output_size_rule == OutputSizeRule::onnx ||
            c.output_size_rule == OutputSizeRule::onnx_runtime) {
          e += rng.uniform(0, 2);
        }
      }
      c.output_size = size;
    }
    Ints out;
    if (ref::max_unpool_output_shape(nd, shape, c, &out).ok()) return c;
  }
}

std::vector<int64_t> random_formatted_indices(Rng& rng, int nd, const Ints& shape,
                                              const UnpoolOptions& o, bool invalid,
                                              int* anywhere) {
  UnpoolOptions frame_options = o;
  if (o.output_size_rule == OutputSizeRule::onnx) frame_options.output_size.clear();
  Ints frame;
  ref::max_unpool_output_shape(nd, shape, frame_options, &frame);
  const int64_t plane = ref::numel(Ints(frame.end() - nd, frame.end()));
  const int64_t in_plane = ref::numel(Ints(shape.end() - nd, shape.end()));
  const int64_t channels = shape[shape.size() - nd - 1];
  const int64_t total = ref::numel(shape), planes = total / in_plane;
  const IndexFormat f = o.index_format;
  const int64_t bound = f == IndexFormat::plane        ? plane
                        : f == IndexFormat::tensorflow ? plane * channels
                                                       : planes * plane;
  std::vector<int64_t> indices(static_cast<size_t>(total));
  for (int64_t j = 0; j < total; ++j) {
    const int64_t pl = j / in_plane, n = pl / channels, c = pl % channels;
    int64_t p = rng.uniform(0, plane - 1);  // own plane; the column-major reading differs, fine
    int64_t index = f == IndexFormat::plane                   ? p
                    : f == IndexFormat::tensorflow            ? p * channels + c
                    : f == IndexFormat::tensorflow_with_batch ? (n * plane + p) * channels + c
                                                              : pl * plane + p;
    if (f != IndexFormat::plane && rng.chance(0.08)) {
      index = rng.uniform(0, bound - 1);
      ++*anywhere;
    }
    if (rng.chance(0.1)) index = index / 2;  // duplicates
    indices[static_cast<size_t>(j)] = index;
  }
  if (invalid && total > 0) {
    indices[static_cast<size_t>(rng.uniform(0, total - 1))] = rng.chance(0.5) ? -1 : bound;
  }
  return indices;
}

class DifferentialUnpoolConventions : public ::testing::TestWithParam<int> {};

TEST_P(DifferentialUnpoolConventions, LibraryMatchesReference) {
  const int nd = GetParam();
  Rng rng(0xc0de + nd);
  int failures = 0, errors = 0, crossing = 0;
  for (int iter = 0; iter < kConfigsPerRank / 2 && failures < kMaxReportedFailures; ++iter) {
    auto [shape, values, unused, window] = random_unpool_case(rng, nd, 0);
    const UnpoolOptions o = random_unpool_conventions(rng, nd, shape, window);
    const std::vector<int64_t> indices =
        random_formatted_indices(rng, nd, shape, o, rng.chance(0.1), &crossing);
    Ints out_shape;
    std::vector<float> expected;
    const Status ref_status =
        ref::max_unpool<float>(nd, shape, values, indices, o, &out_shape, &expected);
    if (!ref_status.ok()) {
      ASSERT_EQ(ref_status.code(), Code::index_out_of_range) << ref_status.message();
      ASSERT_TRUE(ref::max_unpool_output_shape(nd, shape, o, &out_shape).ok());
      ++errors;
    }
    for (const RunMode& how : kRuns) {
      Ints lib_shape;
      const Status st = max_unpool_output_shape(nd, shape, o, &lib_shape);
      test::UnpoolRun run =
          test::run_unpool(nd, shape, values, indices, out_shape, o, how.path, how.calling);
      bool ok = st.ok() && lib_shape == out_shape && run.guards_ok &&
                run.status.code() == ref_status.code();
      if (ref_status.ok()) ok = ok && same_floats(expected, run.output);
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "config " << iter << ": " << describe(shape, o) << " padding_end "
                      << str(o.padding_end) << " rule "
                      << static_cast<int>(o.output_size_rule) << " format "
                      << index_format_name(o.index_format) << " path " << run_name(how)
                      << "\n  indices " << str(indices) << "\n  shape status: " << st.message()
                      << " lib shape " << str(lib_shape) << " expected " << str(out_shape)
                      << "\n  status: " << run.status.message()
                      << " expected: " << ref_status.message()
                      << "\n  guards intact: " << run.guards_ok << "\n  output: "
                      << (ref_status.ok() ? same_floats(expected, run.output).message() : "");
        break;
      }
    }
  }
  EXPECT_GT(errors, 0) << "no invalid-index configuration was generated";
  EXPECT_GT(crossing, kConfigsPerRank / 10) << "too few indices anywhere in the frame";
}

INSTANTIATE_TEST_SUITE_P(Rank, DifferentialUnpoolConventions, ::testing::Values(1, 2, 3));

// The backward ops. Pooling's: indices from a real pooling (fast windows in half the cases), now
// and then some moved outside their windows or outside the plane; gradients whose sums depend on
// the order of the additions. Both paths must equal the reference bit for bit.
bool is_fast_backward_kernel(int nd, const Ints& input_shape, PoolOptions o) {
  std::string automatic, general;
  Ints out_shape;
  if (!max_pool_output_shape(nd, input_shape, o, &out_shape).ok()) return false;
  const TensorView g = contiguous(static_cast<float*>(nullptr), out_shape);
  o.path = Path::automatic;
  if (!max_pool_backward_kernel_name(nd, g, DType::i64, input_shape, o, &automatic).ok()) {
    return false;
  }
  o.path = Path::general;
  return max_pool_backward_kernel_name(nd, g, DType::i64, input_shape, o, &general).ok() &&
         automatic != general;
}

class DifferentialPoolBackward : public ::testing::TestWithParam<int> {};

TEST_P(DifferentialPoolBackward, LibraryMatchesReference) {
  const int nd = GetParam();
  Rng rng(0xbac0 + nd);
  int failures = 0, fast_hits = 0;
  // The contiguous window gathers take only planes their windows tile, in rows of whole
  // vectors (2-D, 3-D): more long rows, of which random_pool_config makes such planes.
  PoolConfigOptions kinds = kConfigKinds;
  kinds.long_rows_percent = 30;
  for (int iter = 0; iter < kConfigsPerRank && failures < kMaxReportedFailures; ++iter) {
    const int mode = static_cast<int>(rng.uniform(0, 9)) / 4;  // mostly real indices
    auto c = test::random_pool_backward_case<float>(
        rng, nd, mode, 0.5, kinds, random_values,
        [](double x) { return static_cast<float>(x); });
    std::vector<float> expected;
    const Status st = ref::max_pool_backward<float>(nd, c.input_shape, c.grad_output, c.indices,
                                                    c.o, &expected);
    ASSERT_TRUE(st.ok()) << st.message();
    // Every other configuration runs as if out of cache (streaming_bytes 0: streamed scatters,
    // and the contiguous gathers, which take only such calls).
    set_streaming_bytes(iter % 2 == 0 ? 0 : -1);
    if (mode == 0 && is_fast_backward_kernel(nd, c.input_shape, c.o)) ++fast_hits;
    // Path::winner: CUDA's window gather on its CPU twin (-DPOOLGEN_GPU_TWINS), else the scatter.
    for (const RunMode& run :
         {RunMode{Path::automatic}, RunMode{Path::automatic}, RunMode{Path::general},
          RunMode{Path::winner}, RunMode{Path::automatic, test::Calling::prepared}}) {
      const test::BackwardRun r = test::run_pool_backward(
          nd, c.input_shape, c.output_shape, c.grad_output, c.indices, c.o, run.path, run.calling);
      if (!r.status.ok() || !r.guards_ok || !same_floats(expected, r.gradient)) {
        ++failures;
        ADD_FAILURE() << "config " << iter << " (mode " << mode << "): "
                      << describe(c.input_shape, c.o) << " path " << run_name(run)
                      << "\n  indices " << str(c.indices) << "\n  status: " << r.status.message()
                      << "\n  guards intact: " << r.guards_ok
                      << "\n  grad_input: " << same_floats(expected, r.gradient).message();
        break;
      }
    }
  }
  if (test::backward_window_twin_built(nd)) {
    PoolOptions o;
    o.kernel_size = {3};
    o.path = Path::winner;
    std::string name;
    float g = 0;
    Ints pooled(nd + 2, 1);  // of an input of 3 x 3 planes of extent 3
    pooled[0] = pooled[1] = 3;
    const Status st = max_pool_backward_kernel_name(nd, contiguous(&g, pooled), DType::i64,
                                                    Ints(nd + 2, 3), o, &name);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(name, "max_pool" + std::to_string(nd) + "d_backward_gather_f32_i64");
  }
  set_streaming_bytes(-1);
  // The contiguous window gathers but f32's 2-D k2s2p0 one are opt-in
  // (POOLGEN_BACKWARD_WINDOW_TYPES); when built, these contiguous draws must reach them (1-D has
  // none), out of cache. They take only rows of whole vectors of windows (of the long rows, 15%
  // of the draws), which 9 of 2-D's 2000 draws give at k2s2p0 (AVX-512); 3-D's rows are shorter
  // (the opt-in families: at least one each).
  const int windows = test::backward_windows_built(DType::f32, DType::i64, nd, Layout::contiguous);
  if (nd >= 2 && windows > 0) {
    EXPECT_GE(fast_hits, (nd == 3 ? 1 : 8) * windows) << "too few window-gather configurations";
  }
}

INSTANTIATE_TEST_SUITE_P(Rank, DifferentialPoolBackward, ::testing::Values(1, 2, 3));

// Unpooling's: the unpooling cases above (duplicates, invalid indices); the gradients gathered
// must equal the reference's, and an invalid index must be reported as the reference names it.
class DifferentialUnpoolBackward : public ::testing::TestWithParam<int> {};

TEST_P(DifferentialUnpoolBackward, LibraryMatchesReference) {
  const int nd = GetParam();
  Rng rng(0xbac5 + 17 * nd);
  int failures = 0, errors = 0, twin_runs = 0;
  for (int iter = 0; iter < kConfigsPerRank && failures < kMaxReportedFailures; ++iter) {
    const int mode = random_unpool_mode(rng, {45, 75, 92});
    auto [shape, values, indices, o] = random_unpool_case(rng, nd, mode);
    Ints out_shape;
    ASSERT_TRUE(ref::max_unpool_output_shape(nd, shape, o, &out_shape).ok());
    // Every other configuration as if out of cache, where contiguous windows' kernels may run
    // (rows of a vector of cells; tests/test_variants.cpp reaches each).
    set_streaming_bytes(iter % 2 == 0 ? 0 : -1);
    const std::vector<float> grad_output = test::random_gradients<float>(
        rng, ref::numel(out_shape), [](double x) { return static_cast<float>(x); });
    std::vector<float> expected;
    const Status ref_status = ref::max_unpool_backward<float>(nd, shape, grad_output, indices, o,
                                                              &expected);
    if (!ref_status.ok()) ++errors;
    // Path::winner: the CUDA kernels' algorithm (reporting invalid indices) on its CPU twin.
    for (const UnpoolOptions& form : {o, by_indices(nd, out_shape)})
    for (const RunMode& run : {RunMode{Path::automatic}, RunMode{Path::automatic},
                               RunMode{Path::winner},
                               RunMode{Path::automatic, test::Calling::prepared}}) {
      const Path path = run.path;
      const test::BackwardRun r = test::run_unpool_backward(nd, shape, out_shape, grad_output,
                                                            indices, form, path, run.calling);
      if (path == Path::winner && r.status.code() == Code::unsupported) continue;  // no twin
      twin_runs += path == Path::winner;
      bool ok = r.guards_ok && r.status.code() == ref_status.code();
      if (ref_status.ok()) ok = ok && same_floats(expected, r.gradient);
      if (!ref_status.ok() && r.status.code() == Code::index_out_of_range) {
        // The same element named: "element <k> " in the reference, "at element <k> " here.
        const std::string at = ref_status.message().substr(0, ref_status.message().find(" ("));
        ok = ok && r.status.message().find(at.substr(at.find("element"))) != std::string::npos;
      }
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "config " << iter << " (mode " << mode << "): " << describe(shape, o)
                      << (form.kernel_size.empty() ? " by indices alone" : "") << " path "
                      << run_name(run) << "\n  indices " << str(indices)
                      << "\n  status: " << r.status.message()
                      << " expected: " << ref_status.message() << "\n  guards intact: "
                      << r.guards_ok << "\n  grad_values: "
                      << (ref_status.ok() ? same_floats(expected, r.gradient).message() : "");
        break;
      }
    }
  }
  set_streaming_bytes(-1);
  EXPECT_GT(errors, 0) << "no invalid-index configuration was generated";
  if (test::unpool_backward_twin_built()) {
    EXPECT_GT(twin_runs, 0) << "the CPU twin never ran";
  }
}

INSTANTIATE_TEST_SUITE_P(Rank, DifferentialUnpoolBackward, ::testing::Values(1, 2, 3));

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
    return test::element_offsets(shape, strides, start());
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

class StridedPool : public ::testing::TestWithParam<int> {};

TEST_P(StridedPool, ViewsMatchReference) {
  const int nd = GetParam();
  Rng rng(0xabc0 + nd);
  int failures = 0;
  for (int iter = 0; iter < 500 && failures < kMaxReportedFailures; ++iter) {
    const int fast = nd == 1 ? 0 : static_cast<int>(rng.uniform(0, 2));
    Ints shape;
    PoolOptions o;
    random_pool_config(rng, nd, fast, kConfigKinds, &shape, &o);
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
    auto [shape, values, indices, o] = random_unpool_case(rng, nd, mode);
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
    const test::DuplicatesCase c = test::duplicates_case(rng, nd, 8);
    ASSERT_TRUE(c.status.ok()) << c.status.message();
    const Ints& shape = c.shape;
    const UnpoolOptions& o = c.o;
    Ints out_shape = c.out_shape;
    const int64_t n = ref::numel(shape);
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(i);  // all distinct
    const std::vector<int64_t>& indices = c.indices;
    std::vector<float> expected;
    ASSERT_TRUE(ref::max_unpool<float>(nd, shape, values, indices, o, &out_shape, &expected).ok());
    set_min_parallel_bytes(0);  // share these small calls across threads
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
    set_min_parallel_bytes(-1);
  }
}

}  // namespace
}  // namespace poolgen
