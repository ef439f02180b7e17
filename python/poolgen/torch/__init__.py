"""poolgen inside PyTorch.

- Explicit ops with autograd: torch.ops.poolgen.max_pool{1,2,3}d_with_indices,
  max_unpool{1,2,3}d and their *_backward ops; torch.nn.functional-style functions
  (poolgen.torch.max_pool2d, ...) and nn.Module classes (poolgen.torch.MaxPool2d, ...).
- The drop-in: enable() / disable() / `with enabled():` make PyTorch's own operators for CPU
  tensors (and CUDA tensors, where serves_cuda()) run on poolgen, models unchanged; stats() says
  which calls did.

Everything follows the installed PyTorch bit for bit (values, indices, gradients, dtypes, memory
formats, exception types); docs/pytorch.md has the details.
"""
from . import _fake  # noqa: F401  (registers the fake kernels on PyTorch 2)
from ._dropin import (cuda_check, disable, enable, enabled, is_enabled, reset_stats, serves_cuda,
                      stats)
from ._library import ops
from .functional import (max_pool1d, max_pool2d, max_pool3d, max_unpool1d, max_unpool2d,
                         max_unpool3d)
from .nn import MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d

__all__ = ["ops", "enable", "disable", "is_enabled", "enabled", "stats", "reset_stats",
           "serves_cuda", "cuda_check",
           "max_pool1d", "max_pool2d", "max_pool3d", "max_unpool1d", "max_unpool2d",
           "max_unpool3d", "MaxPool1d", "MaxPool2d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d",
           "MaxUnpool3d"]
