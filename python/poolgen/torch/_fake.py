"""Fake (meta) kernels of torch.ops.poolgen.*, for PyTorch 2's compiler stack (torch.compile,
torch.export, FakeTensor). poolgen's ops compute what aten's do, so their fake kernels are
aten's own on the same arguments: shapes (symbolic ones too), dtypes and memory formats come out
exactly as the real kernels give them. PyTorch 1.x has no such stack: nothing is registered."""
import torch
import torch.nn.functional as F

from . import _library  # noqa: F401  (the ops must exist first)

_register = getattr(torch.library, "register_fake", None) or getattr(torch.library,
                                                                     "impl_abstract", None)


def _lift(values, inner):
    """A 1-D window list as the 2-D one PyTorch runs it with (height 1 first)."""
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    return [inner] + values if values else []


def _pool(nd):
    def fake(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        if nd == 1:
            return torch.ops.aten.max_pool1d_with_indices(self, kernel_size, stride, padding,
                                                          dilation, ceil_mode)
        op = getattr(torch.ops.aten, f"max_pool{nd}d_with_indices")
        return op(self, kernel_size, stride, padding, dilation, ceil_mode)
    return fake


def _pool_backward(nd):
    def fake(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
        if nd == 1:  # through the 2-D op, as PyTorch runs 1-D pooling
            return torch.ops.aten.max_pool2d_with_indices_backward(
                grad_output.unsqueeze(-2), self.unsqueeze(-2), _lift(kernel_size, 1),
                _lift(stride, 1), _lift(padding, 0), _lift(dilation, 1), ceil_mode,
                indices.unsqueeze(-2)).squeeze(-2)
        op = getattr(torch.ops.aten, f"max_pool{nd}d_with_indices_backward")
        return op(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices)
    return fake


def _unpool(nd):
    def fake(self, indices, kernel_size, stride=(), padding=0, output_size=None):
        def expand(v, default=None):
            v = list(v) if isinstance(v, (list, tuple)) else [v]
            v = v or default
            return v * nd if len(v) == 1 else v
        kernel = expand(kernel_size)
        stride, padding = expand(stride, kernel), expand(padding)
        size = list(F._unpool_output_size(self, kernel, stride, padding, output_size))
        if nd == 1:  # through the 2-D op, as torch.nn.functional.max_unpool1d runs it
            return torch.ops.aten.max_unpool2d(self.unsqueeze(-1), indices.unsqueeze(-1),
                                               size + [1]).squeeze(-1)
        if nd == 2:
            return torch.ops.aten.max_unpool2d(self, indices, size)
        return torch.ops.aten.max_unpool3d(self, indices, size, stride, padding)
    return fake


def _unpool_backward(nd):
    def fake(grad_output, indices, kernel_size, stride=(), padding=0):
        return grad_output.new_empty(indices.shape)  # a gather's result: contiguous
    return fake


if _register is not None:
    for _nd in (1, 2, 3):
        _register(f"poolgen::max_pool{_nd}d_with_indices")(_pool(_nd))
        _register(f"poolgen::max_pool{_nd}d_with_indices_backward")(_pool_backward(_nd))
        _register(f"poolgen::max_unpool{_nd}d")(_unpool(_nd))
        _register(f"poolgen::max_unpool{_nd}d_backward")(_unpool_backward(_nd))
