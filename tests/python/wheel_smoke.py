"""The PyTorch package as a user installs it from its wheel: run from outside any source tree by
scripts/test.sh (check_torch_wheel), in a fresh environment holding only the system's PyTorch.

    python3 -I wheel_smoke.py poolgen-*.whl

Checks what the wheel holds (the package and its extension: no Halide, no LLVM), one op
against PyTorch, the drop-in, and that under another PyTorch the import refuses, naming the one
the wheel was built for."""
import os
import subprocess
import sys
import zipfile

import torch
import torch.nn.functional as F

import poolgen.torch as pt

wheel = sys.argv[1]
names = zipfile.ZipFile(wheel).namelist()
foreign = [n for n in names if not n.startswith(("poolgen/", "poolgen-"))]
assert not foreign, f"the wheel holds more than the package: {foreign}"
assert not [n for n in names if "halide" in n.lower() or "llvm" in n.lower()], names
assert "site-packages" in pt.__file__, f"poolgen.torch imported from {pt.__file__}"

x = torch.randn(2, 3, 8, 8)
got = pt.max_pool2d(x, 2, return_indices=True)
want = F.max_pool2d(x, 2, return_indices=True)
assert all(torch.equal(g, w) for g, w in zip(got, want)), "max_pool2d differs from PyTorch's"

pt.reset_stats()
with pt.enabled():
    unpooled = F.max_unpool2d(*want, 2)
assert pt.stats()["max_unpool2d"]["poolgen"] == 1, pt.stats()
assert torch.equal(unpooled, F.max_unpool2d(*want, 2)), "the drop-in differs from PyTorch"

child = subprocess.run(
    [sys.executable, "-I", "-c", "import torch; torch.__version__ = '0.0.1'; import poolgen.torch"],
    capture_output=True, text=True, check=False)
assert child.returncode != 0, "the wheel loaded under another PyTorch"
assert f"built for PyTorch {torch.__version__}" in child.stderr and "0.0.1" in child.stderr, \
    child.stderr[-500:]

print(f"wheel: {os.path.basename(wheel)} ({os.path.getsize(wheel) / 1e6:.1f} MB) installs "
      f"and runs with PyTorch {torch.__version__}, and refuses another")
