// The drop-in: poolgen kernels registered as the CPU (and, where PyTorch has CUDA, the CUDA)
// kernels of aten's own pooling ops, so that torch.nn.functional, nn.MaxPool*d / MaxUnpool*d
// and autograd run on poolgen unchanged. A registration object that is deleted gives PyTorch's
// kernels back. Each kernel serves what poolgen and the installed PyTorch both take; anything
// else (a dtype PyTorch refuses or poolgen has no kernel for, an argument poolgen refuses, out=
// tensors that need resizing) goes to PyTorch's own kernel, which raises where PyTorch raises
// (an invalid unpooling index is raised by poolgen itself, with PyTorch's message). Counters
// say which calls ran where, per device.
#include "binding.hpp"

#include <poolgen/poolgen.h>

#include <torch/library.h>
#include <torch/version.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

namespace poolgen_torch {
namespace {

using at::IntArrayRef;
using at::Tensor;

// The aten ops (overloads) the drop-in serves, in the order of the counters.
constexpr const char* kOps[] = {
    "max_pool2d_with_indices",           "max_pool2d_with_indices.out",
    "max_pool3d_with_indices",           "max_pool3d_with_indices.out",
    "max_pool2d_with_indices_backward",  "max_pool2d_with_indices_backward.grad_input",
    "max_pool3d_with_indices_backward",  "max_pool3d_with_indices_backward.grad_input",
    "max_unpool2d",                      "max_unpool2d.out",
    "max_unpool3d",                      "max_unpool3d.out"};
constexpr int kOpCount = sizeof kOps / sizeof kOps[0];
enum Op {
  pool2d, pool2d_out, pool3d, pool3d_out, pool2d_backward, pool2d_backward_out,
  pool3d_backward, pool3d_backward_out, unpool2d, unpool2d_out, unpool3d, unpool3d_out
};

constexpr int kDevices = 2;  // CPU, CUDA
std::atomic<int64_t> served[kDevices][kOpCount], fell_back[kDevices][kOpCount];
std::mutex reason_mutex;
std::string last_reason;  // the latest fallback's, for poolgen.torch.stats()

// PyTorch's kernel of each overload (the drop-in serves the dtypes it takes).
constexpr StockOp kStock[] = {
    StockOp::pool2d,          StockOp::pool2d,          StockOp::pool3d,
    StockOp::pool3d,          StockOp::pool2d_backward, StockOp::pool2d_backward,
    StockOp::pool3d_backward, StockOp::pool3d_backward, StockOp::unpool2d,
    StockOp::unpool2d,        StockOp::unpool3d,        StockOp::unpool3d};

// Runs `ours` when the installed PyTorch takes `self`'s dtype and layout for `op` on its device;
// true when poolgen served the call, else the reason is noted and the caller runs PyTorch's
// kernel. An invalid index raises PyTorch's error (its out= kernels may write before they find
// one: `stock` is its kernel on outputs of its own, asked for the message on the CPU).
template <typename F, typename Stock>
bool run(Op op, const Tensor& self, F ours, Stock stock) {
  std::string why;
  const at::ScalarType dtype = self.scalar_type();
  const at::DeviceType device = self.device().type();
  const int d = device == at::kCUDA ? 1 : 0;
  if (!pytorch_takes(kStock[op], dtype, device)) {
    why = std::string("PyTorch's kernel takes no ") + c10::toString(dtype);
  } else if (self.dim() == 4 && is_3d(kStock[op]) &&
             self.suggest_memory_format() == at::MemoryFormat::ChannelsLast) {
    // A batch-less input whose depth is its densest extent: PyTorch 2 refuses the layout.
    why = "input: a batch-less 3-D input in 2-D channels-last order, which PyTorch special-cases";
  } else {
    const Outcome outcome = ours();
    if (outcome.ok() || outcome.code == POOLGEN_INDEX_OUT_OF_RANGE) {
      served[d][op].fetch_add(1, std::memory_order_relaxed);
      if (!outcome.ok() && device == at::kCPU) raise_as_stock(outcome, stock);
      check(outcome);
      return true;
    }
    why = outcome.message;
  }
  fell_back[d][op].fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(reason_mutex);
  last_reason = std::string(kOps[op]) + ": " + why;
  return false;
}
template <typename F>
bool run(Op op, const Tensor& self, F ours) {
  return run(op, self, ours, [] {});  // pooling raises for no index
}

// A call the drop-in leaves to PyTorch's kernel (recorded as the reason, never raised).
Outcome refuse(const std::string& why) {
  return {POOLGEN_INVALID_ARGUMENT, POOLGEN_ERROR_OPTION, "", why};
}

// aten's unpooling ops take exactly nd output extents (and, in 3-D, strides above 0 and nd
// paddings); poolgen's by-indices unpooling would take more.
Outcome check_unpool_lists(int nd, IntArrayRef output_size, IntArrayRef stride = {},
                           IntArrayRef padding = {}) {
  const size_t n = static_cast<size_t>(nd);
  if (output_size.size() != n) return refuse("output_size: aten takes exactly nd entries");
  if (nd == 3 && (stride.size() != n || padding.size() != n)) {
    return refuse("stride, padding: aten takes exactly 3 entries");
  }
  for (int64_t s : stride) {
    if (s <= 0) return refuse("stride: aten takes entries above 0");
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// The kernels, with aten's signatures (aten_<op>).

template <int ND>
std::tuple<Tensor, Tensor> aten_max_pool(const Tensor& self, IntArrayRef kernel_size,
                                    IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                                    bool ceil_mode) {
  Tensor values, indices;
  if (run(ND == 2 ? pool2d : pool3d, self, [&] {
        return max_pool(self, {ND, kernel_size, stride, padding, dilation, ceil_mode},
                                       &values, &indices);
      })) {
    return {values, indices};
  }
  return ND == 2 ? POOLGEN_STOCK(self.device().type(), max_pool2d_with_indices, self, kernel_size, stride, padding, dilation,
                                                    ceil_mode)
                 : POOLGEN_STOCK(self.device().type(), max_pool3d_with_indices, self, kernel_size, stride, padding, dilation,
                                                    ceil_mode);
}

// out= tensors of the result's shape and dtype are written as they are; others (which PyTorch
// resizes) go to PyTorch's kernel.
template <int ND>
std::tuple<Tensor&, Tensor&> aten_max_pool_out(const Tensor& self, IntArrayRef kernel_size,
                                          IntArrayRef stride, IntArrayRef padding,
                                          IntArrayRef dilation, bool ceil_mode, Tensor& out,
                                          Tensor& indices) {
  if (run(ND == 2 ? pool2d_out : pool3d_out, self, [&] {
        return max_pool(self, {ND, kernel_size, stride, padding, dilation, ceil_mode},
                                       &out, &indices);
      })) {
    return {out, indices};
  }
  if (ND == 2) {
    POOLGEN_STOCK(self.device().type(), max_pool2d_with_indices_out, out, indices, self, kernel_size, stride, padding,
                                         dilation, ceil_mode);
  } else {
    POOLGEN_STOCK(self.device().type(), max_pool3d_with_indices_out, out, indices, self, kernel_size, stride, padding,
                                         dilation, ceil_mode);
  }
  return {out, indices};
}

template <int ND>
Tensor aten_max_pool_backward(const Tensor& grad_output, const Tensor& self, IntArrayRef kernel_size,
                         IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                         bool ceil_mode, const Tensor& indices) {
  Tensor grad_input;
  if (run(ND == 2 ? pool2d_backward : pool3d_backward, self, [&] {
        return max_pool_backward(
            grad_output, self, {ND, kernel_size, stride, padding, dilation, ceil_mode}, indices,
            &grad_input);
      })) {
    return grad_input;
  }
  return ND == 2 ? POOLGEN_STOCK(self.device().type(), max_pool2d_with_indices_backward, grad_output, self, kernel_size, stride,
                                                             padding, dilation, ceil_mode, indices)
                 : POOLGEN_STOCK(self.device().type(), max_pool3d_with_indices_backward, grad_output, self, kernel_size, stride,
                                                             padding, dilation, ceil_mode, indices);
}

template <int ND>
Tensor& aten_max_pool_backward_out(const Tensor& grad_output, const Tensor& self,
                              IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                              IntArrayRef dilation, bool ceil_mode, const Tensor& indices,
                              Tensor& grad_input) {
  if (run(ND == 2 ? pool2d_backward_out : pool3d_backward_out, self, [&] {
        return max_pool_backward(
            grad_output, self, {ND, kernel_size, stride, padding, dilation, ceil_mode}, indices,
            &grad_input);
      })) {
    return grad_input;
  }
  if (ND == 2) {
    POOLGEN_STOCK(self.device().type(), max_pool2d_with_indices_backward_out, grad_input, grad_output, self, kernel_size,
                                                  stride, padding, dilation, ceil_mode, indices);
  } else {
    POOLGEN_STOCK(self.device().type(), max_pool3d_with_indices_backward_out, grad_input, grad_output, self, kernel_size,
                                                  stride, padding, dilation, ceil_mode, indices);
  }
  return grad_input;
}

// aten's max_unpool2d has no window (its functional form computes the output size): poolgen
// unpools by the indices alone. PyTorch takes i64 indices only.
Outcome unpool_by_indices(int nd, const Tensor& self, const Tensor& indices,
                          IntArrayRef output_size, IntArrayRef stride, IntArrayRef padding,
                          Tensor* output) {
  if (indices.scalar_type() != at::kLong) return refuse("indices: aten takes int64 only");
  const Outcome lists = check_unpool_lists(nd, output_size, stride, padding);
  if (!lists.ok()) return lists;
  return max_unpool(self, indices, {nd, {}, {}, {}, output_size}, output);
}

// PyTorch's own unpooling kernels on outputs of their own: a call's fallback, and where poolgen
// finds an invalid index, the source of PyTorch's message for it (run).
Tensor stock_unpool2d(const Tensor& self, const Tensor& indices, IntArrayRef output_size) {
  return POOLGEN_STOCK(self.device().type(), max_unpool2d, self, indices, output_size);
}
Tensor stock_unpool3d(const Tensor& self, const Tensor& indices, IntArrayRef output_size,
                      IntArrayRef stride, IntArrayRef padding) {
  return POOLGEN_STOCK(self.device().type(), max_unpool3d, self, indices, output_size, stride,
                       padding);
}

Tensor aten_max_unpool2d(const Tensor& self, const Tensor& indices, IntArrayRef output_size) {
  Tensor output;
  const auto stock = [&] { return stock_unpool2d(self, indices, output_size); };
  if (run(unpool2d, self,
          [&] { return unpool_by_indices(2, self, indices, output_size, {}, {}, &output); },
          stock)) {
    return output;
  }
  return stock();
}

Tensor& aten_max_unpool2d_out(const Tensor& self, const Tensor& indices, IntArrayRef output_size,
                         Tensor& out) {
  if (!run(unpool2d_out, self,
           [&] { return unpool_by_indices(2, self, indices, output_size, {}, {}, &out); },
           [&] { stock_unpool2d(self, indices, output_size); })) {
    POOLGEN_STOCK(self.device().type(), max_unpool2d_out, out, self, indices, output_size);
  }
  return out;
}

Tensor aten_max_unpool3d(const Tensor& self, const Tensor& indices, IntArrayRef output_size,
                    IntArrayRef stride, IntArrayRef padding) {
  Tensor output;
  const auto stock = [&] { return stock_unpool3d(self, indices, output_size, stride, padding); };
  if (run(
          unpool3d, self,
          [&] { return unpool_by_indices(3, self, indices, output_size, stride, padding, &output); },
          stock)) {
    return output;
  }
  return stock();
}

Tensor& aten_max_unpool3d_out(const Tensor& self, const Tensor& indices, IntArrayRef output_size,
                         IntArrayRef stride, IntArrayRef padding, Tensor& out) {
  if (!run(
          unpool3d_out, self,
          [&] { return unpool_by_indices(3, self, indices, output_size, stride, padding, &out); },
          [&] { stock_unpool3d(self, indices, output_size, stride, padding); })) {
    POOLGEN_STOCK(self.device().type(), max_unpool3d_out, out, self, indices, output_size, stride, padding);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The switch and the counters (poolgen.torch.enable / disable / stats).

std::mutex switch_mutex;
// One registration object per dispatch key served (CPU; CUDA where PyTorch has it).
std::vector<std::unique_ptr<torch::Library>> registrations;

#if TORCH_VERSION_MAJOR < 2
// PyTorch 1.x warns, on every registration, that a kernel replaces one of aten's: replacing them
// is the drop-in's point, so its registrations run with those warnings dropped. (PyTorch 2 does
// not warn.)
class DropWarnings : public c10::WarningHandler {
  void process(const c10::SourceLocation&, const std::string&, const bool) override {}
};
#endif

// The drop-in's kernels as the kernels of `key` (CPU or CUDA).
std::unique_ptr<torch::Library> register_kernels(c10::DispatchKey key) {
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__,
                                              __LINE__);
  lib->impl(kOps[pool2d], TORCH_FN(aten_max_pool<2>));
  lib->impl(kOps[pool2d_out], TORCH_FN(aten_max_pool_out<2>));
  lib->impl(kOps[pool3d], TORCH_FN(aten_max_pool<3>));
  lib->impl(kOps[pool3d_out], TORCH_FN(aten_max_pool_out<3>));
  lib->impl(kOps[pool2d_backward], TORCH_FN(aten_max_pool_backward<2>));
  lib->impl(kOps[pool2d_backward_out], TORCH_FN(aten_max_pool_backward_out<2>));
  lib->impl(kOps[pool3d_backward], TORCH_FN(aten_max_pool_backward<3>));
  lib->impl(kOps[pool3d_backward_out], TORCH_FN(aten_max_pool_backward_out<3>));
  lib->impl(kOps[unpool2d], TORCH_FN(aten_max_unpool2d));
  lib->impl(kOps[unpool2d_out], TORCH_FN(aten_max_unpool2d_out));
  lib->impl(kOps[unpool3d], TORCH_FN(aten_max_unpool3d));
  lib->impl(kOps[unpool3d_out], TORCH_FN(aten_max_unpool3d_out));
  return lib;
}

// Turns the drop-in on or off; returns whether it was on.
bool set_dropin(bool on) {
  std::lock_guard<std::mutex> lock(switch_mutex);
  const bool was_on = !registrations.empty();
  if (on && !was_on) {
#if TORCH_VERSION_MAJOR < 2
    DropWarnings drop;
    c10::Warning::WarningHandlerGuard quiet(&drop);
#endif
    registrations.push_back(register_kernels(c10::DispatchKey::CPU));
#if POOLGEN_TORCH_CUDA
    registrations.push_back(register_kernels(c10::DispatchKey::CUDA));
#endif
  } else if (!on) {
    registrations.clear();
  }
  return was_on;
}

bool dropin_enabled() {
  std::lock_guard<std::mutex> lock(switch_mutex);
  return !registrations.empty();
}

std::vector<std::string> dropin_ops() { return std::vector<std::string>(kOps, kOps + kOpCount); }

// served, fell back, for each op in dropin_ops() order, on `device` ("cpu", "cuda"; "": both).
std::vector<int64_t> dropin_counts(const std::string& device) {
  std::vector<int64_t> counts;
  for (int op = 0; op < kOpCount; ++op) {
    int64_t s = 0, f = 0;
    for (int d = 0; d < kDevices; ++d) {
      if (!device.empty() && device != (d ? "cuda" : "cpu")) continue;
      s += served[d][op].load(std::memory_order_relaxed);
      f += fell_back[d][op].load(std::memory_order_relaxed);
    }
    counts.push_back(s);
    counts.push_back(f);
  }
  return counts;
}

std::string last_fallback() {
  std::lock_guard<std::mutex> lock(reason_mutex);
  return last_reason;
}

void reset_dropin_counts() {
  for (int d = 0; d < kDevices; ++d) {
    for (int op = 0; op < kOpCount; ++op) {
      served[d][op].store(0, std::memory_order_relaxed);
      fell_back[d][op].store(0, std::memory_order_relaxed);
    }
  }
  std::lock_guard<std::mutex> lock(reason_mutex);
  last_reason.clear();
}

}  // namespace
}  // namespace poolgen_torch

// Control ops, called by poolgen/torch/_dropin.py (they take no tensors).
TORCH_LIBRARY_FRAGMENT(poolgen, m) {
  m.def("_set_dropin(bool on) -> bool", &poolgen_torch::set_dropin);
  m.def("_dropin_enabled() -> bool", &poolgen_torch::dropin_enabled);
  m.def("_dropin_ops() -> str[]", &poolgen_torch::dropin_ops);
  m.def("_dropin_counts(str device) -> int[]", &poolgen_torch::dropin_counts);
  m.def("_cuda_check(bool wait) -> ()", &poolgen_torch::raise_cuda_reports);
  m.def("_serves_cuda() -> bool", [] { return bool(POOLGEN_TORCH_CUDA); });
  m.def("_dropin_last_fallback() -> str", &poolgen_torch::last_fallback);
  m.def("_reset_dropin_counts() -> ()", &poolgen_torch::reset_dropin_counts);
}
