// The C API's plumbing, shared by c_api.cpp (which defines it) and c_api_backward.cpp: C structs
// to views and options, statuses to codes and messages; nothing is thrown across it. Out of
// line: each entry point only names what it converts.
#pragma once

#include "core/status.hpp"
#include "poolgen/poolgen.h"
#include "poolgen/poolgen.hpp"

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

// The ops of three tensors: checks nd and the options, converts the tensors (named as the C++
// API names them), then returns op(first, second, third).
template <typename Op>
Status with_tensors(int32_t nd, const void* options, const char* const (&names)[3],
                    const poolgen_tensor* const (&tensors)[3], Op&& op) {
  POOLGEN_RETURN_IF_ERROR(check_call(nd, options));
  const TensorView* views[3];
  POOLGEN_RETURN_IF_ERROR(tensor_views(names, tensors, views));
  return op(*views[0], *views[1], *views[2]);
}

// with_tensors for the unpooling ops, whose C options are converted (and checked) first.
using UnpoolOp = Status (*)(int, const TensorView&, const TensorView&, const TensorView&,
                            const UnpoolOptions&);
Status with_unpool_tensors(int32_t nd, const poolgen_unpool_options* options,
                           const char* const (&names)[3], const poolgen_tensor* const (&tensors)[3],
                           UnpoolOp op);

}  // namespace poolgen::c_api
