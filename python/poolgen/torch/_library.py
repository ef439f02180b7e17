"""Loads the extension: poolgen's kernels, registered as the operators torch.ops.poolgen.*."""
import torch

from .._adapters import check_built_for, compiled_library

try:
    from ._built_for import TORCH_VERSION as _BUILT_FOR  # written by setup.py
except ImportError:  # a source checkout
    _BUILT_FOR = torch.__version__
check_built_for("poolgen.torch", "PyTorch", _BUILT_FOR, torch.__version__,
                "install the poolgen wheel built for it, or build one against it (pip wheel "
                "--no-build-isolation ./python; docs/pytorch.md)")
torch.ops.load_library(compiled_library(__file__, "_C*.so", "poolgen.torch"))
from . import _C as calls  # noqa: E402  (the same library, as a Python module: fast entry points)

ops = torch.ops.poolgen
