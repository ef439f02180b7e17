"""Loads the extension: poolgen's kernels, registered as the operators torch.ops.poolgen.*."""
import glob
import os

import torch

try:
    from ._built_for import TORCH_VERSION as _BUILT_FOR  # written by setup.py
except ImportError:  # a source checkout
    _BUILT_FOR = torch.__version__
if _BUILT_FOR != torch.__version__:
    raise ImportError(f"poolgen.torch was built for PyTorch {_BUILT_FOR}, but this Python has "
                      f"PyTorch {torch.__version__}: install the poolgen wheel built for it, or "
                      "build one against it (pip wheel --no-build-isolation ./python; "
                      "docs/pytorch.md)")

_found = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "_C*.so")))
if not _found:
    raise ImportError("poolgen.torch: the compiled extension (_C*.so) is missing; install the "
                      "package with `pip install --no-build-isolation ./python`")
torch.ops.load_library(_found[0])
from . import _C as calls  # noqa: E402  (the same library, as a Python module: fast entry points)

ops = torch.ops.poolgen
