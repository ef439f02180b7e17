"""torch.nn.functional's max pooling with indices and max unpooling, on poolgen.

The signatures, defaults, results (values, indices, dtypes, memory formats) and exception types
are torch.nn.functional's: a call here gives what the same call there gives, bit for bit, with
poolgen's error messages. Gradients run on poolgen's backward kernels.
"""
import torch
import torch.nn.functional as F

from ._library import calls, ops

try:
    from torch.compiler import is_compiling as _compiling
except ImportError:  # PyTorch 1.13 has no torch.compile
    def _compiling():
        return False


__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "max_unpool1d", "max_unpool2d",
           "max_unpool3d"]


def _pool(nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    if _compiling():  # torch.compile traces the operator itself
        values, indices = getattr(ops, f"max_pool{nd}d_with_indices")(
            input, kernel_size, [] if stride is None else stride, padding, dilation, ceil_mode)
    else:  # the same operator, without torch.ops' argument matching (a microsecond)
        values, indices = calls.max_pool(nd, input, kernel_size, stride, padding, dilation,
                                         ceil_mode)
    return (values, indices) if return_indices else values


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _unpool(nd, input, indices, kernel_size, stride, padding, output_size):
    stride = [] if stride is None else stride
    output_size = None if output_size is None else list(output_size)
    try:
        if _compiling():
            return getattr(ops, f"max_unpool{nd}d")(input, indices, kernel_size, stride, padding,
                                                    output_size)
        return calls.max_unpool(nd, input, indices, kernel_size, stride, padding, output_size)
    except (RuntimeError, ValueError):
        # poolgen refuses unpooled extents below 1, which PyTorch's versions treat each its own
        # way (an empty tensor for 0; an error of its own for a negative extent): such calls
        # compute nothing, so PyTorch's functional answers them.
        if not _pytorch_unpools_to_nothing(nd, input, kernel_size, stride, padding, output_size):
            raise
        return getattr(F, f"max_unpool{nd}d")(input, indices, kernel_size, stride or None,
                                              padding, output_size)


def _pytorch_unpools_to_nothing(nd, input, kernel_size, stride, padding, output_size):
    """Whether torch.nn.functional computes an unpooled size with an extent below 1 for these
    arguments (by its own rule, torch.nn.functional._unpool_output_size)."""
    def expand(v, default=None):
        v = list(v) if isinstance(v, (list, tuple, torch.Size)) else [v]
        v = v or default
        return v * nd if len(v) == 1 else v
    try:
        kernel = expand(kernel_size)
        size = F._unpool_output_size(input, kernel, expand(stride, kernel), expand(padding),
                                     output_size)
    except Exception:  # noqa: BLE001  (PyTorch's own check raised: poolgen's error stands)
        return False
    return min(list(size)) < 1


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _unpool(3, input, indices, kernel_size, stride, padding, output_size)
