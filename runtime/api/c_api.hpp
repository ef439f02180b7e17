// The C API's plumbing, shared by c_api.cpp (which defines it) and c_api_backward.cpp: C structs
// to views and options, statuses to codes and messages; nothing is thrown across it. Out of
// line: each entry point only names what it converts.
#pragma once

#include "core/status.hpp"
#include "poolgen/poolgen.h"
#include "poolgen/poolgen.hpp"

#include <memory>
#include <type_traits>

// The C API's prepared call: the C++ API's.
struct poolgen_prepared {
  poolgen::PreparedCall call;
};

namespace poolgen::c_api {

// nd is 1, 2 or 3; bad_nd is the error for one that is not.
bool nd_ok(int32_t nd);
Status bad_nd(int32_t nd);

// A C tensor as a view (`argument` names it in messages): null pointers and ranks outside 2..5
// are invalid_argument.
Status tensor_view(const char* argument, const poolgen_tensor* t, TensorView* out);

// The C options as the C++ API's, in this thread's one PoolOptions (valid until the thread's
// next conversion): reusing its lists keeps a call free of heap allocations.
const PoolOptions& pool_options(int32_t nd, const poolgen_pool_options& o);

// Copies status's code out, and its message to `message` (truncated to `size`, NUL-terminated;
// it may be null).
int32_t report(const Status& status, char* message, size_t size);

// Runs body() without letting anything be thrown out, and returns its code and message
// (report). Templates rather than std::function, whose captures would be allocated per call.
template <typename F>
int32_t guarded(char* message, size_t size, F&& body) {
  return report(detail::without_exceptions(body), message, size);
}

// Checks shared by every entry point: nd, and options present.
Status check_call(int32_t nd, const void* options);

// The C tensors as views, in this thread's three TensorViews (pool_options' reason).
Status tensor_views(const char* const (&names)[3], const poolgen_tensor* const (&tensors)[3],
                    const TensorView* (&views)[3]);

// The C unpooling options as the C++ API's, checked, in this thread's one UnpoolOptions
// (pool_options' reason); pool_options' result for the pooling ops, which need no check.
Status cpp_options(int32_t nd, const poolgen_unpool_options& o, const UnpoolOptions** out);
inline Status cpp_options(int32_t nd, const poolgen_pool_options& o, const PoolOptions** out) {
  *out = &pool_options(nd, o);
  return {};
}
template <typename COptions>
using CppOptions = std::conditional_t<std::is_same_v<COptions, poolgen_pool_options>,
                                      PoolOptions, UnpoolOptions>;

// The ops of three tensors: checks nd and the options, converts the options, then the tensors
// (named as the C++ API names them), then returns op(nd, first, second, third, options).
template <typename COptions, typename Op>
Status with_tensors(int32_t nd, const COptions* options, const char* const (&names)[3],
                    const poolgen_tensor* const (&tensors)[3], Op&& op) {
  POOLGEN_RETURN_IF_ERROR(check_call(nd, options));
  const CppOptions<COptions>* o = nullptr;
  POOLGEN_RETURN_IF_ERROR(cpp_options(nd, *options, &o));
  const TensorView* views[3];
  POOLGEN_RETURN_IF_ERROR(tensor_views(names, tensors, views));
  return op(nd, *views[0], *views[1], *views[2], *o);
}

// An op's C entry point: its C++ function `op` called, or its prepare_* function `prepare`
// preparing the call into *prepared.
template <typename COptions, typename Fn>
int32_t run_entry(int32_t nd, const COptions* options, const char* const (&names)[3],
                  const poolgen_tensor* const (&tensors)[3], Fn op, char* message, size_t size) {
  return guarded(message, size, [&] { return with_tensors(nd, options, names, tensors, op); });
}
template <typename COptions, typename PrepareFn>
[[gnu::cold]] int32_t prepare_entry(int32_t nd, const COptions* options,
                                    const char* const (&names)[3],
                                    const poolgen_tensor* const (&tensors)[3], PrepareFn prepare,
                                    poolgen_prepared** prepared, char* message, size_t size) {
  return guarded(message, size, [&]() -> Status {
    if (!prepared) {
      return detail::fail(Code::invalid_argument, "prepared",
                          ": expected a place for the prepared call, got a null pointer");
    }
    *prepared = nullptr;
    auto call = std::make_unique<poolgen_prepared>();
    POOLGEN_RETURN_IF_ERROR(with_tensors(
        nd, options, names, tensors,
        [&](int n, const TensorView& a, const TensorView& b, const TensorView& c,
            const CppOptions<COptions>& o) { return prepare(n, a, b, c, o, &call->call); }));
    *prepared = call.release();
    return {};
  });
}

}  // namespace poolgen::c_api
