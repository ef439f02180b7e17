// A plain, obviously-correct reference implementation of docs/semantics.md (max pooling
// with indices and max unpooling, PyTorch-exact). Loops over contiguous std::vector data with
// explicit shapes; no tricks, no speed. Tests compare the library against it.
//
// Shapes are in PyTorch order: (N, C, spatial...) or batch-less (C, spatial...).
#pragma once

#include <cstdint>
#include <vector>

#include "poolgen/poolgen.hpp"

namespace poolgen::ref {

#define POOLGEN_REF_FOR_EACH_TYPE(X) \
  X(float) X(double) X(f16_t) X(bf16_t) X(int8_t) X(uint8_t) X(int16_t) X(int32_t) X(int64_t)

// Per-dimension window parameters after defaults and broadcasting (nd entries each).
struct PoolWindow {
  Ints kernel, stride, padding, dilation;
  Ints padding_end;  // pooling: after each dimension's end (resolved by max_pool_output_shape)
  bool ceil_mode = false;
};

// Validates `options` for an nd-dimensional op and expands every list to nd entries.
Status expand_pool_options(int nd, const PoolOptions& options, PoolWindow* window);
Status expand_unpool_options(int nd, const UnpoolOptions& options, PoolWindow* window);

// Output extent of one pooled dimension (no validation).
int64_t pool_extent(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode);
// The same with p before the start and p_end after the end, by `rule`'s division (PyTorch's
// floor, ONNX Runtime's truncation, TensorFlow's (rest + s) / s).
int64_t pool_extent(int64_t in, int64_t k, int64_t s, int64_t p, int64_t p_end, int64_t d,
                    bool ceil_mode, PoolRule rule = PoolRule::pytorch);

// Output shape of max pooling; same error rules as the library.
Status max_pool_output_shape(int nd, const Ints& input_shape, const PoolOptions& options,
                             Ints* output_shape);

// Output shape of max unpooling; same error rules as the library.
Status max_unpool_output_shape(int nd, const Ints& input_shape, const UnpoolOptions& options,
                               Ints* output_shape);

// Number of elements of a shape (product; 1 for an empty shape).
int64_t numel(const Ints& shape);

// Max pooling. `input` holds numel(input_shape) elements, row-major. On success the output
// shape, values and indices (int64 offsets inside one (n, c) plane) are written.
template <typename T>
Status max_pool(int nd, const Ints& input_shape, const std::vector<T>& input,
                const PoolOptions& options, Ints* output_shape, std::vector<T>* values,
                std::vector<int64_t>* indices);

// Max unpooling. `values` and `indices` share `input_shape`. On success the output shape and
// data are written. An invalid index gives Code::index_out_of_range naming the first invalid
// index in input order and the plane size; the output is then left empty.
template <typename T>
Status max_unpool(int nd, const Ints& input_shape, const std::vector<T>& values,
                  const std::vector<int64_t>& indices, const UnpoolOptions& options,
                  Ints* output_shape, std::vector<T>* output);

// Max pooling's backward: grad_input (of `input_shape`) is zero, then within each (n, c) plane
// every grad_output element, in ascending (row-major) order, is added at the input position its
// index names, in T's arithmetic: f16_t and bf16_t widen to float, add and round back (to nearest,
// ties to even) after every addition, as PyTorch's CPU kernels do. An index outside the input
// plane is dropped. grad_output and indices have the pooled shape.
template <typename T>
Status max_pool_backward(int nd, const Ints& input_shape, const std::vector<T>& grad_output,
                         const std::vector<int64_t>& indices, const PoolOptions& options,
                         std::vector<T>* grad_input);

// Max unpooling's backward: grad_values (of `values_shape`, the indices' shape) gathers
// grad_output[n, c].flat[indices[n, c, i]]. An invalid index is Code::index_out_of_range, as in
// max_unpool, naming the first in input order.
template <typename T>
Status max_unpool_backward(int nd, const Ints& values_shape, const std::vector<T>& grad_output,
                           const std::vector<int64_t>& indices, const UnpoolOptions& options,
                           std::vector<T>* grad_values);

// Every value type of poolgen::DType (f16_t and bf16_t compare as the floats they hold).
#define POOLGEN_REF_DECLARE(T)                                                               \
  extern template Status max_pool<T>(int, const Ints&, const std::vector<T>&,                \
                                     const PoolOptions&, Ints*, std::vector<T>*,             \
                                     std::vector<int64_t>*);                                 \
  extern template Status max_unpool<T>(int, const Ints&, const std::vector<T>&,              \
                                       const std::vector<int64_t>&, const UnpoolOptions&,    \
                                       Ints*, std::vector<T>*);
POOLGEN_REF_FOR_EACH_TYPE(POOLGEN_REF_DECLARE)
#undef POOLGEN_REF_DECLARE

// The gradient types: the float value types.
#define POOLGEN_REF_FOR_EACH_GRADIENT_TYPE(X) X(float) X(double) X(f16_t) X(bf16_t)
#define POOLGEN_REF_DECLARE_BACKWARD(T)                                                      \
  extern template Status max_pool_backward<T>(int, const Ints&, const std::vector<T>&,       \
                                              const std::vector<int64_t>&,                   \
                                              const PoolOptions&, std::vector<T>*);          \
  extern template Status max_unpool_backward<T>(int, const Ints&, const std::vector<T>&,     \
                                                const std::vector<int64_t>&,                 \
                                                const UnpoolOptions&, std::vector<T>*);
POOLGEN_REF_FOR_EACH_GRADIENT_TYPE(POOLGEN_REF_DECLARE_BACKWARD)
#undef POOLGEN_REF_DECLARE_BACKWARD

}  // namespace poolgen::ref
