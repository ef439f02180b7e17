"""Loads the extension: poolgen's kernels, registered as the operators torch.ops.poolgen.*."""
import glob
import os

import torch

_found = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "_C*.so")))
if not _found:
    raise ImportError("poolgen.torch: the compiled extension (_C*.so) is missing; install the "
                      "package with `pip install --no-build-isolation ./python`")
torch.ops.load_library(_found[0])

ops = torch.ops.poolgen
