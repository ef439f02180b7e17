// Concurrency stress test: many threads at once (more than the cores) each run a loop of
// different calls — max_pool, max_unpool and both backward ops in 1-D, 2-D and 3-D; contiguous, channels-last and
// strided/sliced views; batch-less and N = 0 shapes; the fast windows and general ones (dilation,
// ceil_mode); every output_size form; every value and index dtype this build compiled;
// Path::automatic / general / winner; duplicate unpooling indices; and calls that must fail
// (invalid indices, bad arguments) — each result checked against the reference
// (tests/reference.hpp), bit for bit (pooled values: any NaN equals any NaN). Meanwhile two
// threads keep Halide's thread pool busy with large calls (several MB, checked each time) and
// one thread runs the read-only queries (compiled_kernels, kernel names, output shapes, the C
// API) against answers taken before the threads started.
//
// Worker threads never use gtest assertions: each collects its failures (count and the first
// few descriptions), reported after join. Seeds are fixed per thread. The iteration count per
// worker is POOLGEN_STRESS_ITERATIONS (default kDefaultIterations: 2000; the TSan job sets 250 in
// scripts/reliability.sh); POOLGEN_STRESS_THREADS sets the number of workers (default 12).
//
// scripts/reliability.sh's tsan job runs this suite. Halide's thread
// pool hands work over through its own atomics, which TSan sees only in a Halide runtime built
// with Halide's `tsan` target feature; with a plain runtime TSan reports false races between
// a caller and Halide's workers (in Halide's parking lot, or on buffers a kernel allocates).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "c_tensors.hpp"
#include "built_kernels.hpp"
#include "dtypes.hpp"
#include "poolgen/poolgen.h"
#include "poolgen/poolgen.hpp"
#include "random_cases.hpp"
#include "reference.hpp"
#include "test_util.hpp"
#include "values.hpp"

namespace poolgen {
namespace {

using test::describe;
using test::dtype_of;
using test::is_float_type;
using test::plane_size;
using test::Rng;
using test::code_name;
using test::path_name;
using test::str;

// Per worker; scripts/reliability.sh runs fewer under ThreadSanitizer (POOLGEN_STRESS_ITERATIONS).
constexpr int kDefaultIterations = 2000;
constexpr int kDefaultWorkers = 12;
constexpr int kPoolThreads = 4;        // the runtime's workers, oversubscribed on purpose
constexpr int kReportedPerThread = 3;  // failure descriptions kept per thread
constexpr int64_t kGuard = 8;          // guard elements on each side of every backing

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  const int n = std::atoi(v);
  return n > 0 ? n : fallback;
}

// ---------------------------------------------------------------------------------------------
// Element types (any DType).

using namespace test::values;  // tests/values.hpp

template <typename T>
T negative_infinity() {
  if constexpr (kIsHalf<T>) {
    return half_bits_or<T>(0xfc00, 0xff80, T{});
  } else {
    return -std::numeric_limits<T>::infinity();
  }
}

// Random values with many ties. Floats: small integers, signed zeros, normals, stretches of
// -inf, occasional NaN. Integers: ties, any value, stretches of the type's lowest.
template <typename T>
std::vector<T> random_values(Rng& rng, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  const int style = static_cast<int>(rng.uniform(0, 3));
  if constexpr (is_float_type<T>()) {
    const double nan_p = rng.chance(0.3) ? 0.04 : 0.0;
    const double ninf_p = rng.chance(0.3) ? 0.2 : 0.0;
    for (T& x : v) {
      switch (style) {
        case 0: x = test::from_float<T>(static_cast<float>(rng.uniform(0, 3))); break;
        case 1: x = test::from_float<T>(rng.chance(0.5) ? -0.0f : 0.0f); break;
        case 2: x = test::from_float<T>(static_cast<float>(rng.normal())); break;
        default:
          x = rng.chance(0.9) ? negative_infinity<T>()
                              : test::from_float<T>(static_cast<float>(rng.uniform(-2, 2)));
          break;
      }
      if (rng.chance(ninf_p)) x = negative_infinity<T>();
      if (rng.chance(nan_p)) x = winning_value<T>();
    }
  } else {
    const int64_t lo = static_cast<int64_t>(std::numeric_limits<T>::lowest());
    const int64_t hi = static_cast<int64_t>(std::numeric_limits<T>::max());
    for (T& x : v) {
      int64_t y;
      switch (style) {
        case 0: y = std::clamp<int64_t>(rng.uniform(-1, 2), lo, hi); break;
        case 1: y = rng.uniform(lo, hi); break;
        case 2: y = rng.chance(0.8) ? lo : rng.uniform(lo, std::min<int64_t>(lo + 2, hi)); break;
        default: y = rng.uniform(std::max<int64_t>(hi - 3, lo), hi); break;
      }
      x = static_cast<T>(y);
    }
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// Views inside guarded backings.

enum class Form { contiguous = 0, channels_last = 1, strided = 2 };

const char* form_name(Form f) {
  return f == Form::contiguous      ? "contiguous"
         : f == Form::channels_last ? "channels_last"
                                    : "strided";
}

Form random_form(Rng& rng) {
  return static_cast<Form>(rng.uniform(0, 2));
}

Ints row_major_strides(const Ints& shape) {
  Ints s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

// A view of `shape` in a backing with kGuard elements of `outside` before and after it (and in
// the gaps of a strided view). Strided: every dimension may be a slice of a longer one, and the
// elements may lie 2 apart (a [..., ::2] slice).
template <typename T>
struct Tensor {
  Ints shape, strides;  // strides: those of the view (empty: contiguous)
  DType dtype = DType::f32;
  Form form = Form::contiguous;
  int64_t first = 0;  // offset of the view's first element in the backing
  std::vector<T> backing;
  std::vector<int64_t> offsets;  // the view's elements in the backing, logical order

  TensorView view() {
    TensorView v;
    v.data = backing.data() + first;
    v.dtype = dtype;
    v.shape = shape;
    v.strides = strides;
    return v;
  }
  std::vector<T> logical() const {
    std::vector<T> out;
    out.reserve(offsets.size());
    for (int64_t o : offsets) out.push_back(backing[static_cast<size_t>(o)]);
    return out;
  }
  void set(const std::vector<T>& values) {
    for (size_t k = 0; k < offsets.size(); ++k) {
      backing[static_cast<size_t>(offsets[k])] = values[k];
    }
  }
  bool outside_is(T outside) const { return test::outside_untouched(backing, offsets, outside); }
  // The big calls' cheaper forms: the backing positions outside the view (computed once), the
  // view's elements reset in place, and compared in place.
  std::vector<int64_t> outside_positions() const {
    std::vector<char> in_view(backing.size(), 0);
    for (int64_t o : offsets) in_view[static_cast<size_t>(o)] = 1;
    std::vector<int64_t> out;
    for (size_t k = 0; k < backing.size(); ++k) {
      if (!in_view[k]) out.push_back(static_cast<int64_t>(k));
    }
    return out;
  }
  bool all_are(const std::vector<int64_t>& positions, T v) const {
    for (int64_t o : positions) {
      if (!same_bits(backing[static_cast<size_t>(o)], v)) return false;
    }
    return true;
  }
  void fill_view(T v) {
    for (int64_t o : offsets) backing[static_cast<size_t>(o)] = v;
  }
  template <typename E, typename Equal>
  std::string mismatches_in_place(const std::vector<E>& expected, Equal equal) const {
    if (expected.size() != offsets.size()) return "size mismatch";
    std::ostringstream os;
    int64_t bad = 0;
    for (size_t k = 0; k < offsets.size(); ++k) {
      const T got = backing[static_cast<size_t>(offsets[k])];
      if (!equal(expected[k], got)) {
        if (bad < 4) os << " [" << k << "] got " << show(got) << " expected " << show(expected[k]);
        ++bad;
      }
    }
    if (bad == 0) return "";
    return std::to_string(bad) + " of " + std::to_string(expected.size()) + " differ:" + os.str();
  }
  std::string describe() const {
    return std::string(form_name(form)) + " " + str(shape) + " strides " + str(strides);
  }
};

template <typename T>
Tensor<T> make_tensor(Rng& rng, int nd, const Ints& shape, Form form, DType dtype, T outside,
                      T inside) {
  Tensor<T> t;
  t.shape = shape;
  t.dtype = dtype;
  t.form = form;
  Ints strides;
  int64_t start = 0;
  switch (form) {
    case Form::contiguous:
      strides = row_major_strides(shape);
      if (rng.chance(0.5)) t.strides = strides;  // else empty: contiguous
      break;
    case Form::channels_last:
      strides = channels_last(nullptr, dtype, shape, nd).strides;
      if (strides.empty()) strides = row_major_strides(shape);
      t.strides = strides;
      break;
    case Form::strided: {
      const int64_t step = rng.chance(0.4) ? 2 : 1;
      Ints backing_shape(shape.size());
      Ints offset(shape.size());
      for (size_t d = 0; d < shape.size(); ++d) {
        const int64_t extra = rng.uniform(0, 2);
        backing_shape[d] = std::max<int64_t>(shape[d] + extra, 1);
        offset[d] = rng.uniform(0, backing_shape[d] - std::max<int64_t>(shape[d], 1));
      }
      strides = row_major_strides(backing_shape);
      for (int64_t& s : strides) s *= step;
      for (size_t d = 0; d < shape.size(); ++d) start += offset[d] * strides[d];
      t.strides = strides;
      break;
    }
  }
  t.first = kGuard + start;
  t.offsets = test::element_offsets(shape, strides, t.first);
  int64_t end = t.first;
  for (int64_t o : t.offsets) end = std::max(end, o + 1);
  t.backing.assign(static_cast<size_t>(end + kGuard), outside);
  for (int64_t o : t.offsets) t.backing[static_cast<size_t>(o)] = inside;
  return t;
}

// The first differences between two arrays (empty when equal).
template <typename T, typename Equal>
std::string mismatches(const std::vector<T>& expected, const std::vector<T>& actual, Equal equal) {
  if (expected.size() != actual.size()) {
    return "size " + std::to_string(actual.size()) + ", expected " +
           std::to_string(expected.size());
  }
  std::ostringstream os;
  int64_t bad = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!equal(expected[i], actual[i])) {
      if (bad < 4) {
        os << " [" << i << "] got " << show(actual[i]) << " expected " << show(expected[i]);
      }
      ++bad;
    }
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(expected.size()) + " differ:" + os.str();
}

template <typename I>
std::vector<int64_t> widen(const std::vector<I>& v) {
  return std::vector<int64_t>(v.begin(), v.end());
}

template <typename I>
std::vector<I> narrow(const std::vector<int64_t>& v) {
  std::vector<I> out(v.size());
  for (size_t k = 0; k < v.size(); ++k) out[k] = static_cast<I>(v[k]);
  return out;
}


bool is_fast_name(const std::string& name) {
  return name.find("_k2s2p0") != std::string::npos || name.find("_k3s2p1") != std::string::npos;
}

// ---------------------------------------------------------------------------------------------
// What each thread did and what went wrong.

struct Counters {
  int64_t calls = 0, pool = 0, unpool = 0, backward = 0, by_nd[4] = {}, fast = 0,
          gather_eligible = 0, winner = 0, winner_unsupported = 0, general = 0, invalid_index = 0,
          bad_argument = 0, empty_batch = 0, batchless = 0, channels_last = 0, strided = 0,
          duplicates = 0, c_api = 0, queries = 0, big_rounds = 0;

  void add(const Counters& o) {
    calls += o.calls, pool += o.pool, unpool += o.unpool, backward += o.backward, fast += o.fast;
    for (int i = 0; i < 4; ++i) by_nd[i] += o.by_nd[i];
    gather_eligible += o.gather_eligible, winner += o.winner;
    winner_unsupported += o.winner_unsupported, general += o.general;
    invalid_index += o.invalid_index, bad_argument += o.bad_argument;
    empty_batch += o.empty_batch, batchless += o.batchless, channels_last += o.channels_last;
    strided += o.strided, duplicates += o.duplicates, c_api += o.c_api, queries += o.queries;
    big_rounds += o.big_rounds;
  }
};

// The dtype pairs this build can run (pooling compares values: per dtype; unpooling moves
// bits: any dtype of a compiled width), and the answers of the read-only queries.
struct Built {
  std::vector<std::pair<DType, DType>> pool, unpool, duplicates, backward;  // (value, index)
  std::vector<std::string> kernel_names;
  bool any_fast_pool = false, any_winner = false, any_backward_twin = false;
};

Built what_is_built() {
  Built b;
  for (DType index : {DType::i64, DType::i32}) {
    for (DType value : test::kAllDTypes) {
      if (test::pool_kernel_built(value, index)) b.pool.push_back({value, index});
      if (test::unpool_kernel_built(value, index)) {
        b.unpool.push_back({value, index});
        // Distinct values need 16 bits at least (values are the positions' bit patterns).
        if (dtype_size(value) >= 2) b.duplicates.push_back({value, index});
      }
    }
  }
  for (const KernelInfo& k : compiled_kernels()) {
    b.kernel_names.push_back(k.name);
    if (k.op == "pool" && is_fast_name(k.name)) b.any_fast_pool = true;
    if (k.op == "unpool_winner" && k.device == Device::cpu) b.any_winner = true;
    if (k.op == "pool_backward_scatter" && k.device == Device::cpu &&
        test::unpool_kernel_built(k.value_dtype, k.index_dtype)) {
      b.backward.push_back({k.value_dtype, k.index_dtype});
    }
  }
  b.any_backward_twin = test::unpool_backward_twin_built();
  return b;
}

struct Worker {
  int id = 0;
  Rng rng;
  const Built* built = nullptr;
  Counters n;
  int failures = 0;
  std::vector<std::string> reports;
  std::string context;  // what the current call is, for reports

  Worker(int id, uint64_t seed, const Built* built) : id(id), rng(seed), built(built) {}

  void fail(const std::string& what) {
    if (failures++ < kReportedPerThread) reports.push_back(context + ": " + what);
  }
  void check(bool ok, const std::string& what) {
    if (!ok) fail(what);
  }
};

template <typename F>
void with_types(DType value, DType index, F&& f) {
  test::visit_dtype(value, [&](auto v) {
    using T = decltype(v);
    if (index == DType::i32) {
      f(T{}, int32_t{});
    } else {
      f(T{}, int64_t{});
    }
  });
}

void count_shape(Worker& w, int nd, const Ints& shape) {
  if (shape.size() == static_cast<size_t>(nd) + 1) ++w.n.batchless;
  if (test::numel(shape) == 0) ++w.n.empty_batch;
}

void count_form(Worker& w, Form f) {
  if (f == Form::channels_last) ++w.n.channels_last;
  if (f == Form::strided) ++w.n.strided;
}

// ---------------------------------------------------------------------------------------------
// One pooling call: a random configuration, sometimes a bad argument.

template <typename T, typename I>
void pool_case(Worker& w, int nd) {
  Rng& rng = w.rng;
  const DType vt = dtype_of<T>(), it = dtype_of<I>();
  test::PoolConfigOptions config;
  config.many_channels = rng.chance(0.2);
  Ints shape;
  PoolOptions o;
  test::random_pool_config(rng, nd, test::random_window(rng, nd == 1 ? 0.0 : 0.4), config, &shape,
                           &o);
  if (shape.size() == static_cast<size_t>(nd) + 2 && rng.chance(0.04)) shape[0] = 0;
  o.path = rng.chance(0.3) ? Path::general : Path::automatic;
  const std::vector<T> input = random_values<T>(rng, ref::numel(shape));
  Ints out_shape;
  std::vector<T> expected_values;
  std::vector<int64_t> expected_indices;
  w.context = "thread " + std::to_string(w.id) + " max_pool" + std::to_string(nd) + "d " +
              dtype_name(vt) + "/" + dtype_name(it) + " " + describe(shape, o) + " path " +
              path_name(o.path);
  const Status rs =
      ref::max_pool<T>(nd, shape, input, o, &out_shape, &expected_values, &expected_indices);
  if (!rs.ok()) return w.fail("the reference refused a generated case: " + rs.message());

  // Bad arguments: 1 kernel 0, 2 padding too large, 3 stride 0, 4 values of another shape,
  // 5 a rank too large, 6 values with a zero stride (overlapping elements).
  int bad = rng.chance(0.08) ? static_cast<int>(rng.uniform(1, 6)) : 0;
  if (bad == 5 && shape.size() != static_cast<size_t>(nd) + 2) bad = 4;
  if (bad == 6 && (ref::numel(out_shape) == 0 || out_shape.back() < 2)) bad = 4;
  PoolOptions call_options = o;
  Ints input_shape = shape, values_shape = out_shape;
  switch (bad) {
    case 1: call_options.kernel_size = {0}; break;
    case 2: call_options.padding = {100}; break;
    case 3: call_options.stride = {0}; break;
    case 4: values_shape.back() += 1; break;
    case 5: input_shape.insert(input_shape.begin(), 1); break;
    default: break;
  }

  const Form in_form = random_form(rng);
  const Form values_form = rng.chance(0.6) ? in_form : random_form(rng);
  const Form indices_form = rng.chance(0.7) ? values_form : random_form(rng);
  Tensor<T> in = make_tensor<T>(rng, nd, input_shape, in_form, vt, winning_value<T>(), T{});
  in.set(input);
  Tensor<T> values =
      make_tensor<T>(rng, nd, values_shape, values_form, vt, guard_value<T>(), sentinel_value<T>());
  Tensor<I> indices =
      make_tensor<I>(rng, nd, out_shape, indices_form, it, guard_value<I>(), sentinel_value<I>());
  TensorView values_view = values.view();
  if (bad == 6) {
    if (values_view.strides.empty()) values_view.strides = row_major_strides(values_view.shape);
    values_view.strides.back() = 0;
  }
  w.context += std::string("\n  input ") + in.describe() + "; values " + values.describe() +
               "; indices " + indices.describe() +
               (bad ? "; bad argument " + std::to_string(bad) : "");
  const std::vector<T> in_before = in.backing, values_before = values.backing;
  const std::vector<I> indices_before = indices.backing;

  // The kernel a call would take (a concurrent read-only query).
  std::string name;
  const Status ks = max_pool_kernel_name(nd, in.view(), it, call_options, &name);
  const bool options_bad = bad == 1 || bad == 2 || bad == 3 || bad == 5;
  if (options_bad) {
    w.check(ks.code() == Code::invalid_argument, std::string("max_pool_kernel_name: got ") +
                                                     code_name(ks.code()) + " (" + ks.message() +
                                                     "), expected invalid_argument");
  } else {
    w.check(ks.ok(), "max_pool_kernel_name: " + ks.message());
    if (ks.ok() && o.path == Path::automatic && is_fast_name(name)) ++w.n.fast;
  }

  const Status st = max_pool(nd, in.view(), values_view, indices.view(), call_options);
  ++w.n.calls, ++w.n.pool, ++w.n.by_nd[nd];
  if (o.path == Path::general) ++w.n.general;
  count_shape(w, nd, shape);
  count_form(w, in_form);
  const Code expected = bad ? Code::invalid_argument : Code::ok;
  if (st.code() != expected) {
    return w.fail(std::string("status ") + code_name(st.code()) + " (" + st.message() +
                  "), expected " + code_name(expected));
  }
  w.check(std::equal(in.backing.begin(), in.backing.end(), in_before.begin(), same_bits<T>),
          "the input changed");
  if (bad) {
    ++w.n.bad_argument;
    w.check(st.message().size() > 0, "an error without a message");
    w.check(std::equal(values.backing.begin(), values.backing.end(), values_before.begin(),
                       same_bits<T>),
            "values written by a failing call");
    w.check(std::equal(indices.backing.begin(), indices.backing.end(), indices_before.begin(),
                       same_bits<I>),
            "indices written by a failing call");
    return;
  }
  const std::string dv = mismatches(expected_values, values.logical(), same_value<T>);
  const std::string di = mismatches(expected_indices, widen(indices.logical()),
                                    [](int64_t a, int64_t b) { return a == b; });
  w.check(dv.empty(), "values: " + dv);
  w.check(di.empty(), "indices: " + di);
  w.check(values.outside_is(guard_value<T>()), "values: written outside the view");
  w.check(indices.outside_is(guard_value<I>()), "indices: written outside the view");
}

// ---------------------------------------------------------------------------------------------
// One unpooling call: indices from a real pooling, random with duplicates, or with an invalid
// one; sometimes a bad argument.

template <typename T, typename I>
void unpool_case(Worker& w, int nd) {
  Rng& rng = w.rng;
  const DType vt = dtype_of<T>(), it = dtype_of<I>();
  const int mode = test::random_unpool_mode(rng, {35, 65, 85});
  test::UnpoolCaseOptions case_options;
  case_options.window_p = nd == 1 ? 0.0 : 0.6;
  case_options.many_channels = rng.chance(0.2);
  test::UnpoolCase<T> c =
      test::random_unpool_case<T, I>(rng, nd, mode, case_options, random_values<T>);
  const int64_t path_r = rng.uniform(0, 99);
  c.o.path = path_r < 50 ? Path::automatic : path_r < 78 ? Path::general : Path::winner;
  w.context = "thread " + std::to_string(w.id) + " max_unpool" + std::to_string(nd) + "d " +
              dtype_name(vt) + "/" + dtype_name(it) + " mode " + std::to_string(mode) + " " +
              describe(c.shape, c.o) + " path " + path_name(c.o.path);
  Ints out_shape;
  std::vector<T> expected;
  const Status rs =
      ref::max_unpool<T>(nd, c.shape, c.values, c.indices, c.o, &out_shape, &expected);
  if (!rs.ok()) {
    if (rs.code() != Code::index_out_of_range ||
        !ref::max_unpool_output_shape(nd, c.shape, c.o, &out_shape).ok()) {
      return w.fail("the reference refused a generated case: " + rs.message());
    }
  }
  int64_t first_invalid = 0;
  {
    const int64_t plane = plane_size(nd, out_shape);
    for (int64_t i : c.indices) {
      if (i < 0 || i >= plane) {
        first_invalid = i;
        break;
      }
    }
  }

  // Bad arguments: 1 output_size out of range, 2 kernel 0, 3 output of another shape,
  // 4 indices of dtype f32, 5 output with a zero stride.
  int bad = rng.chance(0.08) ? static_cast<int>(rng.uniform(1, 5)) : 0;
  if (bad == 5 && (ref::numel(out_shape) == 0 || out_shape.back() < 2)) bad = 3;
  UnpoolOptions call_options = c.o;
  Ints output_shape = out_shape;
  DType index_dtype = it;
  switch (bad) {
    case 1: call_options.output_size = Ints(nd, 1 << 20); break;
    case 2: call_options.kernel_size = {0}; break;
    case 3: output_shape.back() += 1; break;
    case 4: index_dtype = DType::f32; break;
    default: break;
  }

  const Form values_form = random_form(rng);
  const Form indices_form = rng.chance(0.7) ? values_form : random_form(rng);
  const Form output_form = rng.chance(0.6) ? values_form : random_form(rng);
  Tensor<T> values = make_tensor<T>(rng, nd, c.shape, values_form, vt, winning_value<T>(), T{});
  values.set(c.values);
  // Elements outside the indices' view are invalid: reading them shows.
  Tensor<I> indices = make_tensor<I>(rng, nd, c.shape, indices_form, it, static_cast<I>(-1), I{});
  indices.set(narrow<I>(c.indices));
  Tensor<T> output =
      make_tensor<T>(rng, nd, output_shape, output_form, vt, guard_value<T>(), sentinel_value<T>());
  TensorView indices_view = indices.view(), output_view = output.view();
  indices_view.dtype = index_dtype;
  if (bad == 5) {
    if (output_view.strides.empty()) output_view.strides = row_major_strides(output_view.shape);
    output_view.strides.back() = 0;
  }
  w.context += std::string("\n  values ") + values.describe() + "; indices " + indices.describe() +
               "; output " + output.describe() +
               (bad ? "; bad argument " + std::to_string(bad) : "");
  const std::vector<T> values_before = values.backing, output_before = output.backing;
  const std::vector<I> indices_before = indices.backing;

  std::string name;
  const Status ks = max_unpool_kernel_name(nd, values.view(), index_dtype, call_options, &name);
  Code expected_code = rs.code();
  if (bad) {
    expected_code = Code::invalid_argument;
    if (bad != 3 && bad != 5) {
      w.check(ks.code() == Code::invalid_argument, std::string("max_unpool_kernel_name: got ") +
                                                       code_name(ks.code()) + " (" + ks.message() +
                                                       "), expected invalid_argument");
    }
  } else if (ks.code() == Code::unsupported && c.o.path == Path::winner) {
    expected_code = Code::unsupported;  // no winner kernel for this layout or width
    ++w.n.winner_unsupported;
  } else if (!ks.ok()) {
    return w.fail("max_unpool_kernel_name: " + ks.message());
  } else if (mode == 0 && c.o.path == Path::automatic && is_fast_name(name)) {
    ++w.n.gather_eligible;
  }

  const Status st = max_unpool(nd, values.view(), indices_view, output_view, call_options);
  ++w.n.calls, ++w.n.unpool, ++w.n.by_nd[nd];
  count_shape(w, nd, c.shape);
  count_form(w, values_form);
  if (st.code() != expected_code) {
    return w.fail(std::string("status ") + code_name(st.code()) + " (" + st.message() +
                  "), expected " + code_name(expected_code) +
                  (rs.ok() ? "" : " (" + rs.message() + ")"));
  }
  w.check(
      std::equal(values.backing.begin(), values.backing.end(), values_before.begin(), same_bits<T>),
      "the values changed");
  w.check(std::equal(indices.backing.begin(), indices.backing.end(), indices_before.begin(),
                     same_bits<I>),
          "the indices changed");
  w.check(output.outside_is(guard_value<T>()), "output: written outside the view");
  switch (expected_code) {
    case Code::ok: {
      if (c.o.path == Path::winner) ++w.n.winner;
      if (c.o.path == Path::general) ++w.n.general;
      const std::string d = mismatches(expected, output.logical(), same_bits<T>);
      w.check(d.empty(), "output: " + d);
      break;
    }
    case Code::index_out_of_range:
      ++w.n.invalid_index;
      w.check(st.message().find(std::to_string(first_invalid)) != std::string::npos,
              "the message does not name the first invalid index " + std::to_string(first_invalid) +
                  ": " + st.message());
      break;
    default:  // invalid_argument, unsupported: nothing written
      if (bad) ++w.n.bad_argument;
      w.check(st.message().size() > 0, "an error without a message");
      w.check(std::equal(output.backing.begin(), output.backing.end(), output_before.begin(),
                         same_bits<T>),
              "output written by a failing call");
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// One backward call, pooling's or unpooling's, on gradient dtypes: indices from a real pooling
// (some moved out of their windows or the plane) or unpooling cases with duplicates and invalid
// indices; gradients whose sums depend on the order of the additions.

template <typename T>
T gradient_value(double x) {
  if constexpr (std::is_same_v<T, double>) {
    return x;
  } else {
    return test::from_float<T>(static_cast<float>(x));
  }
}

// Runs one backward op on random forms of its views and checks it: the expected gradient, or
// the expected error (naming `first_invalid`), inputs unchanged, nothing written outside the
// output. call(grad_output, indices, output) runs the op.
template <typename T, typename I, typename Call>
void check_backward(Worker& w, int nd, const Ints& grad_shape, const std::vector<T>& grad,
                    const Ints& index_shape, const std::vector<int64_t>& index_values,
                    const Ints& out_shape, const Status& expected_status,
                    const std::vector<T>& expected, int64_t first_invalid, Call call) {
  Rng& rng = w.rng;
  const DType vt = dtype_of<T>(), it = dtype_of<I>();
  const Form grad_form = random_form(rng);
  const Form indices_form = rng.chance(0.7) ? grad_form : random_form(rng);
  const Form out_form = rng.chance(0.6) ? grad_form : random_form(rng);
  Tensor<T> g = make_tensor<T>(rng, nd, grad_shape, grad_form, vt, winning_value<T>(), T{});
  g.set(grad);
  Tensor<I> i = make_tensor<I>(rng, nd, index_shape, indices_form, it, static_cast<I>(-1), I{});
  i.set(narrow<I>(index_values));
  Tensor<T> out =
      make_tensor<T>(rng, nd, out_shape, out_form, vt, guard_value<T>(), sentinel_value<T>());
  w.context += "\n  grad_output " + g.describe() + "; indices " + i.describe() + "; output " +
               out.describe();
  const std::vector<T> grad_before = g.backing;
  const std::vector<I> indices_before = i.backing;
  const Status st = call(g.view(), i.view(), out.view());
  ++w.n.calls, ++w.n.backward, ++w.n.by_nd[nd];
  count_form(w, grad_form);
  if (st.code() != expected_status.code()) {
    return w.fail(std::string("status ") + code_name(st.code()) + " (" + st.message() +
                  "), expected " + code_name(expected_status.code()));
  }
  w.check(std::equal(g.backing.begin(), g.backing.end(), grad_before.begin(), same_bits<T>),
          "grad_output changed");
  w.check(std::equal(i.backing.begin(), i.backing.end(), indices_before.begin(), same_bits<I>),
          "the indices changed");
  w.check(out.outside_is(guard_value<T>()), "output: written outside the view");
  if (st.ok()) {
    const std::string d = mismatches(expected, out.logical(), same_value<T>);
    w.check(d.empty(), "gradient: " + d);
  } else {
    ++w.n.invalid_index;
    w.check(st.message().find(std::to_string(first_invalid)) != std::string::npos,
            "the message does not name the first invalid index " +
                std::to_string(first_invalid) + ": " + st.message());
  }
}

template <typename T, typename I>
void backward_case(Worker& w, int nd) {
  Rng& rng = w.rng;
  const std::string types = std::string(dtype_name(dtype_of<T>())) + "/" + dtype_name(dtype_of<I>());
  if (rng.chance(0.5)) {
    test::PoolConfigOptions config;
    config.many_channels = rng.chance(0.2);
    const int mode = static_cast<int>(rng.uniform(0, 2));
    auto c = test::random_pool_backward_case<T>(rng, nd, mode, nd == 1 ? 0.0 : 0.5, config,
                                                random_values<T>, gradient_value<T>);
    c.o.path = rng.chance(0.3) ? Path::general : Path::automatic;
    w.context = "thread " + std::to_string(w.id) + " max_pool_backward" + std::to_string(nd) +
                "d " + types + " mode " + std::to_string(mode) + " " +
                describe(c.input_shape, c.o) + " path " + path_name(c.o.path);
    std::vector<T> expected;
    const Status rs =
        ref::max_pool_backward<T>(nd, c.input_shape, c.grad_output, c.indices, c.o, &expected);
    if (!rs.ok()) return w.fail("the reference refused a generated case: " + rs.message());
    check_backward<T, I>(w, nd, c.output_shape, c.grad_output, c.output_shape, c.indices,
                         c.input_shape, rs, expected, 0,
                         [&](const TensorView& g, const TensorView& i, const TensorView& o) {
                           return max_pool_backward(nd, g, i, o, c.o);
                         });
    return;
  }
  const int mode = test::random_unpool_mode(rng, {35, 65, 85});
  test::UnpoolCaseOptions case_options;
  case_options.window_p = nd == 1 ? 0.0 : 0.6;
  test::UnpoolCase<T> c =
      test::random_unpool_case<T, I>(rng, nd, mode, case_options, random_values<T>);
  Ints out_shape;
  if (!ref::max_unpool_output_shape(nd, c.shape, c.o, &out_shape).ok()) {
    return w.fail("the reference refused a generated unpooling case");
  }
  c.o.path = rng.chance(0.3) && w.built->any_backward_twin ? Path::winner : Path::automatic;
  w.context = "thread " + std::to_string(w.id) + " max_unpool_backward" + std::to_string(nd) +
              "d " + types + " mode " + std::to_string(mode) + " " + describe(c.shape, c.o) +
              " path " + path_name(c.o.path);
  const std::vector<T> grad =
      test::random_gradients<T>(rng, ref::numel(out_shape), gradient_value<T>);
  std::vector<T> expected;
  const Status rs = ref::max_unpool_backward<T>(nd, c.shape, grad, c.indices, c.o, &expected);
  const int64_t plane = plane_size(nd, out_shape);
  int64_t first_invalid = 0;
  for (int64_t i : c.indices) {
    if (i < 0 || i >= plane) {
      first_invalid = i;
      break;
    }
  }
  check_backward<T, I>(w, nd, out_shape, grad, c.shape, c.indices, c.shape, rs, expected,
                       first_invalid,
                       [&](const TensorView& g, const TensorView& i, const TensorView& o) {
                         // The CPU twin (Path::winner) is 32-bit and contiguous: for other
                         // views the call would be unsupported.
                         UnpoolOptions options = c.o;
                         std::string name;
                         if (options.path == Path::winner &&
                             !max_unpool_backward_kernel_name(nd, g, dtype_of<I>(), c.shape,
                                                              options, &name)
                                  .ok()) {
                           options.path = Path::automatic;
                         }
                         return max_unpool_backward(nd, g, i, o, options);
                       });
}

// ---------------------------------------------------------------------------------------------
// Duplicate indices on a shape split across threads: the latest in input order must win on
// every call. Values are the positions' bit patterns (all distinct).

template <typename T, typename I>
void duplicates_case(Worker& w, int nd) {
  Rng& rng = w.rng;
  const DType vt = dtype_of<T>(), it = dtype_of<I>();
  const test::DuplicatesCase c = test::duplicates_case(rng, nd, rng.uniform(2, 8));
  UnpoolOptions o = c.o;
  const int64_t path_r = rng.uniform(0, 99);
  o.path = path_r < 40 ? Path::automatic : path_r < 70 ? Path::general : Path::winner;
  w.context = "thread " + std::to_string(w.id) + " duplicates max_unpool" + std::to_string(nd) +
              "d " + dtype_name(vt) + "/" + dtype_name(it) + " " + describe(c.shape, o) + " path " +
              path_name(o.path);
  if (!c.status.ok()) return w.fail("duplicates_case: " + c.status.message());
  const int64_t n = ref::numel(c.shape);
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = from_bits<T>(static_cast<uint64_t>(i + 1));
  // Latest in input order: assign in order, each later one overwrites.
  const int64_t in_plane = plane_size(nd, c.shape), out_plane = plane_size(nd, c.out_shape);
  std::vector<T> latest(static_cast<size_t>(ref::numel(c.out_shape)), from_bits<T>(0));
  for (int64_t i = 0; i < n; ++i) {
    latest[(i / in_plane) * out_plane + c.indices[i]] = v[i];
  }
  Ints ref_shape;
  std::vector<T> expected;
  const Status rs = ref::max_unpool<T>(nd, c.shape, v, c.indices, o, &ref_shape, &expected);
  if (!rs.ok() || expected.size() != latest.size() ||
      !std::equal(expected.begin(), expected.end(), latest.begin(), same_bits<T>)) {
    return w.fail("the reference disagrees with latest-wins: " + rs.message());
  }

  const Form values_form = random_form(rng);
  const Form indices_form = rng.chance(0.7) ? values_form : random_form(rng);
  const Form output_form = rng.chance(0.7) ? values_form : random_form(rng);
  Tensor<T> values = make_tensor<T>(rng, nd, c.shape, values_form, vt, winning_value<T>(), T{});
  values.set(v);
  Tensor<I> indices = make_tensor<I>(rng, nd, c.shape, indices_form, it, static_cast<I>(-1), I{});
  indices.set(narrow<I>(c.indices));
  Tensor<T> output =
      make_tensor<T>(rng, nd, c.out_shape, output_form, vt, guard_value<T>(), sentinel_value<T>());
  w.context += std::string("\n  values ") + values.describe() + "; indices " + indices.describe() +
               "; output " + output.describe();
  std::string name;
  const Status ks = max_unpool_kernel_name(nd, values.view(), it, o, &name);
  const Status st = max_unpool(nd, values.view(), indices.view(), output.view(), o);
  ++w.n.calls, ++w.n.unpool, ++w.n.by_nd[nd];
  count_form(w, values_form);
  if (ks.code() == Code::unsupported && o.path == Path::winner) {
    ++w.n.winner_unsupported;
    w.check(st.code() == Code::unsupported,
            std::string("status ") + code_name(st.code()) + ", expected unsupported as " +
                "max_unpool_kernel_name says (" + ks.message() + ")");
    return;
  }
  if (!ks.ok() || !st.ok()) {
    return w.fail("kernel name: " + ks.message() + "; status: " + st.message());
  }
  ++w.n.duplicates;
  if (o.path == Path::winner) ++w.n.winner;
  const std::string d = mismatches(latest, output.logical(), same_bits<T>);
  w.check(d.empty(), "not the latest in input order (values are positions + 1): " + d);
  w.check(output.outside_is(guard_value<T>()), "output: written outside the view");
}

// ---------------------------------------------------------------------------------------------
// The C API: output shapes (good and bad, messages truncated), a pooling and unpoolings of f32
// where built.

using test::c_tensor;

template <typename I>
void c_api_data_round(Worker& w, Rng& rng) {
  const DType it = dtype_of<I>();
  const int32_t c_index = it == DType::i32 ? POOLGEN_I32 : POOLGEN_I64;
  const Ints shape = {rng.uniform(1, 2), rng.uniform(1, 3), rng.uniform(2, 9), rng.uniform(2, 9)};
  const int64_t k = rng.uniform(1, 3);
  PoolOptions o;
  o.kernel_size = {k};
  Ints out_shape;
  std::vector<float> input = random_values<float>(rng, ref::numel(shape)), ev;
  std::vector<int64_t> ei;
  if (!ref::max_pool<float>(2, shape, input, o, &out_shape, &ev, &ei).ok()) return;
  w.context = "thread " + std::to_string(w.id) + " C API f32/" + dtype_name(it) + " input " +
              str(shape) + " kernel " + std::to_string(k);
  poolgen_pool_options po;
  std::memset(&po, 0, sizeof po);
  po.kernel_size[0] = po.kernel_size[1] = k;
  const int64_t n_out = ref::numel(out_shape);
  std::vector<float> values(static_cast<size_t>(n_out + 2 * kGuard), guard_value<float>());
  std::vector<I> indices(static_cast<size_t>(n_out + 2 * kGuard), guard_value<I>());
  const poolgen_tensor tin = c_tensor(input.data(), POOLGEN_F32, shape),
                       tv = c_tensor(values.data() + kGuard, POOLGEN_F32, out_shape),
                       ti = c_tensor(indices.data() + kGuard, c_index, out_shape);
  char message[96];
  int32_t code = poolgen_max_pool(2, &tin, &tv, &ti, &po, message, sizeof message);
  ++w.n.c_api, ++w.n.calls;
  if (code != POOLGEN_OK) return w.fail(std::string("poolgen_max_pool: ") + message);
  const std::vector<float> got_values(values.begin() + kGuard, values.end() - kGuard);
  const std::vector<I> got_indices(indices.begin() + kGuard, indices.end() - kGuard);
  const std::string dv = mismatches(ev, got_values, same_value<float>);
  const std::string di =
      mismatches(ei, widen(got_indices), [](int64_t a, int64_t b) { return a == b; });
  w.check(dv.empty(), "poolgen_max_pool values: " + dv);
  w.check(di.empty(), "poolgen_max_pool indices: " + di);

  // Unpool the result back (good), then with an invalid index (index_out_of_range).
  if (!test::unpool_kernel_built(DType::f32, it)) return;
  poolgen_unpool_options uo;
  std::memset(&uo, 0, sizeof uo);
  uo.kernel_size[0] = uo.kernel_size[1] = k;
  uo.output_size_len = 2;
  uo.output_size[0] = shape[2];
  uo.output_size[1] = shape[3];
  UnpoolOptions ro;
  ro.kernel_size = {k};
  ro.output_size = {shape[2], shape[3]};
  Ints unpooled_shape;
  std::vector<float> expected;
  if (!ref::max_unpool<float>(2, out_shape, ev, ei, ro, &unpooled_shape, &expected).ok()) {
    return w.fail("the reference refused to unpool a pooling");
  }
  std::vector<float> out(static_cast<size_t>(ref::numel(unpooled_shape) + 2 * kGuard),
                         guard_value<float>());
  const poolgen_tensor to = c_tensor(out.data() + kGuard, POOLGEN_F32, unpooled_shape);
  const poolgen_tensor tv2 = c_tensor(values.data() + kGuard, POOLGEN_F32, out_shape);
  code = poolgen_max_unpool(2, &tv2, &ti, &to, &uo, message, sizeof message);
  ++w.n.c_api, ++w.n.calls;
  if (code != POOLGEN_OK) return w.fail(std::string("poolgen_max_unpool: ") + message);
  const std::string du = mismatches(
      expected, std::vector<float>(out.begin() + kGuard, out.end() - kGuard), same_bits<float>);
  w.check(du.empty(), "poolgen_max_unpool output: " + du);

  const int64_t plane = unpooled_shape[2] * unpooled_shape[3];
  const int64_t position = rng.uniform(0, n_out - 1);
  indices[kGuard + position] = static_cast<I>(rng.chance(0.5) ? plane : -1);
  std::fill(out.begin(), out.end(), guard_value<float>());
  char small[12];
  std::memset(small, '#', sizeof small);
  code = poolgen_max_unpool(2, &tv2, &ti, &to, &uo, small, 8);
  ++w.n.c_api, ++w.n.calls, ++w.n.invalid_index;
  w.check(code == POOLGEN_INDEX_OUT_OF_RANGE,
          "poolgen_max_unpool with an invalid index: code " + std::to_string(code));
  w.check(std::strlen(small) == 7 && small[8] == '#',
          "poolgen_max_unpool: the message is not truncated to 8 bytes");
  bool guards = true;
  for (int64_t g = 0; g < kGuard; ++g) {
    guards = guards && same_bits(out[g], guard_value<float>()) &&
             same_bits(out[out.size() - 1 - g], guard_value<float>());
  }
  w.check(guards, "poolgen_max_unpool with an invalid index wrote outside the output");
}

void c_api_round(Worker& w) {
  Rng& rng = w.rng;
  w.context = "thread " + std::to_string(w.id) + " C API output shapes";
  char message[128];
  poolgen_pool_options po;
  std::memset(&po, 0, sizeof po);
  po.kernel_size[0] = po.kernel_size[1] = 3;
  po.stride[0] = po.stride[1] = 2;
  po.padding[0] = po.padding[1] = 1;
  po.ceil_mode = rng.chance(0.5);
  const int64_t in_shape[4] = {rng.uniform(0, 3), rng.uniform(1, 4), rng.uniform(1, 30),
                               rng.uniform(1, 30)};
  int64_t out_shape[5] = {};
  int32_t code =
      poolgen_max_pool_output_shape(2, 4, in_shape, &po, out_shape, message, sizeof message);
  PoolOptions ro;
  ro.kernel_size = {3};
  ro.stride = {2};
  ro.padding = {1};
  ro.ceil_mode = po.ceil_mode != 0;
  Ints expected;
  const Status rs = ref::max_pool_output_shape(2, Ints(in_shape, in_shape + 4), ro, &expected);
  ++w.n.c_api;
  w.check(code == static_cast<int32_t>(rs.code()), "poolgen_max_pool_output_shape: code " +
                                                       std::to_string(code) + " (" + message +
                                                       "), the reference says " + rs.message());
  if (code == POOLGEN_OK && rs.ok()) {
    w.check(Ints(out_shape, out_shape + 4) == expected,
            "poolgen_max_pool_output_shape: " + str(Ints(out_shape, out_shape + 4)) +
                ", expected " + str(expected));
  }
  // Bad: a kernel of 0, with a message buffer, a tiny one and none.
  po.kernel_size[1] = 0;
  std::memset(message, '#', sizeof message);
  code = poolgen_max_pool_output_shape(2, 4, in_shape, &po, out_shape, message, sizeof message);
  w.check(code == POOLGEN_INVALID_ARGUMENT && std::strlen(message) > 0 && message[0] != '#',
          "poolgen_max_pool_output_shape with kernel 0: code " + std::to_string(code));
  char small[8];
  std::memset(small, '#', sizeof small);
  code = poolgen_max_pool_output_shape(2, 4, in_shape, &po, out_shape, small, 4);
  w.check(code == POOLGEN_INVALID_ARGUMENT && std::strlen(small) == 3 && small[4] == '#',
          "poolgen_max_pool_output_shape: the message is not truncated to 4 bytes");
  code = poolgen_max_pool_output_shape(2, 4, in_shape, &po, out_shape, nullptr, 0);
  w.check(code == POOLGEN_INVALID_ARGUMENT, "poolgen_max_pool_output_shape without a buffer");

  poolgen_unpool_options uo;
  std::memset(&uo, 0, sizeof uo);
  uo.kernel_size[0] = 2;
  const int64_t values_shape[3] = {rng.uniform(0, 2), rng.uniform(1, 4), rng.uniform(1, 40)};
  code =
      poolgen_max_unpool_output_shape(1, 3, values_shape, &uo, out_shape, message, sizeof message);
  ++w.n.c_api;
  w.check(code == POOLGEN_OK && out_shape[2] == 2 * values_shape[2] &&
              out_shape[0] == values_shape[0] && out_shape[1] == values_shape[1],
          "poolgen_max_unpool_output_shape: code " + std::to_string(code) + " (" + message + ")");
  uo.output_size_len = 1;
  uo.output_size[0] = 2 * values_shape[2] + 2;  // outside (default - 2, default + 2)
  code =
      poolgen_max_unpool_output_shape(1, 3, values_shape, &uo, out_shape, message, sizeof message);
  w.check(code == POOLGEN_INVALID_ARGUMENT && std::strlen(message) > 0,
          "poolgen_max_unpool_output_shape with output_size out of range: code " +
              std::to_string(code));

  if (test::pool_kernel_built(DType::f32, DType::i64) &&
      (!test::pool_kernel_built(DType::f32, DType::i32) || rng.chance(0.5))) {
    c_api_data_round<int64_t>(w, rng);
  } else if (test::pool_kernel_built(DType::f32, DType::i32)) {
    c_api_data_round<int32_t>(w, rng);
  }
}

// ---------------------------------------------------------------------------------------------
// Worker loop.

void worker_loop(Worker& w, int iterations) {
  const Built& b = *w.built;
  for (int iter = 0; iter < iterations; ++iter) {
    const int nd = static_cast<int>(w.rng.uniform(1, 3));
    const int64_t r = w.rng.uniform(0, 99);
    if (r < 42 && !b.pool.empty()) {
      const auto [value, index] = b.pool[w.rng.uniform(0, b.pool.size() - 1)];
      with_types(value, index, [&](auto t, auto i) { pool_case<decltype(t), decltype(i)>(w, nd); });
    } else if (r < 84 && !b.unpool.empty()) {
      const auto [value, index] = b.unpool[w.rng.uniform(0, b.unpool.size() - 1)];
      with_types(value, index,
                 [&](auto t, auto i) { unpool_case<decltype(t), decltype(i)>(w, nd); });
    } else if (r < 90 && !b.backward.empty()) {
      const auto [value, index] = b.backward[w.rng.uniform(0, b.backward.size() - 1)];
      with_types(value, index, [&](auto t, auto i) {
        if constexpr (is_float_type<decltype(t)>()) backward_case<decltype(t), decltype(i)>(w, nd);
      });
    } else if (r < 95 && !b.duplicates.empty()) {
      const auto [value, index] = b.duplicates[w.rng.uniform(0, b.duplicates.size() - 1)];
      with_types(value, index,
                 [&](auto t, auto i) { duplicates_case<decltype(t), decltype(i)>(w, nd); });
    } else {
      c_api_round(w);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Large calls that keep Halide's thread pool busy: a pooling and unpoolings of several MB,
// precomputed once and checked on every round.

template <typename T, typename I>
struct BigCalls {
  struct Pool {
    Ints shape, out_shape;
    PoolOptions o;
    Form in_form, out_form;
    std::vector<T> input, values;
    std::vector<int64_t> indices;
  };
  struct Unpool {
    Ints shape, out_shape;
    UnpoolOptions o;
    Form form;
    std::vector<T> values, expected;
    std::vector<int64_t> indices;
    Code code = Code::ok;  // index_out_of_range: `invalid` is the first invalid index
    int64_t invalid = 0;
  };
  std::vector<Pool> pools;
  std::vector<Unpool> unpools;
};

template <typename T, typename I>
BigCalls<T, I> make_big_calls(const Built& built) {
  BigCalls<T, I> b;
  Rng rng(0xb16);
  const Ints shape = {2, 16, 128, 160};  // 655360 elements
  const std::vector<T> input = random_values<T>(rng, ref::numel(shape));
  auto add_pool = [&](Ints k, Ints s, Ints p, Ints d, bool ceil, Path path, Form in_form,
                      Form out_form) {
    typename BigCalls<T, I>::Pool c;
    c.shape = shape;
    c.o.kernel_size = k, c.o.stride = s, c.o.padding = p, c.o.dilation = d;
    c.o.ceil_mode = ceil, c.o.path = path;
    c.in_form = in_form, c.out_form = out_form;
    c.input = input;
    const Status st = ref::max_pool<T>(2, shape, input, c.o, &c.out_shape, &c.values, &c.indices);
    if (st.ok()) b.pools.push_back(std::move(c));
  };
  add_pool({3}, {2}, {1}, {1}, false, Path::automatic, Form::contiguous, Form::contiguous);
  add_pool({2}, {2}, {0}, {1}, false, Path::automatic, Form::channels_last, Form::channels_last);
  add_pool({3, 2}, {1, 2}, {1, 0}, {2, 1}, true, Path::general, Form::contiguous,
           Form::channels_last);

  // Unpoolings of the first pooling (k3s2p1, back to the input's extents) and random indices
  // with many duplicates (the scatter split across Halide's threads).
  const auto& first = b.pools.front();
  auto add_unpool = [&](const std::vector<int64_t>& indices, Path path, Form form) {
    typename BigCalls<T, I>::Unpool c;
    c.shape = first.out_shape;
    c.o.kernel_size = {3}, c.o.stride = {2}, c.o.padding = {1};
    c.o.output_size = {shape[2], shape[3]};
    c.o.path = path;
    c.form = form;
    c.values = first.values;
    c.indices = indices;
    const Status st =
        ref::max_unpool<T>(2, c.shape, c.values, c.indices, c.o, &c.out_shape, &c.expected);
    c.code = st.code();
    if (!st.ok()) ref::max_unpool_output_shape(2, c.shape, c.o, &c.out_shape);
    b.unpools.push_back(std::move(c));
  };
  std::vector<int64_t> duplicates(first.indices.size());
  for (int64_t& i : duplicates) i = rng.uniform(0, 99);
  add_unpool(first.indices, Path::automatic, Form::contiguous);
  add_unpool(first.indices, Path::automatic, Form::channels_last);
  add_unpool(duplicates, Path::general, Form::contiguous);
  add_unpool(duplicates, Path::general, Form::channels_last);
  if (built.any_winner) add_unpool(duplicates, Path::winner, Form::contiguous);
  // One invalid index among many planes: the scatter's parallel tasks fail, nothing is written
  // outside the output.
  std::vector<int64_t> invalid = duplicates;
  invalid[rng.uniform(invalid.size() / 2, invalid.size() - 1)] = 1 << 20;
  add_unpool(invalid, Path::general, Form::contiguous);
  b.unpools.back().invalid = 1 << 20;
  return b;
}

// Counts one up when its thread is ready to run the big calls, or leaves early.
class ReadySignal {
 public:
  explicit ReadySignal(std::atomic<int>& ready) : ready_(ready) {}
  ~ReadySignal() { now(); }
  void now() {
    if (!signalled_) ++ready_;
    signalled_ = true;
  }

 private:
  std::atomic<int>& ready_;
  bool signalled_ = false;
};

template <typename T, typename I>
void big_pool_loop(Worker& w, const BigCalls<T, I>& b, std::atomic<int>& ready,
                   const std::atomic<bool>& done) {
  ReadySignal signal(ready);
  const DType vt = dtype_of<T>(), it = dtype_of<I>();
  std::vector<Tensor<T>> ins, values;
  std::vector<Tensor<I>> indices;
  std::vector<std::vector<int64_t>> values_outside, indices_outside;
  for (const auto& c : b.pools) {
    ins.push_back(make_tensor<T>(w.rng, 2, c.shape, c.in_form, vt, winning_value<T>(), T{}));
    ins.back().set(c.input);
    values.push_back(make_tensor<T>(w.rng, 2, c.out_shape, c.out_form, vt, guard_value<T>(),
                                    sentinel_value<T>()));
    indices.push_back(make_tensor<I>(w.rng, 2, c.out_shape, c.out_form, it, guard_value<I>(),
                                     sentinel_value<I>()));
    values_outside.push_back(values.back().outside_positions());
    indices_outside.push_back(indices.back().outside_positions());
  }
  signal.now();
  size_t round = 0;
  do {
    const size_t k = round++ % b.pools.size();
    const auto& c = b.pools[k];
    w.context = "big pool " + std::to_string(k) + " " + describe(c.shape, c.o) + " path " +
                path_name(c.o.path) + " " + form_name(c.in_form) + " -> " + form_name(c.out_form);
    values[k].fill_view(sentinel_value<T>());
    indices[k].fill_view(sentinel_value<I>());
    const Status st = max_pool(2, ins[k].view(), values[k].view(), indices[k].view(), c.o);
    ++w.n.calls, ++w.n.big_rounds;
    if (!st.ok()) {
      w.fail("status: " + st.message());
      continue;
    }
    const std::string dv = values[k].mismatches_in_place(c.values, same_value<T>);
    const std::string di = indices[k].mismatches_in_place(
        c.indices, [](int64_t e, I a) { return e == static_cast<int64_t>(a); });
    w.check(dv.empty(), "values: " + dv);
    w.check(di.empty(), "indices: " + di);
    w.check(values[k].all_are(values_outside[k], guard_value<T>()) &&
                indices[k].all_are(indices_outside[k], guard_value<I>()),
            "written outside the outputs");
  } while (!done.load() && w.failures < kReportedPerThread);
}

template <typename T, typename I>
void big_unpool_loop(Worker& w, const BigCalls<T, I>& b, std::atomic<int>& ready,
                     const std::atomic<bool>& done) {
  ReadySignal signal(ready);
  const DType vt = dtype_of<T>(), it = dtype_of<I>();
  std::vector<Tensor<T>> values, outputs;
  std::vector<Tensor<I>> indices;
  std::vector<std::vector<int64_t>> outside;
  for (const auto& c : b.unpools) {
    values.push_back(make_tensor<T>(w.rng, 2, c.shape, c.form, vt, winning_value<T>(), T{}));
    values.back().set(c.values);
    indices.push_back(make_tensor<I>(w.rng, 2, c.shape, c.form, it, static_cast<I>(-1), I{}));
    indices.back().set(narrow<I>(c.indices));
    outputs.push_back(
        make_tensor<T>(w.rng, 2, c.out_shape, c.form, vt, guard_value<T>(), sentinel_value<T>()));
    outside.push_back(outputs.back().outside_positions());
  }
  signal.now();
  size_t round = 0;
  do {
    const size_t k = round++ % b.unpools.size();
    const auto& c = b.unpools[k];
    w.context = "big unpool " + std::to_string(k) + " " + describe(c.shape, c.o) + " path " +
                path_name(c.o.path) + " " + form_name(c.form);
    outputs[k].fill_view(sentinel_value<T>());
    const Status st = max_unpool(2, values[k].view(), indices[k].view(), outputs[k].view(), c.o);
    ++w.n.calls, ++w.n.big_rounds;
    w.check(outputs[k].all_are(outside[k], guard_value<T>()), "written outside the output");
    if (c.code != Code::ok) {
      ++w.n.invalid_index;
      w.check(
          st.code() == c.code && st.message().find(std::to_string(c.invalid)) != std::string::npos,
          std::string("status ") + code_name(st.code()) + " (" + st.message() + "), expected " +
              code_name(c.code) + " naming " + std::to_string(c.invalid));
      continue;
    }
    if (!st.ok()) {
      w.fail("status: " + st.message());
      continue;
    }
    const std::string d = outputs[k].mismatches_in_place(c.expected, same_bits<T>);
    w.check(d.empty(), "output: " + d);
  } while (!done.load() && w.failures < kReportedPerThread);
}

// ---------------------------------------------------------------------------------------------
// Read-only queries against answers taken before the threads started.

struct QueryAnswers {
  std::vector<std::string> kernel_names;
  std::vector<std::pair<int, PoolOptions>> pool_queries;
  std::vector<Ints> pool_shapes;
  std::vector<Status> pool_name_status;
  std::vector<std::string> pool_names;
  std::vector<UnpoolOptions> unpool_queries;
  std::vector<Ints> unpool_shapes;
  std::vector<std::string> unpool_names;
  std::vector<Status> unpool_name_status;
  bool cuda = false;
};

Ints query_shape(int nd) {
  return nd == 1 ? Ints{2, 3, 50} : nd == 2 ? Ints{2, 3, 20, 24} : Ints{1, 3, 8, 10, 12};
}

QueryAnswers query_answers() {
  QueryAnswers q;
  for (const KernelInfo& k : compiled_kernels()) q.kernel_names.push_back(k.name);
  for (int nd = 1; nd <= 3; ++nd) {
    for (int variant = 0; variant < 4; ++variant) {
      PoolOptions o;
      o.kernel_size = {variant == 0 ? 2 : 3};
      o.stride = {2};
      o.padding = {variant == 1 ? 1 : 0};
      o.dilation = {variant == 2 ? 2 : 1};
      o.ceil_mode = variant == 3;
      o.path = variant == 3 ? Path::general : Path::automatic;
      q.pool_queries.push_back({nd, o});
      Ints shape;
      max_pool_output_shape(nd, query_shape(nd), o, &shape);
      q.pool_shapes.push_back(shape);
      std::string name;
      q.pool_name_status.push_back(max_pool_kernel_name(nd, query_shape(nd), o, &name));
      q.pool_names.push_back(name);

      UnpoolOptions u;
      u.kernel_size = o.kernel_size;
      u.stride = o.stride;
      u.padding = o.padding;
      u.path = variant == 3 ? Path::winner : Path::automatic;
      if (variant == 2) u.output_size = Ints(nd, 1 << 20);  // out of range
      q.unpool_queries.push_back(u);
      max_unpool_output_shape(nd, query_shape(nd), u, &shape);
      q.unpool_shapes.push_back(shape);
      q.unpool_name_status.push_back(max_unpool_kernel_name(nd, query_shape(nd), u, &name));
      q.unpool_names.push_back(name);
    }
  }
  q.cuda = cuda_available();
  return q;
}

void query_loop(Worker& w, const QueryAnswers& q, const std::atomic<bool>& done) {
  do {
    w.context = "queries";
    std::vector<std::string> names;
    for (const KernelInfo& k : compiled_kernels()) names.push_back(k.name);
    w.check(names == q.kernel_names, "compiled_kernels() changed");
    for (size_t k = 0; k < q.pool_queries.size(); ++k) {
      const auto& [nd, o] = q.pool_queries[k];
      Ints shape;
      std::string name;
      const Status a = max_pool_output_shape(nd, query_shape(nd), o, &shape);
      const Status b = max_pool_kernel_name(nd, query_shape(nd), o, &name);
      w.check(a.ok() && shape == q.pool_shapes[k],
              "max_pool_output_shape " + describe(o) + ": " + a.message() + " " + str(shape));
      w.check(b.code() == q.pool_name_status[k].code() &&
                  b.message() == q.pool_name_status[k].message() && name == q.pool_names[k],
              "max_pool_kernel_name " + describe(o) + ": " + name + " " + b.message());
      const UnpoolOptions& u = q.unpool_queries[k];
      const Status c = max_unpool_output_shape(nd, query_shape(nd), u, &shape);
      if (c.ok()) w.check(shape == q.unpool_shapes[k], "max_unpool_output_shape " + describe(u));
      name.clear();
      const Status d = max_unpool_kernel_name(nd, query_shape(nd), u, &name);
      w.check(d.code() == q.unpool_name_status[k].code() &&
                  d.message() == q.unpool_name_status[k].message() &&
                  (!d.ok() || name == q.unpool_names[k]),
              "max_unpool_kernel_name " + describe(u) + ": " + name + " " + d.message());
    }
    w.check(cuda_available() == q.cuda && (poolgen_cuda_available() != 0) == q.cuda,
            "cuda_available() changed");
    w.check(std::string(dtype_name(DType::bf16)) == "bf16" && dtype_size(DType::i64) == 8,
            "dtype_name / dtype_size");
    c_api_round(w);
    ++w.n.queries;
  } while (!done.load() && w.failures < kReportedPerThread);
}

// ---------------------------------------------------------------------------------------------

// Runs `workers` worker threads (body(worker)) beside the big calls and the queries, then
// reports each thread's failures.
template <typename Body>
Counters run_stress(const Built& built, int workers, uint64_t seed, Body body) {
  set_num_threads(kPoolThreads);  // before any thread starts: kernels are not running
  set_min_parallel_bytes(0);        // every call shares the pool, small ones too
  const QueryAnswers answers = query_answers();
  std::atomic<bool> done{false};
  std::vector<Worker> ws;
  ws.reserve(workers + 3);
  for (int t = 0; t < workers; ++t) ws.emplace_back(t, seed + 7919 * t, &built);
  ws.emplace_back(workers, seed ^ 0xb16b16, &built);      // big pooling
  ws.emplace_back(workers + 1, seed ^ 0xb16b17, &built);  // big unpooling
  ws.emplace_back(workers + 2, seed ^ 0x9e77, &built);    // queries

  auto guarded = [](Worker& w, auto f) {
    return [&w, f] {
      try {
        f();
      } catch (const std::exception& e) {
        w.fail(std::string("exception: ") + e.what());
      }
    };
  };
  // The big calls (references computed first) of the first pair that pools and unpools: f32
  // with i64 indices where built. They and the queries run until the workers are done.
  std::thread big_pool, big_unpool;
  std::atomic<int> ready{0};  // big-call threads with their buffers made
  bool big_started = false;
  for (const auto& [value, index] : built.pool) {
    if (!test::unpool_kernel_built(value, index)) continue;
    with_types(value, index, [&](auto tv, auto ti) {
      using T = decltype(tv);
      using I = decltype(ti);
      auto calls = std::make_shared<const BigCalls<T, I>>(make_big_calls<T, I>(built));
      big_pool = std::thread(guarded(
          ws[workers], [&, calls] { big_pool_loop<T, I>(ws[workers], *calls, ready, done); }));
      big_unpool = std::thread(guarded(ws[workers + 1], [&, calls] {
        big_unpool_loop<T, I>(ws[workers + 1], *calls, ready, done);
      }));
    });
    big_started = true;
    break;
  }
  std::thread queries(
      guarded(ws[workers + 2], [&] { query_loop(ws[workers + 2], answers, done); }));
  // The workers start once the big calls run (their buffers take a while under TSan).
  while (big_started && ready.load() < 2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<std::thread> threads;
  std::atomic<int> finished{0};
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < workers; ++t) {
    threads.emplace_back(guarded(ws[t], [&, t] {
      body(ws[t]);
      if (++finished == workers) done = true;
    }));
  }
  for (std::thread& t : threads) t.join();
  done = true;
  if (big_pool.joinable()) big_pool.join();
  if (big_unpool.joinable()) big_unpool.join();
  queries.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  set_num_threads(0);
  set_min_parallel_bytes(-1);

  Counters total;
  for (const Worker& w : ws) {
    total.add(w.n);
    if (w.failures > 0) {
      std::ostringstream os;
      os << "thread " << w.id << ": " << w.failures << " failure(s); the first " << w.reports.size()
         << ":";
      for (const std::string& r : w.reports) os << "\n" << r;
      ADD_FAILURE() << os.str();
    }
  }
  EXPECT_TRUE(big_started || built.pool.empty()) << "no dtype pair for the big calls";
  std::cout << "[ STRESS   ] " << workers << " workers + 3, " << seconds << " s: " << total.calls
            << " calls (pool " << total.pool << ", unpool " << total.unpool << "; 1-D "
            << total.by_nd[1] << ", 2-D " << total.by_nd[2] << ", 3-D " << total.by_nd[3]
            << "; backward " << total.backward
            << "), fast pool kernels " << total.fast << ", gather-eligible unpools "
            << total.gather_eligible << ", general " << total.general << ", winner " << total.winner
            << " (unsupported " << total.winner_unsupported << "), invalid indices "
            << total.invalid_index << ", bad arguments " << total.bad_argument << ", N = 0 "
            << total.empty_batch << ", batch-less " << total.batchless << ", channels-last "
            << total.channels_last << ", strided " << total.strided << ", duplicates "
            << total.duplicates << ", C API " << total.c_api << ", query rounds " << total.queries
            << ", big rounds " << total.big_rounds << std::endl;
  EXPECT_GT(total.queries, 0);
  return total;
}

class Concurrency : public ::testing::Test {
 protected:
  void SetUp() override {
    built_ = what_is_built();
    if (built_.pool.empty() && built_.unpool.empty()) GTEST_SKIP() << "no CPU kernels built";
  }
  Built built_;
};

// Every kind of call at once, each checked against the reference.
TEST_F(Concurrency, MixedCallsMatchReference) {
  const int iterations = env_int("POOLGEN_STRESS_ITERATIONS", kDefaultIterations);
  const int workers = env_int("POOLGEN_STRESS_THREADS", kDefaultWorkers);
  const Counters n =
      run_stress(built_, workers, 0xc0ffee, [&](Worker& w) { worker_loop(w, iterations); });
  if (iterations >= 100) {  // enough calls that every kind was drawn
    EXPECT_GT(n.big_rounds, 0);
    for (int nd = 1; nd <= 3; ++nd) EXPECT_GT(n.by_nd[nd], 0) << nd << "-D";
    if (!built_.pool.empty()) {
      EXPECT_GT(n.pool, 0);
    }
    if (!built_.unpool.empty()) {
      EXPECT_GT(n.unpool, 0);
      EXPECT_GT(n.invalid_index, 0);
    }
    if (!built_.backward.empty()) {
      EXPECT_GT(n.backward, 0);
    }
    if (built_.any_fast_pool) {
      EXPECT_GT(n.fast, 0);
    }
    if (built_.any_winner) {
      EXPECT_GT(n.winner, 0);
    }
    if (!built_.duplicates.empty()) {
      EXPECT_GT(n.duplicates, 0);
    }
    EXPECT_GT(n.bad_argument, 0);
    EXPECT_GT(n.empty_batch, 0);
    EXPECT_GT(n.batchless, 0);
    EXPECT_GT(n.channels_last, 0);
    EXPECT_GT(n.strided, 0);
    EXPECT_GT(n.c_api, 0);
  }
}

// Only duplicate-index unpooling in every worker (beside the big calls): the latest in input
// order wins on every call, every path and layout, whatever the contention.
TEST_F(Concurrency, DuplicatesLatestWins) {
  if (built_.duplicates.empty()) GTEST_SKIP() << "no unpooling kernel of 16 bits or more";
  const int iterations = env_int("POOLGEN_STRESS_ITERATIONS", kDefaultIterations) / 4 + 1;
  const int workers = env_int("POOLGEN_STRESS_THREADS", kDefaultWorkers);
  const Built& b = built_;
  const Counters n = run_stress(built_, workers, 0xd00b1e, [&](Worker& w) {
    for (int iter = 0; iter < iterations; ++iter) {
      const int nd = static_cast<int>(w.rng.uniform(1, 3));
      const auto [value, index] = b.duplicates[w.rng.uniform(0, b.duplicates.size() - 1)];
      with_types(value, index,
                 [&](auto t, auto i) { duplicates_case<decltype(t), decltype(i)>(w, nd); });
    }
  });
  EXPECT_GT(n.duplicates, 0);
  if (built_.any_winner && iterations >= 20) {
    EXPECT_GT(n.winner, 0);
  }
}

}  // namespace
}  // namespace poolgen
