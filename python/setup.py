"""Builds poolgen's PyTorch extension against the installed torch, linking poolgen's kernels
statically (no Halide or LLVM at run time):

    pip install --no-build-isolation ./python              # into this environment
    pip wheel --no-build-isolation --no-deps ./python      # a wheel for environments like it

The wheel's version carries the PyTorch it was built for (0.1.0+torch2.15.0.cu132), and the
package refuses to load under any other, saying which (poolgen/torch/_library.py).

POOLGEN_PREFIX names poolgen's install tree (`./scripts/build.sh` makes one in ./install, the
default); the extension links its libpoolgen.a, kernel archives and Halide runtime as its
pkg-config file lists them.
"""
import os
import pathlib
import re
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    import torch
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError:
    sys.exit("poolgen's PyTorch extension builds against an installed torch; none was found")

HERE = pathlib.Path(__file__).resolve().parent


def pkg_config(prefix):
    """Cflags and Libs of prefix's poolgen.pc, its ${variables} expanded."""
    found = sorted(prefix.glob("lib*/pkgconfig/poolgen.pc"))
    if not found:
        sys.exit(f"poolgen is not installed under {prefix}: run ./scripts/build.sh, or set "
                 "POOLGEN_PREFIX to an install tree")
    pc = found[0]
    variables = {"pcfiledir": str(pc.parent)}
    fields = {}
    expand = lambda text: re.sub(r"\$\{(\w+)\}", lambda m: variables[m.group(1)], text)
    for line in pc.read_text().splitlines():
        if m := re.match(r"^(\w+)=(.*)$", line):
            variables[m.group(1)] = expand(m.group(2))
        elif m := re.match(r"^(\w+):\s*(.*)$", line):
            fields[m.group(1)] = expand(m.group(2)).split()
    return fields["Cflags"], fields["Libs"]


class BuildPyRecordingTorch(build_py):
    """Records the PyTorch the extension is built against, for the import-time check."""

    def run(self):
        super().run()
        record = pathlib.Path(self.build_lib) / "poolgen" / "torch" / "_built_for.py"
        record.write_text(f"TORCH_VERSION = {torch.__version__!r}\n")


torch_major = int(torch.__version__.split(".")[0])
# CUDA tensors are served where PyTorch 2 was built with CUDA: the binding reaches streams and
# the caching allocator through c10's device-generic interfaces (no CUDA headers), and falls
# back to PyTorch's CUDA kernels (libtorch_cuda).
serves_cuda = torch_major >= 2 and torch.version.cuda is not None
prefix = pathlib.Path(os.environ.get("POOLGEN_PREFIX", HERE.parent / "install")).resolve()
cflags, libs = pkg_config(prefix)

# PEP 440 local label: 2.15.0+cu132 -> torch2.15.0.cu132.
torch_label = "torch" + re.sub(r"[^0-9a-zA-Z.]", ".", torch.__version__)

setup(
    version=f"0.1.0+{torch_label}",
    ext_modules=[
        CppExtension(
            "poolgen.torch._C",
            sources=[f"csrc/{name}.cpp" for name in ("binding", "ops", "dropin")],
            # Relinked whenever poolgen's archives or the binding's header change.
            depends=["csrc/binding.hpp"] + [str(a) for a in sorted(prefix.glob("lib*/**/*.a"))],
            include_dirs=[flag[2:] for flag in cflags if flag.startswith("-I")],
            # PyTorch 1.x builds extensions as C++14 by default; poolgen's binding is C++17.
            extra_compile_args=["-O2"] + (["-std=c++17"] if torch_major < 2 else []),
            define_macros=[("POOLGEN_TORCH_CUDA", "1" if serves_cuda else "0")],
            libraries=["torch_cuda"] if serves_cuda else [],
            # The kernels' and Halide runtime's symbols stay inside the extension; no debug
            # information (10 of its 25 MB built against Debian's torch).
            extra_link_args=["-Wl,--exclude-libs,ALL", "-Wl,--strip-debug", *libs],
        )
    ],
    cmdclass={"build_ext": BuildExtension, "build_py": BuildPyRecordingTorch},
)
