"""Builds poolgen's framework adapters against the frameworks installed here, linking poolgen's
kernels statically (no Halide or LLVM at run time): poolgen.torch where torch is installed,
poolgen.tensorflow where tensorflow (or tensorflow-cpu) is, poolgen.openvino where openvino is,
poolgen.jax where jax (with jaxlib) is; poolgen.keras (Python only) with them; and poolgen.numpy
(poolgen's C API through ctypes) wherever numpy is.

    pip install --no-build-isolation ./python              # into this environment
    pip wheel --no-build-isolation --no-deps ./python      # a wheel for environments like it

The wheel's version carries the frameworks it was built for (0.1.0+torch2.15.0.cu132, or
0.1.0+torch2.15.0.cu132.tf2.21.0 with both), and each adapter refuses to load under another
version, saying which (poolgen/torch/_library.py, poolgen/tensorflow/__init__.py,
poolgen/openvino/__init__.py, poolgen/jax/__init__.py).

POOLGEN_PREFIX names poolgen's install tree (`./scripts/build.sh` makes one in ./install, the
default); the adapters link its libpoolgen.a, kernel archives and Halide runtime as its
pkg-config file lists them.
"""
import os
import pathlib
import re
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

from setuptools import Extension

try:
    import torch
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError:
    torch = None
try:
    import tensorflow as tf
except ImportError:
    tf = None
try:
    import importlib.metadata
    import openvino
    openvino_version = importlib.metadata.version("openvino")
except ImportError:
    openvino = None
try:
    import jax
    import jax.ffi
except ImportError:
    jax = None
try:
    import numpy
except ImportError:
    numpy = None
if torch is None and tf is None and openvino is None and jax is None and numpy is None:
    sys.exit("poolgen's adapters build against an installed torch, tensorflow, openvino, jax or "
             "numpy; none was found")

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


class BuildPyRecordingFrameworks(build_py):
    """Records the framework versions the adapters are built against, for the import-time check."""

    def run(self):
        super().run()
        for package, name, version in (
                ("torch", "TORCH_VERSION", torch and torch.__version__),
                ("tensorflow", "TENSORFLOW_VERSION", tf and tf.__version__),
                ("openvino", "OPENVINO_VERSION", openvino and openvino_version),
                ("jax", "JAX_VERSION", jax and jax.__version__)):
            if version is not None:
                record = pathlib.Path(self.build_lib) / "poolgen" / package / "_built_for.py"
                record.write_text(f"{name} = {version!r}\n")


def label(name, version):
    """A PEP 440 local label part: 2.15.0+cu132 -> torch2.15.0.cu132."""
    return name + re.sub(r"[^0-9a-zA-Z.]", ".", version)


prefix = pathlib.Path(os.environ.get("POOLGEN_PREFIX", HERE.parent / "install")).resolve()
cflags, libs = pkg_config(prefix)
includes = [flag[2:] for flag in cflags if flag.startswith("-I")]
archives = [str(a) for a in sorted(prefix.glob("lib*/**/*.a"))]
# The kernels' and Halide runtime's symbols stay inside each adapter; no debug information.
private_link = ["-Wl,--exclude-libs,ALL", "-Wl,--strip-debug", *libs]
extensions, packages, labels = [], ["poolgen"], []
build_ext = None

if torch is not None:
    torch_major = int(torch.__version__.split(".")[0])
    # CUDA tensors are served where PyTorch 2 was built with CUDA: the binding reaches streams
    # and the caching allocator through c10's device-generic interfaces (no CUDA headers), and
    # falls back to PyTorch's CUDA kernels (libtorch_cuda).
    serves_cuda = torch_major >= 2 and torch.version.cuda is not None
    # poolgen's shared calls run on PyTorch's intra-op threads (at::parallel_for, whose OpenMP
    # form is a pragma compiled into the binding): built with OpenMP where PyTorch's backend is
    # OpenMP, linked to the libgomp.so.1 that PyTorch has loaded (a wheel's own, by its soname).
    openmp = ["-fopenmp"] if "parallel backend: OpenMP" in torch.__config__.parallel_info() else []
    extensions.append(CppExtension(
        "poolgen.torch._C",
        sources=[f"csrc/torch/{name}.cpp" for name in ("binding", "ops", "dropin")],
        # Relinked whenever poolgen's archives or the binding's headers change.
        depends=["csrc/torch/binding.hpp", "csrc/bridge/bridge.hpp"] + archives,
        include_dirs=list(includes),  # (CppExtension extends the list it is given)
        # PyTorch 1.x builds extensions as C++14 by default; poolgen's binding is C++17.
        extra_compile_args=["-O2", *openmp] + (["-std=c++17"] if torch_major < 2 else []),
        define_macros=[("POOLGEN_TORCH_CUDA", "1" if serves_cuda else "0")],
        libraries=["torch_cuda"] if serves_cuda else [],
        extra_link_args=[*openmp, *private_link],
    ))
    packages.append("poolgen.torch")
    labels.append(label("torch", torch.__version__))
    build_ext = BuildExtension

if tf is not None:
    # A library TensorFlow loads (tf.load_op_library), built with its own flags (its headers,
    # C++ ABI and libtensorflow_framework).
    extensions.append(Extension(
        "poolgen.tensorflow._kernels",
        sources=["csrc/tensorflow/kernels.cc"],
        depends=["csrc/bridge/bridge.hpp"] + archives,
        include_dirs=list(includes),  # (CppExtension extends the list it is given)
        extra_compile_args=["-O2", "-Wno-deprecated-declarations", *tf.sysconfig.get_compile_flags()],
        extra_link_args=[*tf.sysconfig.get_link_flags(), *private_link],
        language="c++",
    ))
    packages.append("poolgen.tensorflow")
    labels.append(label("tf", tf.__version__))

if openvino is not None:
    # An extension library OpenVINO loads (core.add_extension), against the wheel's headers and
    # its versioned core and ONNX frontend libraries (already loaded where it is used).
    wheel = pathlib.Path(openvino.__file__).parent
    extensions.append(Extension(
        "poolgen.openvino._extension",
        sources=["csrc/openvino/extension.cpp"],
        depends=["csrc/bridge/bridge.hpp"] + archives,
        include_dirs=[*includes, str(wheel / "include")],
        extra_compile_args=["-O2", "-std=c++17", "-Wno-attributes"],
        extra_link_args=[*(str(next(wheel.glob(f"libs/lib{name}.so.*")))
                           for name in ("openvino", "openvino_onnx_frontend")), *private_link],
        language="c++",
    ))
    packages.append("poolgen.openvino")
    labels.append(label("ov", openvino_version))

if jax is not None:
    # A plain shared library of XLA FFI handlers, which poolgen.jax loads with ctypes and
    # registers as custom-call targets: only jaxlib's header-only FFI API, no library of JAX's.
    extensions.append(Extension(
        "poolgen.jax._ffi",
        sources=["csrc/jax/ffi.cpp"],
        depends=["csrc/bridge/bridge.hpp"] + archives,
        include_dirs=[*includes, jax.ffi.include_dir()],
        extra_compile_args=["-O2", "-std=c++17"],
        extra_link_args=private_link,
        language="c++",
    ))
    packages.append("poolgen.jax")
    labels.append(label("jax", jax.__version__))

if numpy is not None:
    # poolgen's C API and nothing else (as libpoolgen.so: runtime/libpoolgen.map), which
    # poolgen.numpy calls through ctypes: the runtime's archive linked whole, so that every C API
    # function is there to export.
    whole_runtime = [flag for flag in libs if flag.endswith("libpoolgen.a")]
    extensions.append(Extension(
        "poolgen.numpy._capi",
        sources=["csrc/numpy/capi.cpp"],
        depends=archives,
        include_dirs=list(includes),
        extra_compile_args=["-O2", "-std=c++17"],
        extra_link_args=["-Wl,--whole-archive", *whole_runtime, "-Wl,--no-whole-archive",
                         f"-Wl,--version-script={HERE.parent / 'runtime' / 'libpoolgen.map'}",
                         "-Wl,--strip-debug", *libs],
        language="c++",
    ))
    packages.append("poolgen.numpy")

packages.append("poolgen.keras")  # Python only: its layers run the adapters above

if torch is not None and any(not e.name.startswith("poolgen.torch") for e in extensions):
    from setuptools.command.build_ext import build_ext as plain_build_ext

    class BuildBoth(BuildExtension):
        """PyTorch's build for its extension; setuptools' own for the others, which must not see
        the include paths and flags PyTorch's adds (TensorFlow's protobuf headers are another
        version)."""

        def build_extensions(self):
            everything = self.extensions
            self.extensions = [e for e in everything if not e.name.startswith("poolgen.torch")]
            plain_build_ext.build_extensions(self)
            self.extensions = [e for e in everything if e.name.startswith("poolgen.torch")]
            super().build_extensions()
            self.extensions = everything

    build_ext = BuildBoth

cmdclass = {"build_py": BuildPyRecordingFrameworks}
if build_ext is not None:
    cmdclass["build_ext"] = build_ext

setup(
    version="0.1.0" + ("+" + ".".join(labels) if labels else ""),
    packages=packages,
    ext_modules=extensions,
    cmdclass=cmdclass,
)
