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

#include <ATen/ops/empty_like.h>
#include <ATen/ops/max_unpool2d.h>
#include <ATen/ops/max_unpool3d.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/library.h>
#include <torch/version.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

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
    "max_unpool3d",                      "max_unpool3d.out",
    // Not aten operators: the gradients autograd takes of max_unpool2d and max_unpool3d (aten
    // computes them with gather), served by the drop-in's Autograd kernels of those ops.
    "max_unpool2d_backward",             "max_unpool3d_backward"};
constexpr int kOpCount = sizeof kOps / sizeof kOps[0];
enum Op {
  pool2d, pool2d_out, pool3d, pool3d_out, pool2d_backward, pool2d_backward_out,
  pool3d_backward, pool3d_backward_out, unpool2d, unpool2d_out, unpool3d, unpool3d_out,
  unpool2d_backward, unpool3d_backward
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
    StockOp::unpool2d,        StockOp::unpool3d,        StockOp::unpool3d,
    StockOp::unpool2d,        StockOp::unpool3d};

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
    return {std::move(values), std::move(indices)};  // no reference counting
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
// Unpooling's gradient. aten has no operator for it: autograd's node of max_unpool2d/3d gathers
// the output's gradient at the indices. The drop-in's Autograd kernels of those two ops record a
// node of their own, whose backward runs poolgen's gather, and keep the rest of aten's: the
// forward through the dispatcher (to the drop-in's kernel), the forward-mode tangent (unpooling
// is linear in self), and aten's formula wherever the gradient must be differentiable itself
// (create_graph), is traced (fake tensors, subclasses: a Python key) or is not poolgen's to serve.

// aten's formula (autograd's max_pool_double_backward).
Tensor stock_unpool_gradient(int64_t nd, const Tensor& grad, const Tensor& indices) {
  if (indices.numel() == 0) return at::empty_like(indices, grad.options());
  std::vector<int64_t> flat(indices.sizes().begin(), indices.sizes().end() - nd);
  flat.push_back(-1);
  return grad.contiguous(indices.suggest_memory_format())
      .view(flat)
      .gather(-1, indices.view(flat))
      .view(indices.sizes());
}

// A tensor poolgen can read: PyTorch's own, with memory (not a fake tensor or a subclass, which
// have a Python key, nor a functorch wrapper, which has no storage).
bool plain(const Tensor& t) {
  return t.has_storage() && !t.key_set().has(c10::DispatchKey::Python);
}

Tensor unpool_gradient(int64_t nd, const Tensor& grad, const Tensor& indices) {
  const auto stock = [&] { return stock_unpool_gradient(nd, grad, indices); };
  if (at::GradMode::is_enabled() || !plain(grad) || !plain(indices) || indices.numel() == 0) {
    return stock();
  }
  Tensor grad_values;
  const auto ours = [&] {
    const IntArrayRef sizes = grad.sizes();
    return max_unpool_backward(grad, indices,
                               {static_cast<int>(nd), {}, {}, {}, sizes.slice(sizes.size() - nd)},
                               &grad_values);
  };
  if (run(nd == 2 ? unpool2d_backward : unpool3d_backward, grad, ours, [&] { stock(); })) {
    return grad_values;
  }
  return stock();
}

// The node, built as aten's generated Autograd kernels build theirs (a C++ autograd Function
// would refuse functorch's transforms, which aten's nodes serve).
struct UnpoolGradientNode : public torch::autograd::Node {
  int64_t nd = 2;
  torch::autograd::SavedVariable indices;

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    return {grads[0].defined() ? unpool_gradient(nd, grads[0], indices.unpack()) : Tensor()};
  }
  std::string name() const override { return "MaxUnpoolBackward (poolgen)"; }
  void release_variables() override { indices.reset_data(); }
};

// A new node, held as the installed PyTorch holds them (std::shared_ptr in 1.x, intrusive_ptr
// in later versions).
template <typename T>
auto make_node() {
  if constexpr (std::is_base_of_v<c10::intrusive_ptr_target, torch::autograd::Node>) {
    return c10::make_intrusive<T>();
  } else {
    return std::make_shared<T>();
  }
}

Tensor autograd_max_unpool(int64_t nd, const Tensor& self, const Tensor& indices,
                           IntArrayRef output_size, IntArrayRef stride, IntArrayRef padding) {
  decltype(make_node<UnpoolGradientNode>()) node;
  if (torch::autograd::compute_requires_grad(self)) {
    node = make_node<UnpoolGradientNode>();
    node->set_next_edges(torch::autograd::collect_next_edges(self));
    node->nd = nd;
    node->indices = torch::autograd::SavedVariable(indices, /*is_output=*/false);
  }
  const auto unpool = [&](const Tensor& values) {
    return nd == 2 ? at::max_unpool2d(values, indices, output_size)
                   : at::max_unpool3d(values, indices, output_size, stride, padding);
  };
  Tensor result;
  {
    at::AutoDispatchBelowADInplaceOrView below;
    result = unpool(self);
  }
  if (node) torch::autograd::set_history(result, node);
  const Tensor tangent = self._fw_grad(/*level=*/0);  // forward-mode AD's, as aten's kernels
  if (tangent.defined()) result._set_fw_grad(unpool(tangent), 0, /*is_inplace_op=*/false);
  return result;
}
Tensor autograd_max_unpool2d(const Tensor& self, const Tensor& indices, IntArrayRef output_size) {
  return autograd_max_unpool(2, self, indices, output_size, {}, {});
}
Tensor autograd_max_unpool3d(const Tensor& self, const Tensor& indices, IntArrayRef output_size,
                             IntArrayRef stride, IntArrayRef padding) {
  return autograd_max_unpool(3, self, indices, output_size, stride, padding);
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

// The Autograd kernels (unpooling's gradient) of CPU tensors. (CUDA tensors keep aten's: the
// drop-in's CUDA gradient is not measured on a GPU yet.)
std::unique_ptr<torch::Library> register_gradients() {
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                              c10::DispatchKey::AutogradCPU, __FILE__, __LINE__);
  lib->impl("max_unpool2d", TORCH_FN(autograd_max_unpool2d));
  lib->impl("max_unpool3d", TORCH_FN(autograd_max_unpool3d));
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
    registrations.push_back(register_gradients());
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
