// What every error test shares: the checks of a refused call (its code, its message's form, its
// kind and argument, the guards around its output), and the calls each test breaks in one way
// (one per op, for the C++ and the C API). The tests are split by op: pool_test.cpp,
// unpool_test.cpp, backward_test.cpp, c_api_test.cpp, and tensors_test.cpp (dtypes, overlaps
// and the error kinds, across ops).
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>
#include <gtest/gtest.h>
#include "c_tensors.hpp"
#include "built_kernels.hpp"
#include "dtypes.hpp"
#include "lib_util.hpp"
#include "poolgen/poolgen.h"
#include "poolgen/poolgen.hpp"
#include "reference.hpp"
#include "test_util.hpp"
#include <regex>

namespace poolgen {

// An error's structured fields agree with its code and message: the argument is the message's
// first word, and the kind is one the code allows (docs/errors.md, "Error kinds").
inline ::testing::AssertionResult KindAndArgumentAgree(Code code, ErrorKind kind,
                                                const std::string& argument,
                                                const std::string& message) {
  const std::string prefix = message.substr(0, message.find(':'));
  if (code != Code::internal && prefix != argument) {
    return ::testing::AssertionFailure() << "argument \"" << argument << "\", expected \""
                                         << prefix << "\" (message: \"" << message << "\")";
  }
  bool allowed = false;
  switch (code) {
    case Code::ok: allowed = kind == ErrorKind::none; break;
    case Code::invalid_argument:
      allowed = kind == ErrorKind::option || kind == ErrorKind::tensor;
      break;
    case Code::index_out_of_range: allowed = kind == ErrorKind::index; break;
    case Code::unsupported:
      allowed = kind == ErrorKind::option || kind == ErrorKind::tensor ||
                kind == ErrorKind::no_kernel || kind == ErrorKind::no_device;
      break;
    case Code::internal: allowed = kind == ErrorKind::internal; break;
  }
  if (!allowed) {
    return ::testing::AssertionFailure() << "kind " << static_cast<int>(kind) << " for code "
                                         << static_cast<int>(code) << " (message: \"" << message
                                         << "\")";
  }
  return ::testing::AssertionSuccess();
}

// The status has `code`, its message has the uniform form "<argument>: expected ..., got ..."
// (docs/errors.md) and contains every one of `parts`; its kind and argument agree with them.
inline ::testing::AssertionResult IsError(const Status& s, Code code,
                                   const std::vector<std::string>& parts) {
  if (::testing::AssertionResult r =
          KindAndArgumentAgree(s.code(), s.kind(), s.argument(), s.message());
      !r) {
    return r;
  }
  if (s.code() != code) {
    return ::testing::AssertionFailure()
           << "code " << static_cast<int>(s.code()) << ", expected " << static_cast<int>(code)
           << " (message: \"" << s.message() << "\")";
  }
  static const std::regex kForm("^[a-z_]+: (.+ )?expected .+got.+");
  if (!std::regex_match(s.message(), kForm)) {
    return ::testing::AssertionFailure()
           << "message \"" << s.message() << "\" is not \"<argument>: expected ..., got ...\"";
  }
  for (const std::string& p : parts) {
    if (s.message().find(p) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message \"" << s.message() << "\" does not contain \"" << p << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

// A C API call's result `code` and `message` as a Status, with poolgen_last_error's kind and
// argument (its code must be `code`).
inline Status CStatus(int32_t code, const char* message) {
  const poolgen_error last = poolgen_last_error();
  const std::string text = code == POOLGEN_OK ? "" : message;
  if (last.code != code || (code != POOLGEN_OK && code != POOLGEN_INTERNAL &&
                            text.substr(0, text.find(':')) != last.argument)) {
    return Status(Code::internal, "poolgen_last_error: code " + std::to_string(last.code) +
                                      " naming \"" + last.argument + "\", expected code " +
                                      std::to_string(code) + " and the message's argument");
  }
  return Status(static_cast<Code>(code), text, static_cast<ErrorKind>(last.kind));
}

// The same for a C API result and message.
inline ::testing::AssertionResult CIsError(int32_t got, int32_t code, const char* message,
                                    const std::vector<std::string>& parts) {
  return IsError(CStatus(got, message), static_cast<Code>(code), parts);
}

template <typename Call, typename = void>
struct HasOutputGuard : std::false_type {};

template <typename Call>
struct HasOutputGuard<Call, std::void_t<decltype(std::declval<const Call&>().guards_ok())>>
    : std::true_type {};

// Calls whose whole output can be checked after a refusal (output_untouched()).
template <typename Call, typename = void>
struct HasUntouchedOutput : std::false_type {};

template <typename Call>
struct HasUntouchedOutput<
    Call, std::void_t<decltype(std::declval<const Call&>().output_untouched())>>
    : std::true_type {};

template <typename Call, typename Break, typename CodeT>
::testing::AssertionResult FailsOnce(Break breaks, CodeT code,
                                     const std::vector<std::string>& parts) {
  Call c;
  breaks(c);
  ::testing::AssertionResult r = ::testing::AssertionSuccess();
  if constexpr (std::is_same_v<decltype(c.run()), Status>) {
    r = IsError(c.run(), code, parts);
  } else {
    r = CIsError(c.run(), code, c.message, parts);
  }
  if constexpr (HasOutputGuard<Call>::value) {
    if (r && !c.guards_ok()) {
      return ::testing::AssertionFailure() << "elements around the output were written";
    }
  }
  if constexpr (HasUntouchedOutput<Call>::value) {
    if (r && static_cast<int>(code) != static_cast<int>(Code::index_out_of_range) &&
        !c.output_untouched()) {
      return ::testing::AssertionFailure() << "the refused call wrote its output";
    }
  }
  return r;
}

// The C++ calls (with kPrepare, their op's prepare_*), prepared.
template <typename Call, typename = void>
struct IsPreparable : std::false_type {};

template <typename Call>
struct IsPreparable<Call, std::void_t<decltype(Call::kPrepare)>> : std::true_type {};

// A broken call prepared on views of its shapes over data of their own (valid and apart, as a
// caller may prepare once on any buffers), then run on its own data: it fails alike, at prepare
// where the breakage is in the shapes, strides, dtypes or options (leaving the PreparedCall
// empty), at run where it is in the data alone.
template <typename Call, typename Break, typename CodeT>
::testing::AssertionResult FailsPrepared(Break breaks, CodeT code,
                                         const std::vector<std::string>& parts) {
  Call c;
  breaks(c);
  const std::array<TensorView, 3> v = c.views();
  ::testing::AssertionResult r = IsError(
      test::prepare_elsewhere_then_run(Call::kPrepare, c.nd, v[0], v[1], v[2], c.o, 1), code,
      parts);
  if (!r) return r << " (prepared)";
  return r;
}

// A default Call (PoolCall, UnpoolCall, CPool, CUnpool, the backward calls below) broken in one
// way by `breaks` (a function of Call&): running it fails with `code` and a message containing
// every one of `parts`; a call with guard elements around its output leaves them untouched, and
// one whose whole output is checked leaves it as it was unless the error is index_out_of_range
// (found while the output is written: docs/errors.md). Twice: on a thread of its own, whose
// runtime remembers no call, and after the valid default call on this thread, whose checks
// the runtime then remembers (runtime/ops/call_memo.hpp): a call breaking only its data (null, or
// overlapping) takes that plan, and must be refused all the same. The C++ calls then fail alike
// prepared (FailsPrepared).
template <typename Call, typename Break, typename CodeT>
::testing::AssertionResult FailsWhen(Break breaks, CodeT code,
                                     const std::vector<std::string>& parts) {
  ::testing::AssertionResult alone = ::testing::AssertionSuccess();
  std::thread([&] { alone = FailsOnce<Call>(breaks, code, parts); }).join();
  if (!alone) return alone << " (on a fresh thread)";
  Call valid;
  valid.run();
  ::testing::AssertionResult after = FailsOnce<Call>(breaks, code, parts);
  if (!after) return after << " (after a valid call of the default shapes)";
  if constexpr (IsPreparable<Call>::value) return FailsPrepared<Call>(breaks, code, parts);
  return after;
}

// A pooling call on small owned buffers whose pieces each test breaks in one way.
struct PoolCall {
  int nd = 2;
  Ints in_shape{1, 2, 6, 6};
  Ints out_shape{1, 2, 3, 3};
  std::vector<float> in = std::vector<float>(72, 1.0f);
  std::vector<float> vals = std::vector<float>(18);
  std::vector<int64_t> idx = std::vector<int64_t>(18);
  PoolOptions o;
  TensorView input, values, indices;

  PoolCall() {
    o.kernel_size = {2};
    input = contiguous(in.data(), in_shape);
    values = contiguous(vals.data(), out_shape);
    indices = contiguous(idx.data(), out_shape);
  }
  Status run() const { return max_pool(nd, input, values, indices, o); }
  static constexpr auto kPrepare = prepare_max_pool;
  std::array<TensorView, 3> views() const { return {input, values, indices}; }
  Status shape() const {
    Ints out;
    return max_pool_output_shape(nd, input.shape, o, &out);
  }
};

// ---------------------------------------------------------------------------------------------
// Unpooling.
struct UnpoolCall {
  int nd = 2;
  Ints in_shape{2, 1, 3, 3};
  Ints out_shape{2, 1, 6, 6};
  std::vector<float> vals = std::vector<float>(18, 2.0f);
  std::vector<int64_t> idx = std::vector<int64_t>(18, 0);
  std::vector<float> out = test::guarded_buffer<float>(72, test::kGuardF, 0.0f);
  UnpoolOptions o;
  TensorView values, indices, output;

  UnpoolCall() {
    o.kernel_size = {2};
    for (int64_t i = 0; i < 18; ++i) idx[i] = (i % 9) * 4;  // valid
    values = contiguous(vals.data(), in_shape);
    indices = contiguous(idx.data(), in_shape);
    output = contiguous(out.data() + test::kGuard, out_shape);
  }
  Status run() const { return max_unpool(nd, values, indices, output, o); }
  static constexpr auto kPrepare = prepare_max_unpool;
  std::array<TensorView, 3> views() const { return {values, indices, output}; }
  Status shape() const {
    Ints s;
    return max_unpool_output_shape(nd, values.shape, o, &s);
  }
  bool guards_ok() const { return test::guards_intact(out, test::kGuardF); }
};

static_assert(HasOutputGuard<UnpoolCall>::value && !HasOutputGuard<PoolCall>::value);

// ---------------------------------------------------------------------------------------------
// The C API.
inline constexpr size_t kMsg = 512;

using test::c_tensor;

// Invalid indices in many planes at once: the kernels may run planes on several threads, each
// finding an invalid index; the call must still report the first one in input order, cleanly
// (error reporting must be thread-safe), and write nothing outside its output.
// run(indices, options) makes the call with `indices` of (4, 32, 6, 6) into planes of 12x12
// (kernel 2) and returns its status and whether the guards around its output held.
template <typename Run>
void ExpectFirstOfManyInvalidIndicesNamed(Run run) {
  const Ints shape{4, 32, 6, 6};
  const int64_t n = test::numel(shape), plane_in = 36, plane_out = 144;
  std::vector<int64_t> indices(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = i % plane_in;
    indices[i] = (p / 6) * 24 + (p % 6) * 2;
  }
  for (int64_t pl = 0; pl < n / plane_in; ++pl) indices[pl * plane_in + 17] = 1000 + pl;
  indices[3 * plane_in + 5] = -3;  // the first invalid one in input order is still pl 0's 17
  set_min_parallel_bytes(0);  // share this small call across threads
  for (int threads : {0, 4, 16}) {
    set_num_threads(threads);
    for (Path path : {Path::automatic, Path::general}) {
      for (int rep = 0; rep < 20; ++rep) {
        UnpoolOptions o;
        o.kernel_size = {2};
        o.path = path;
        const auto [st, guards_ok] = run(contiguous(indices.data(), shape), o);
        ASSERT_TRUE(IsError(st, Code::index_out_of_range,
                            {"indices", "got 1000 at element 17", std::to_string(plane_out)}))
            << "threads " << threads << " path " << test::path_name(path);
        ASSERT_TRUE(guards_ok);
      }
    }
  }
  set_num_threads(0);
  set_min_parallel_bytes(-1);
}

// ---------------------------------------------------------------------------------------------
// Value and index dtypes: every value type (when compiled), indices i64 or i32.
inline bool pool_dtype_compiled(DType value) {
  for (const KernelInfo& k : compiled_kernels()) {
    if (k.op == "pool" && k.value_dtype == value) return true;
  }
  return false;
}

inline poolgen_tensor c_view(const TensorView& v) {
  poolgen_tensor t = c_tensor(v.data, static_cast<int32_t>(v.dtype), v.shape);
  std::copy(v.strides.begin(), v.strides.end(), t.strides);
  return t;
}

// ---------------------------------------------------------------------------------------------
// The backward ops: max_pool_backward and max_unpool_backward, every error through both APIs.
// Their output (grad_input, grad_values) sits between guard elements and is filled with a
// sentinel: a refused call must leave all of it as it was (index_out_of_range aside).
// Gradient dtypes, and the others (refused as gradients).
inline constexpr DType kGradientDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

inline constexpr DType kNonGradientDTypes[] = {DType::i64, DType::i32, DType::i16, DType::i8,
                                               DType::u8};

// The indices k2s2 pooling of a 6x6 plane can give: element i of a 3x3 plane names a position
// of its own 2x2 window (all four, as i varies).
inline int64_t window_index(int64_t i) {
  const int64_t o = i % 9;
  return (2 * (o / 3) + (i / 9) % 2) * 6 + 2 * (o % 3) + (i / 3) % 2;
}

// max_pool_backward, k2s2: grad_output and indices 1x2x3x3, grad_input 1x2x6x6.
struct PoolBackwardCall {
  int nd = 2;
  std::vector<float> grad = std::vector<float>(18);
  std::vector<int64_t> idx = std::vector<int64_t>(18);
  std::vector<int32_t> idx32 = std::vector<int32_t>(18);
  std::vector<float> gin = test::guarded_buffer<float>(72, test::kGuardF, test::kSentinelF);
  PoolOptions o;
  TensorView grad_output, indices, grad_input;

  PoolBackwardCall() {
    o.kernel_size = {2};
    for (int64_t i = 0; i < 18; ++i) {
      grad[i] = 0.25f * static_cast<float>(i + 1);
      idx[i] = window_index(i);
    }
    grad_output = contiguous(grad.data(), {1, 2, 3, 3});
    indices = contiguous(idx.data(), {1, 2, 3, 3});
    grad_input = contiguous(gin.data() + test::kGuard, {1, 2, 6, 6});
  }
  // The same indices as i32.
  void use_i32_indices() {
    for (size_t i = 0; i < idx.size(); ++i) idx32[i] = static_cast<int32_t>(idx[i]);
    indices = contiguous(idx32.data(), indices.shape);
  }
  Status run() const { return max_pool_backward(nd, grad_output, indices, grad_input, o); }
  static constexpr auto kPrepare = prepare_max_pool_backward;
  std::array<TensorView, 3> views() const { return {grad_output, indices, grad_input}; }
  Status kernel_name() const {
    std::string name;
    return max_pool_backward_kernel_name(nd, grad_output, indices.dtype, grad_input.shape, o,
                                         &name);
  }
  bool guards_ok() const { return test::guards_intact(gin, test::kGuardF); }
  bool output_untouched() const { return test::untouched(gin, test::kGuardF, test::kSentinelF); }
  // grad_input against the reference (contiguous f32 views of the default shapes).
  ::testing::AssertionResult LikeReference() const {
    std::vector<float> want;
    const Status st =
        ref::max_pool_backward<float>(nd, grad_input.shape, grad, idx, o, &want);
    if (!st.ok()) return ::testing::AssertionFailure() << "reference: " << st.message();
    return test::same_floats(want, test::inner(gin));
  }
};

// max_unpool_backward, k2s2: grad_output 2x1x6x6, indices and grad_values 2x1x3x3.
struct UnpoolBackwardCall {
  int nd = 2;
  std::vector<float> grad = std::vector<float>(72);
  std::vector<double> grad64 = std::vector<double>(72), gvals64 = std::vector<double>(18);  // f64
  std::vector<int64_t> idx = std::vector<int64_t>(18);
  std::vector<int32_t> idx32 = std::vector<int32_t>(18);
  std::vector<float> gvals = test::guarded_buffer<float>(18, test::kGuardF, test::kSentinelF);
  UnpoolOptions o;
  TensorView grad_output, indices, grad_values;

  UnpoolBackwardCall() {
    o.kernel_size = {2};
    for (int64_t i = 0; i < 72; ++i) grad[i] = 0.5f * static_cast<float>(i) - 3.0f;
    for (int64_t i = 0; i < 18; ++i) idx[i] = window_index(i);
    grad_output = contiguous(grad.data(), {2, 1, 6, 6});
    indices = contiguous(idx.data(), {2, 1, 3, 3});
    grad_values = contiguous(gvals.data() + test::kGuard, {2, 1, 3, 3});
  }
  void use_i32_indices() {
    for (size_t i = 0; i < idx.size(); ++i) idx32[i] = static_cast<int32_t>(idx[i]);
    indices = contiguous(idx32.data(), indices.shape);
  }
  Status run() const { return max_unpool_backward(nd, grad_output, indices, grad_values, o); }
  static constexpr auto kPrepare = prepare_max_unpool_backward;
  std::array<TensorView, 3> views() const { return {grad_output, indices, grad_values}; }
  Status kernel_name() const {
    std::string name;
    return max_unpool_backward_kernel_name(nd, grad_output, indices.dtype, grad_values.shape, o,
                                           &name);
  }
  bool guards_ok() const { return test::guards_intact(gvals, test::kGuardF); }
  bool output_untouched() const {
    return test::untouched(gvals, test::kGuardF, test::kSentinelF);
  }
  ::testing::AssertionResult LikeReference() const {
    std::vector<float> want;
    const Status st =
        ref::max_unpool_backward<float>(nd, grad_values.shape, grad, idx, o, &want);
    if (!st.ok()) return ::testing::AssertionFailure() << "reference: " << st.message();
    return test::same_floats(want, test::inner(gvals));
  }
};

static_assert(HasUntouchedOutput<PoolBackwardCall>::value &&
              HasUntouchedOutput<UnpoolBackwardCall>::value);

}  // namespace poolgen
