"""OpenVINO on poolgen: an extension library for OpenVINO's core.add_extension, with which its
ONNX frontend converts ONNX's MaxUnpool (opsets 9 and 11, with and without output_shape; OpenVINO
has no conversion of its own) and MaxPool nodes that have an Indices output to poolgen's ops.
OpenVINO's CPU device runs them with ONNX Runtime's results, bit for bit. MaxPool nodes without
Indices stay OpenVINO's own.

    import openvino as ov
    import poolgen.openvino
    core = ov.Core()
    core.add_extension(poolgen.openvino.EXTENSION)   # before read_model
    compiled = core.compile_model(core.read_model("segnet.onnx"), "CPU")

docs/openvino.md says more.
"""
import ctypes
import importlib.metadata

import openvino  # noqa: F401  (its libraries, which the extension links, loaded first)

from .._adapters import check_built_for, compiled_library

try:
    from ._built_for import OPENVINO_VERSION as _BUILT_FOR  # written by setup.py
except ImportError:  # a source checkout
    _BUILT_FOR = importlib.metadata.version("openvino")
check_built_for("poolgen.openvino", "OpenVINO", _BUILT_FOR, importlib.metadata.version("openvino"),
                "build poolgen against it (pip install --no-build-isolation ./python)")

EXTENSION = compiled_library(__file__, "_extension*.so", "poolgen.openvino")
"""The extension library's path, for core.add_extension."""

_library = ctypes.CDLL(EXTENSION)  # the library OpenVINO loads too
_served = _library.poolgen_openvino_served
_served.restype = ctypes.c_int64
_served.argtypes = [ctypes.c_int]
_library.poolgen_openvino_set_num_threads.argtypes = [ctypes.c_int]


def set_num_threads(n):
    """The threads poolgen's ops use: 1 unless set here (OpenVINO's INFERENCE_NUM_THREADS does
    not reach them, and inside OpenVINO's threads more were slower: docs/openvino.md)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive int, got {n!r}")
    _library.poolgen_openvino_set_num_threads(n)


def stats():
    """Calls poolgen served in this process: {"max_pool": n, "max_unpool": n}."""
    return {"max_pool": _served(0), "max_unpool": _served(1)}
