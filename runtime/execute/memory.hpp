// The runtime's own memory kernels: hand-written loops over views and bytes (element copies,
// zeroing, non-temporal copies, index shifts and range checks), each tested and timed on its own
// (tests/internals_test.cpp, bench/runtime_kernels_bench.cpp; docs/design.md, "Hand-written
// compute", says why none is a Halide kernel).
#pragma once

#include "core/view.hpp"

#include <cstddef>
#include <cstdint>

namespace poolgen::detail {

// Adds `offset` to every element of a host view of i32 or i64 indices.
void add_to_indices(const View& indices, int64_t offset);

// Copies every element of `from` into `to` (same shape and dtype, any strides): along the
// destination's unit-stride dimension, in register-transposed blocks where the source's is
// another (docs/kernels.md, "Packed copies").
void copy_elements(const View& from, const View& to);
// The same on the threads a call of its bytes shares (parallel_for), for a call's packed copies
// of its views: never from inside a parallel task.
void copy_elements_shared(const View& from, const View& to);

// Sets every element of a host view to zero bits: one memset when it is packed in `layout`.
void zero_elements(const View& view, Layout layout);
// The same where the caller has asked is_packed once (a repeated call's output).
void zero_elements(const View& view, bool packed);
// zero_elements on the threads a view of its bytes shares (parallel_for), a run of its bytes
// each, where it is packed in `layout`: never from inside a parallel task.
void zero_elements_shared(const View& view, Layout layout);

// Copies `bytes` from `from` to `to` with non-temporal stores where the target has them (x86-64:
// SSE2's, 16 bytes at a time after an aligning head), ordered before the function returns; a
// plain memcpy elsewhere.
void copy_streaming(void* to, const void* from, size_t bytes);

// Whether each of the `count` i32 or i64 indices at `indices` lies in [lo, hi), where
// 0 <= lo <= hi < 2^31 (x86-64: SSE2, four 32-bit words a step; no early exit).
bool indices_within(const void* indices, DType dtype, int64_t count, int64_t lo, int64_t hi);

}  // namespace poolgen::detail
