// The PyTorch binding's core: PyTorch tensors and arguments in, poolgen's C API calls, PyTorch's
// conventions out (output memory formats, exception types). Shared by the explicit ops (ops.cpp)
// and the drop-in kernels of aten's own ops (dropin.cpp). Only poolgen's C API is called: it
// passes no C++ standard-library type, so the extension works whatever C++ ABI torch was built
// with.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/max_pool2d_with_indices_backward_cpu_dispatch.h>
#include <ATen/ops/max_pool2d_with_indices_cpu_dispatch.h>
#include <ATen/ops/max_pool3d_with_indices_backward_cpu_dispatch.h>
#include <ATen/ops/max_pool3d_with_indices_cpu_dispatch.h>
#include <ATen/ops/max_unpool2d_cpu_dispatch.h>
#include <ATen/ops/max_unpool3d_cpu_dispatch.h>
#include <c10/util/Optional.h>

#include "../bridge/bridge.hpp"

// POOLGEN_TORCH_CUDA: the installed PyTorch has CUDA (setup.py), and poolgen serves its CUDA
// tensors too. It needs no CUDA header: streams, devices and the caching allocator are reached
// through c10's device-generic interfaces (PyTorch 2).
#ifndef POOLGEN_TORCH_CUDA
#define POOLGEN_TORCH_CUDA 0
#endif
#if POOLGEN_TORCH_CUDA
#include <ATen/ops/max_pool2d_with_indices_backward_cuda_dispatch.h>
#include <ATen/ops/max_pool2d_with_indices_cuda_dispatch.h>
#include <ATen/ops/max_pool3d_with_indices_backward_cuda_dispatch.h>
#include <ATen/ops/max_pool3d_with_indices_cuda_dispatch.h>
#include <ATen/ops/max_unpool2d_cuda_dispatch.h>
#include <ATen/ops/max_unpool3d_cuda_dispatch.h>
// PyTorch's own kernel `fn` for a tensor on `device` (at::cpu:: or at::cuda::, which bypass the
// dispatcher and so the drop-in).
#define POOLGEN_STOCK(device, fn, ...) \
  ((device) == at::kCUDA ? at::cuda::fn(__VA_ARGS__) : at::cpu::fn(__VA_ARGS__))
#else
#define POOLGEN_STOCK(device, fn, ...) at::cpu::fn(__VA_ARGS__)
#endif

#include <functional>
#include <string>

namespace poolgen_torch {

using poolgen_bridge::Outcome;

// Raises the exception PyTorch raises for such a failure, with poolgen's message: ValueError for
// an output_size (as torch.nn.functional.max_unpool*d does), the installed PyTorch's own type for
// a dtype it has no kernel for (RuntimeError in 1.13, NotImplementedError in 2.x), else
// RuntimeError.
[[noreturn]] void raise(const Outcome& outcome);
inline void check(const Outcome& outcome) {
  if (!outcome.ok()) raise(outcome);
}

// One pooling window as PyTorch's ops take it: lists of 1 or nd entries (stride may be empty).
struct PoolWindow {
  int nd;
  at::IntArrayRef kernel_size, stride, padding, dilation;
  bool ceil_mode;
};
struct UnpoolWindow {
  int nd;
  at::IntArrayRef kernel_size, stride, padding;  // kernel_size empty: by the indices alone
  at::OptionalIntArrayRef output_size;
};

// The ops, each allocating its outputs as the installed PyTorch does (dtype, shape, memory
// format) unless given outputs to fill (defined tensors of the right shape and dtype), then
// running poolgen. A failure leaves given outputs unspecified.
Outcome max_pool(const at::Tensor& self, const PoolWindow& w, at::Tensor* values,
                 at::Tensor* indices);
Outcome max_pool_backward(const at::Tensor& grad_output, const at::Tensor& self,
                          const PoolWindow& w, const at::Tensor& indices, at::Tensor* grad_input);
Outcome max_unpool(const at::Tensor& self, const at::Tensor& indices, const UnpoolWindow& w,
                   at::Tensor* output);
Outcome max_unpool_backward(const at::Tensor& grad_output, const at::Tensor& indices,
                            const UnpoolWindow& w, at::Tensor* grad_values);

// aten's kernels of these ops (POOLGEN_STOCK).
enum class StockOp { pool2d, pool3d, pool2d_backward, pool3d_backward, unpool2d, unpool3d };

inline bool is_3d(StockOp op) {
  return op == StockOp::pool3d || op == StockOp::pool3d_backward || op == StockOp::unpool3d;
}

// Whether the installed PyTorch's own kernel of `op` on `device` (CPU or CUDA) takes `dtype`
// (asked of that kernel once per triple): the drop-in serves no dtype PyTorch refuses.
bool pytorch_takes(StockOp op, at::ScalarType dtype, at::DeviceType device);

// Raises an invalid index poolgen found (`outcome`, on the CPU) as the installed PyTorch does:
// with the message its own kernel (`stock`, run on outputs of its own with deterministic mode
// off) raises for those arguments, poolgen's after it (poolgen's alone where `stock` raises
// nothing).
[[noreturn]] void raise_as_stock(const Outcome& outcome, const std::function<void()>& stock);

// Raises, as PyTorch's RuntimeError, an error a call on CUDA could only find once its kernels had
// run on the stream (an invalid unpooling index: poolgen writes nothing through it and reports
// it later, where PyTorch's kernels assert on the device); with `wait`, after every earlier
// call's kernels have run. Every op on CUDA tensors checks first, without waiting.
void raise_cuda_reports(bool wait);

}  // namespace poolgen_torch
