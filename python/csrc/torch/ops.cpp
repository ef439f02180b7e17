// torch.ops.poolgen: max pooling with indices, max unpooling and their backward passes, 1-D to
// 3-D, with aten's signatures where aten has the op (unpooling takes the window, as
// torch.nn.functional.max_unpool*d does, so that poolgen can pick its window kernels). CPU (and,
// where PyTorch has CUDA, CUDA) kernels run poolgen; Autograd kernels make the ops
// differentiable twice, as PyTorch's are. The Python module's two calls reach the forward ops
// without torch.ops' argument matching.
#include "binding.hpp"

#include <poolgen/poolgen.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <array>
#include <string>

namespace poolgen_torch {
namespace {

using at::IntArrayRef;
using at::OptionalIntArrayRef;
using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---------------------------------------------------------------------------------------------
// The kernels of the CPU and CUDA dispatch keys (the binding runs each on its tensors' device).

template <int ND>
std::tuple<Tensor, Tensor> max_pool_kernel(const Tensor& self, IntArrayRef kernel_size,
                                        IntArrayRef stride, IntArrayRef padding,
                                        IntArrayRef dilation, bool ceil_mode) {
  Tensor values, indices;
  check(max_pool(self, {ND, kernel_size, stride, padding, dilation, ceil_mode}, &values, &indices));
  return {std::move(values), std::move(indices)};
}

template <int ND>
Tensor max_pool_backward_kernel(const Tensor& grad_output, const Tensor& self, IntArrayRef kernel_size,
                             IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                             bool ceil_mode, const Tensor& indices) {
  Tensor grad_input;
  check(max_pool_backward(grad_output, self, {ND, kernel_size, stride, padding, dilation, ceil_mode},
                          indices, &grad_input));
  return grad_input;
}

template <int ND>
Tensor max_unpool_kernel(const Tensor& self, const Tensor& indices, IntArrayRef kernel_size,
                      IntArrayRef stride, IntArrayRef padding, OptionalIntArrayRef output_size) {
  Tensor output;
  check(max_unpool(self, indices, {ND, kernel_size, stride, padding, output_size}, &output));
  return output;
}

// grad_output's extents are the unpooled ones: they are the output_size poolgen checks, and a
// failure of that check is grad_output's.
template <int ND>
Tensor max_unpool_backward_kernel(const Tensor& grad_output, const Tensor& indices,
                               IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding) {
  const IntArrayRef sizes = grad_output.sizes();
  const IntArrayRef unpooled = sizes.size() >= ND ? sizes.slice(sizes.size() - ND) : sizes;
  Tensor grad_values;
  Outcome outcome = max_unpool_backward(grad_output, indices,
                                        {ND, kernel_size, stride, padding, unpooled}, &grad_values);
  if (outcome.argument == "output_size") {
    outcome.argument = "grad_output";
    outcome.kind = POOLGEN_ERROR_TENSOR;
    outcome.message = "grad_output: expected the unpooled extents of this window, got shape " +
                      c10::str(sizes) + " (" + outcome.message + ")";
  }
  check(outcome);
  return grad_values;
}

// ---------------------------------------------------------------------------------------------
// The ops through the dispatcher (so that the autograd functions' calls reach the CPU, meta or
// fake kernel below them, and their own gradients are recorded), for rank nd.

std::string schema(const char* format, int nd) {
  std::string s = format;
  for (size_t at; (at = s.find('#')) != std::string::npos;) s.replace(at, 1, std::to_string(nd));
  return s;
}

// The handle of op `format` (a name with # for the rank) of rank nd, found once.
template <typename Signature>
const c10::TypedOperatorHandle<Signature>& handle(const char* format, int64_t nd) {
  static const std::array<c10::TypedOperatorHandle<Signature>, 3> handles = [format] {
    auto find = [format](int n) {
      return c10::Dispatcher::singleton()
          .findSchemaOrThrow(schema(format, n).c_str(), "")
          .typed<Signature>();
    };
    return std::array<c10::TypedOperatorHandle<Signature>, 3>{find(1), find(2), find(3)};
  }();
  return handles[nd - 1];
}

// The kernels' signatures are the same at every rank.
const auto& pool_op(int64_t nd) {
  return handle<decltype(max_pool_kernel<1>)>("poolgen::max_pool#d_with_indices", nd);
}
const auto& pool_backward_op(int64_t nd) {
  return handle<decltype(max_pool_backward_kernel<1>)>("poolgen::max_pool#d_with_indices_backward",
                                                    nd);
}
const auto& unpool_op(int64_t nd) {
  return handle<decltype(max_unpool_kernel<1>)>("poolgen::max_unpool#d", nd);
}
const auto& unpool_backward_op(int64_t nd) {
  return handle<decltype(max_unpool_backward_kernel<1>)>("poolgen::max_unpool#d_backward", nd);
}

// The window lists an autograd node keeps for its backward.
void save_window(AutogradContext* ctx, IntArrayRef kernel_size, IntArrayRef stride,
                 IntArrayRef padding) {
  ctx->saved_data["kernel_size"] = kernel_size.vec();
  ctx->saved_data["stride"] = stride.vec();
  ctx->saved_data["padding"] = padding.vec();
}
std::vector<int64_t> saved_list(AutogradContext* ctx, const char* name) {
  return ctx->saved_data[name].toIntVector();
}

// ---------------------------------------------------------------------------------------------
// Autograd: pooling's gradient is poolgen's pooling backward, unpooling's its unpooling backward;
// the gradients of those (double backward) are PyTorch's: a gather by the indices, and its
// adjoint, a scatter-add. One autograd function per op serves every rank (nd is its first
// argument): each costs its translation unit seconds to compile.

struct MaxPool : public torch::autograd::Function<MaxPool> {
  static variable_list forward(AutogradContext* ctx, int64_t nd, const Tensor& self,
                               IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                               IntArrayRef dilation, bool ceil_mode) {
    at::AutoDispatchBelowADInplaceOrView below;
    // No zeros for the indices' gradient that never comes (an i64 tensor of the output's size,
    // filled each backward: 2 of pooling's 7 ms at 8x64x112x112); every backward here takes an
    // undefined gradient as zero.
    ctx->set_materialize_grads(false);
    auto [values, indices] =
        pool_op(nd).call(self, kernel_size, stride, padding, dilation, ceil_mode);
    ctx->save_for_backward({self, indices});
    save_window(ctx, kernel_size, stride, padding);
    ctx->saved_data["nd"] = nd;
    ctx->saved_data["dilation"] = dilation.vec();
    ctx->saved_data["ceil_mode"] = ceil_mode;
    ctx->mark_non_differentiable({indices});
    return {values, indices};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    Tensor grad_input;
    if (grads[0].defined()) {
      grad_input = pool_backward_op(ctx->saved_data["nd"].toInt())
                       .call(grads[0], saved[0], saved_list(ctx, "kernel_size"),
                             saved_list(ctx, "stride"), saved_list(ctx, "padding"),
                             saved_list(ctx, "dilation"), ctx->saved_data["ceil_mode"].toBool(),
                             saved[1]);
    }
    return {Tensor(), grad_input, Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

struct MaxPoolBackward : public torch::autograd::Function<MaxPoolBackward> {
  static variable_list forward(AutogradContext* ctx, int64_t nd, const Tensor& grad_output,
                               const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride,
                               IntArrayRef padding, IntArrayRef dilation, bool ceil_mode,
                               const Tensor& indices) {
    at::AutoDispatchBelowADInplaceOrView below;
    ctx->set_materialize_grads(false);
    ctx->save_for_backward({indices});
    ctx->saved_data["nd"] = nd;
    return {pool_backward_op(nd).call(grad_output, self, kernel_size, stride, padding, dilation,
                                      ceil_mode, indices)};
  }
  // grad_input[index] += grad_output: its derivative in grad_output gathers at the indices
  // (PyTorch's max_pool_double_backward); in the input it is zero.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const Tensor indices = ctx->get_saved_variables()[0];
    const int64_t nd = ctx->saved_data["nd"].toInt();
    Tensor gathered;
    if (grads[0].defined()) {
      gathered = grads[0].flatten(-nd).gather(-1, indices.flatten(-nd)).view_as(indices);
    }
    return {Tensor(), gathered, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(),
            Tensor()};
  }
};

struct MaxUnpool : public torch::autograd::Function<MaxUnpool> {
  static variable_list forward(AutogradContext* ctx, int64_t nd, const Tensor& self,
                               const Tensor& indices, IntArrayRef kernel_size, IntArrayRef stride,
                               IntArrayRef padding, OptionalIntArrayRef output_size) {
    at::AutoDispatchBelowADInplaceOrView below;
    ctx->set_materialize_grads(false);
    ctx->save_for_backward({indices});
    save_window(ctx, kernel_size, stride, padding);
    ctx->saved_data["nd"] = nd;
    return {unpool_op(nd).call(self, indices, kernel_size, stride, padding, output_size)};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Tensor grad_values;
    if (grads[0].defined()) {
      grad_values = unpool_backward_op(ctx->saved_data["nd"].toInt())
                        .call(grads[0], ctx->get_saved_variables()[0],
                              saved_list(ctx, "kernel_size"), saved_list(ctx, "stride"),
                              saved_list(ctx, "padding"));
    }
    return {Tensor(), grad_values, Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

struct MaxUnpoolBackward : public torch::autograd::Function<MaxUnpoolBackward> {
  static variable_list forward(AutogradContext* ctx, int64_t nd, const Tensor& grad_output,
                               const Tensor& indices, IntArrayRef kernel_size, IntArrayRef stride,
                               IntArrayRef padding) {
    at::AutoDispatchBelowADInplaceOrView below;
    ctx->set_materialize_grads(false);
    ctx->save_for_backward({grad_output, indices});
    ctx->saved_data["nd"] = nd;
    return {unpool_backward_op(nd).call(grad_output, indices, kernel_size, stride, padding)};
  }
  // grad_values = grad_output[indices], a gather: its derivative scatter-adds into grad_output.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const int64_t nd = ctx->saved_data["nd"].toInt();
    Tensor scattered;
    if (grads[0].defined()) {
      scattered = at::zeros_like(saved[0], at::MemoryFormat::Contiguous)
                      .flatten(-nd)
                      .scatter_add(-1, saved[1].flatten(-nd), grads[0].flatten(-nd))
                      .view_as(saved[0]);
    }
    return {Tensor(), scattered, Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

// The Autograd kernels record a node only where there is a gradient to compute, as PyTorch's
// own do; otherwise the kernel below runs directly (a node costs a microsecond or two a call,
// and its allocations around a large output's made glibc return and refault its pages).
bool records(const Tensor& differentiable) {
  return at::GradMode::is_enabled() && differentiable.requires_grad();
}

template <int ND>
std::tuple<Tensor, Tensor> max_pool_autograd(const Tensor& self, IntArrayRef kernel_size,
                                             IntArrayRef stride, IntArrayRef padding,
                                             IntArrayRef dilation, bool ceil_mode) {
  if (!records(self)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return pool_op(ND).call(self, kernel_size, stride, padding, dilation, ceil_mode);
  }
  const variable_list out =
      MaxPool::apply(int64_t{ND}, self, kernel_size, stride, padding, dilation, ceil_mode);
  return {out[0], out[1]};
}
template <int ND>
Tensor max_pool_backward_autograd(const Tensor& grad_output, const Tensor& self,
                                  IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                                  IntArrayRef dilation, bool ceil_mode, const Tensor& indices) {
  if (!records(grad_output)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return pool_backward_op(ND).call(grad_output, self, kernel_size, stride, padding, dilation,
                                     ceil_mode, indices);
  }
  return MaxPoolBackward::apply(int64_t{ND}, grad_output, self, kernel_size, stride, padding,
                                dilation, ceil_mode, indices)[0];
}
template <int ND>
Tensor max_unpool_autograd(const Tensor& self, const Tensor& indices, IntArrayRef kernel_size,
                           IntArrayRef stride, IntArrayRef padding,
                           OptionalIntArrayRef output_size) {
  if (!records(self)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return unpool_op(ND).call(self, indices, kernel_size, stride, padding, output_size);
  }
  return MaxUnpool::apply(int64_t{ND}, self, indices, kernel_size, stride, padding,
                          output_size)[0];
}
template <int ND>
Tensor max_unpool_backward_autograd(const Tensor& grad_output, const Tensor& indices,
                                    IntArrayRef kernel_size, IntArrayRef stride,
                                    IntArrayRef padding) {
  if (!records(grad_output)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return unpool_backward_op(ND).call(grad_output, indices, kernel_size, stride, padding);
  }
  return MaxUnpoolBackward::apply(int64_t{ND}, grad_output, indices, kernel_size, stride,
                                  padding)[0];
}

// ---------------------------------------------------------------------------------------------

template <int ND>
void define_ops(torch::Library& m) {
  m.def(schema("max_pool#d_with_indices(Tensor self, int[#] kernel_size, int[#] stride=[], "
               "int[#] padding=0, int[#] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
               ND).c_str());
  m.def(schema("max_pool#d_with_indices_backward(Tensor grad_output, Tensor self, "
               "int[#] kernel_size, int[#] stride, int[#] padding, int[#] dilation, "
               "bool ceil_mode, Tensor indices) -> Tensor",
               ND).c_str());
  m.def(schema("max_unpool#d(Tensor self, Tensor indices, int[#] kernel_size, int[#] stride=[], "
               "int[#] padding=0, int[]? output_size=None) -> Tensor",
               ND).c_str());
  m.def(schema("max_unpool#d_backward(Tensor grad_output, Tensor indices, int[#] kernel_size, "
               "int[#] stride=[], int[#] padding=0) -> Tensor",
               ND).c_str());
}

// The four ops of rank ND in `m`, the kernels of one dispatch key.
template <int ND, typename Pool, typename PoolBackward, typename Unpool, typename UnpoolBackward>
void implement(torch::Library& m, Pool pool, PoolBackward pool_backward, Unpool unpool,
               UnpoolBackward unpool_backward) {
  m.impl(schema("max_pool#d_with_indices", ND).c_str(), pool);
  m.impl(schema("max_pool#d_with_indices_backward", ND).c_str(), pool_backward);
  m.impl(schema("max_unpool#d", ND).c_str(), unpool);
  m.impl(schema("max_unpool#d_backward", ND).c_str(), unpool_backward);
}

template <int ND>
void implement_kernels(torch::Library& m) {
  implement<ND>(m, TORCH_FN(max_pool_kernel<ND>), TORCH_FN(max_pool_backward_kernel<ND>),
                TORCH_FN(max_unpool_kernel<ND>), TORCH_FN(max_unpool_backward_kernel<ND>));
}
template <int ND>
void implement_autograd(torch::Library& m) {
  implement<ND>(m, TORCH_FN(max_pool_autograd<ND>), TORCH_FN(max_pool_backward_autograd<ND>),
                TORCH_FN(max_unpool_autograd<ND>), TORCH_FN(max_unpool_backward_autograd<ND>));
}

}  // namespace
}  // namespace poolgen_torch

TORCH_LIBRARY(poolgen, m) {
  poolgen_torch::define_ops<1>(m);
  poolgen_torch::define_ops<2>(m);
  poolgen_torch::define_ops<3>(m);
}

TORCH_LIBRARY_IMPL(poolgen, CPU, m) {
  poolgen_torch::implement_kernels<1>(m);
  poolgen_torch::implement_kernels<2>(m);
  poolgen_torch::implement_kernels<3>(m);
}

#if POOLGEN_TORCH_CUDA
TORCH_LIBRARY_IMPL(poolgen, CUDA, m) {
  poolgen_torch::implement_kernels<1>(m);
  poolgen_torch::implement_kernels<2>(m);
  poolgen_torch::implement_kernels<3>(m);
}
#endif

TORCH_LIBRARY_IMPL(poolgen, Autograd, m) {
  poolgen_torch::implement_autograd<1>(m);
  poolgen_torch::implement_autograd<2>(m);
  poolgen_torch::implement_autograd<3>(m);
}

namespace {

namespace py = pybind11;
using Ints = std::vector<int64_t>;

// A window argument as torch.nn.functional takes it, an int or a list or tuple of ints, as the
// operators take it: 1 or nd entries (None, a stride's default: none). Done here, not in Python,
// where it was 0.36 us of a 2.5 us call (PyTorch's own call: 2.0 us).
Ints window_list(py::handle v, const char* name, bool none_is_empty = false) {
  if (none_is_empty && v.is_none()) return {};
  auto type_name = [](py::handle x) { return std::string(py::str(x.get_type().attr("__name__"))); };
  if (!PyList_Check(v.ptr()) && !PyTuple_Check(v.ptr())) {
    try {
      return {v.cast<int64_t>()};
    } catch (const py::cast_error&) {
      throw py::type_error(std::string(name) + ": expected an int or a tuple of ints, got " +
                           type_name(v));
    }
  }
  Ints list;
  for (py::handle entry : v) {
    try {
      list.push_back(entry.cast<int64_t>());
    } catch (const py::cast_error&) {
      throw py::type_error(std::string(name) + ": expected an int or a tuple of ints, got a " +
                           type_name(v) + " holding " + type_name(entry));
    }
  }
  return list;
}

}  // namespace

// The forward ops for poolgen.torch's functions, called through the dispatcher like torch.ops'
// (autograd, fake tensors and tracing see the same operators) but without torch.ops' matching
// of Python arguments against the schema, a microsecond a call.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using at::Tensor;
  m.def("max_pool", [](int64_t nd, const Tensor& self, py::handle kernel_size, py::handle stride,
                       py::handle padding, py::handle dilation, bool ceil_mode) {
    const Ints k = window_list(kernel_size, "kernel_size"),
               s = window_list(stride, "stride", true), p = window_list(padding, "padding"),
               d = window_list(dilation, "dilation");
    HANDLE_TH_ERRORS
    TORCH_CHECK(nd >= 1 && nd <= 3, "nd: expected 1, 2 or 3, got ", nd);
    py::gil_scoped_release unlocked;
    return poolgen_torch::pool_op(nd).call(self, k, s, p, d, ceil_mode);
    END_HANDLE_TH_ERRORS_PYBIND
  });
  m.def("max_unpool", [](int64_t nd, const Tensor& self, const Tensor& indices,
                         py::handle kernel_size, py::handle stride, py::handle padding,
                         c10::optional<Ints> output_size) {
    const Ints k = window_list(kernel_size, "kernel_size"),
               s = window_list(stride, "stride", true), p = window_list(padding, "padding");
    HANDLE_TH_ERRORS
    TORCH_CHECK(nd >= 1 && nd <= 3, "nd: expected 1, 2 or 3, got ", nd);
    py::gil_scoped_release unlocked;
    return poolgen_torch::unpool_op(nd).call(self, indices, k, s, p,
                                              output_size ? at::OptionalIntArrayRef(*output_size)
                                                          : at::OptionalIntArrayRef());
    END_HANDLE_TH_ERRORS_PYBIND
  });
}
