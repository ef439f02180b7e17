"""JAX on poolgen: max pooling with indices and max unpooling by them, as XLA FFI custom calls
(CPU), with Flax's conventions and PyTorch's semantics.

    import poolgen.jax as pj
    values, indices = pj.max_pool(x, (2, 2), strides=(2, 2))      # x: (N, H, W, C)
    restored = pj.max_unpool(values, indices, (2, 2), strides=(2, 2), output_shape=x.shape)

`max_pool` pools 1-D, 2-D or 3-D windows (nd = len(window_shape)) of an array (batch..., spatial...,
C), or (batch..., C, spatial...) with channels_last=False; every dimension before the last nd + 1
is a batch dimension (none, one or several). Flax's arguments: `strides` default to 1, `padding`
is "VALID", "SAME" (lax's: total max((ceil(in/s) - 1)*s + d(k-1) + 1 - in, 0), the lower half
before, the rest after) or nd (low, high) pairs, each side below the (undilated) window
extent, as poolgen's end padding allows (so SAME with a dilated window may be refused). Beyond
Flax: `dilation` and `ceil_mode`, as PyTorch's. Padding is never read, and each window's
maximum follows PyTorch's rules (NaN wins, ties keep the first maximum in row-major window
order); docs/semantics.md has all of them.

**Indices** are PyTorch's plane offsets: each is the flat position of the maximum inside its own
(n, c) spatial plane of the input, `l` in 1-D, `h*W + w` in 2-D, `(d*H + h)*W + w` in 3-D, whatever
the layout (channels-first and channels-last give the same indices). They are poolgen's native
format (no rewrite pass after the kernel, which was measured to cost more than it saves), fit
int32 for any plane under 2^31 elements, and are what PyTorch's max_unpool takes. They are int32,
or int64 where jax_enable_x64 is on.

`max_unpool` is their inverse: an array of the unpooled shape, zero but for each value at its
index in its plane (the latest in row-major order where two name one place). Its output
extents are `output_shape`'s (the nd spatial extents, or a whole shape in the values' layout,
such as the pooled input's), by default what the window gives back: VALID (p - 1)*s + k, SAME p*s,
pairs (p - 1)*s + k - low - high. An index outside its output plane raises poolgen's error.

Gradients (jax.grad, jax.vjp): `max_pool`'s values to its input through poolgen's
max_pool_backward (each gradient added at its index, in PyTorch's order), `max_unpool`'s output
to its values through max_unpool_backward (a gather); indices have none. Both run under jit,
vmap (one custom call for the whole batch: vmap's dimensions become batch dimensions),
eval_shape and jax.export. Errors in the arguments raise ValueError with poolgen's message when
the function is traced; errors found in the data (an index out of range) raise JAX's runtime
error with poolgen's message when the call runs.

**jax.export**: the custom calls are not among those jax.export knows to be stable, so allow
them by name (TARGETS); the deserialized function runs where poolgen.jax is imported:

    exported = jax.export.export(jax.jit(f), disabled_checks=[
        jax.export.DisabledSafetyCheck.custom_call(name) for name in pj.TARGETS])(x)
    restored = jax.export.deserialize(exported.serialize())
    restored.call(x)

`set_num_threads(n)` sets the threads poolgen's kernels use in this adapter (0: one per core, or
HL_NUM_THREADS); the adapter links its own copy of poolgen, so other adapters keep theirs.
"""
import ctypes
import functools
import os
from typing import NamedTuple, Tuple

import jax
import numpy as np

from .._adapters import check_built_for, compiled_library, same_padding, unpooled_extent

try:
    from ._built_for import JAX_VERSION as _BUILT_FOR  # written by setup.py
except ImportError:  # a source checkout
    _BUILT_FOR = jax.__version__
check_built_for("poolgen.jax", "JAX", _BUILT_FOR, jax.__version__,
                "build poolgen against it (pip install --no-build-isolation ./python)")
_library = ctypes.CDLL(compiled_library(__file__, "_ffi*.so", "poolgen.jax"))

__all__ = ["max_pool", "max_unpool", "set_num_threads", "get_num_threads", "stats", "TARGETS"]

# The custom calls' target names, in the order of the library's counters (ffi.cpp's Op).
_OPS = ("max_pool", "max_pool_backward", "max_unpool", "max_unpool_backward")
TARGETS = tuple(f"poolgen_{op}" for op in _OPS)
# Each target's CPU handler, and its CUDA twin on XLA's stream (registered on any jaxlib; used
# where JAX runs on a CUDA device: poolgen's CUDA kernels, owed a run on a GPU).
for _op, _target in zip(_OPS, TARGETS):
    for _platform, _suffix in (("cpu", ""), ("CUDA", "_cuda")):
        jax.ffi.register_ffi_target(
            _target, jax.ffi.pycapsule(getattr(_library, f"poolgen_jax_{_op}{_suffix}")),
            platform=_platform)
_POOL, _POOL_BACKWARD, _UNPOOL, _UNPOOL_BACKWARD = TARGETS

_Ints = ctypes.POINTER(ctypes.c_int64)
_library.poolgen_jax_pool_shape.restype = ctypes.c_int32
_library.poolgen_jax_pool_shape.argtypes = [
    ctypes.c_int32, ctypes.c_int32, _Ints, ctypes.c_int32, _Ints, _Ints, _Ints, _Ints, _Ints,
    ctypes.c_int32, _Ints, ctypes.c_char_p, ctypes.c_size_t]
_library.poolgen_jax_unpool_shape.restype = ctypes.c_int32
_library.poolgen_jax_unpool_shape.argtypes = [
    ctypes.c_int32, ctypes.c_int32, _Ints, ctypes.c_int32, _Ints, _Ints, ctypes.c_char_p,
    ctypes.c_size_t]
_library.poolgen_jax_set_num_threads.argtypes = [ctypes.c_int32]
_library.poolgen_jax_num_threads_set.restype = ctypes.c_int32
_library.poolgen_jax_served.restype = ctypes.c_int64
_library.poolgen_jax_served.argtypes = [ctypes.c_int32]


def set_num_threads(n):
    """Threads poolgen's kernels may use in this adapter; 0 restores the default (one per core,
    or the HL_NUM_THREADS environment variable)."""
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"set_num_threads: expected a count of at least 0, got {n!r}")
    _library.poolgen_jax_set_num_threads(n)


def get_num_threads():
    """The thread count set_num_threads set, else the default: HL_NUM_THREADS, else the cores."""
    # poolgen's C API has no getter; the library remembers the last count it set.
    return (_library.poolgen_jax_num_threads_set() or int(os.environ.get("HL_NUM_THREADS") or 0)
            or os.cpu_count() or 1)


def stats():
    """Custom calls poolgen served since the import, per target: {"max_pool": n, ...}."""
    return {op: _library.poolgen_jax_served(i) for i, op in enumerate(_OPS)}


class _Pool(NamedTuple):
    """A pooling call's static options (hashable: custom_vjp's non-differentiable argument)."""
    nd: int
    channels_last: bool
    ceil_mode: bool
    kernel: Tuple[int, ...]
    stride: Tuple[int, ...]
    padding_low: Tuple[int, ...]
    padding_high: Tuple[int, ...]
    dilation: Tuple[int, ...]
    input_shape: Tuple[int, ...]  # the gradient's

    def attributes(self):
        """The handlers' attributes (ffi.cpp's pool_attributes)."""
        return dict(nd=self.nd, channels_last=self.channels_last, ceil_mode=self.ceil_mode,
                    **{name: np.asarray(getattr(self, name), np.int64) for name in
                       ("kernel", "stride", "padding_low", "padding_high", "dilation")})


def _ints(value, nd, name, default):
    """An int or nd ints (None: `default`) as a tuple of nd ints."""
    if value is None:
        value = default
    if isinstance(value, (int, np.integer)):
        value = (value,) * nd
    value = tuple(value)
    if len(value) != nd or not all(isinstance(v, (int, np.integer)) for v in value):
        raise ValueError(f"{name} must be an int or {nd} ints for {nd}-D pooling, got {value}")
    return tuple(int(v) for v in value)


def _nd(window_shape):
    if isinstance(window_shape, (int, np.integer)) or len(window_shape) not in (1, 2, 3):
        raise ValueError(f"window_shape must be a tuple of 1, 2 or 3 ints (one per spatial "
                         f"dimension), got {window_shape!r}")
    return len(window_shape)


def _spatial(shape, nd, channels_last, name):
    """The nd spatial extents of an array shape in its layout."""
    if len(shape) < nd + 1:
        raise ValueError(f"{name} must have at least {nd + 1} dimensions for {nd}-D pooling "
                         f"({'spatial..., C' if channels_last else 'C, spatial...'}), got shape "
                         f"{tuple(shape)}")
    return tuple(shape[-nd - 1:-1] if channels_last else shape[-nd:])


def _pads(padding, extents, kernel, stride, dilation):
    """Flax's padding as (low, high) tuples; SAME as lax computes it (the dilated window)."""
    nd = len(extents)
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            return (0,) * nd, (0,) * nd
        if padding.upper() == "SAME":
            pads = [same_padding(n, k, s, d)
                    for n, k, s, d in zip(extents, kernel, stride, dilation)]
            return tuple(lo for lo, _ in pads), tuple(hi for _, hi in pads)
        raise ValueError(f"padding must be 'VALID', 'SAME' or {nd} (low, high) pairs, got "
                         f"{padding!r}")
    pairs = tuple(tuple(p) for p in padding)
    if len(pairs) != nd or any(len(p) != 2 for p in pairs):
        raise ValueError(f"padding must be 'VALID', 'SAME' or {nd} (low, high) pairs, got "
                         f"{padding!r}")
    return tuple(int(p[0]) for p in pairs), tuple(int(p[1]) for p in pairs)


def _shape_query(entry, *args):
    """Runs a shape entry point of the library (its result in its out argument); ValueError with
    poolgen's message where poolgen refuses the shapes or options."""
    message = ctypes.create_string_buffer(1024)
    if entry(*args, message, len(message)) != 0:
        raise ValueError("poolgen: " + message.value.decode())


def _array(values):
    return (ctypes.c_int64 * max(len(values), 1))(*values)


def _pooled_shape(window):
    shape = window.input_shape
    out = _array([0] * len(shape))
    _shape_query(_library.poolgen_jax_pool_shape, window.nd, len(shape), _array(shape),
                 window.channels_last, _array(window.kernel), _array(window.stride),
                 _array(window.padding_low), _array(window.padding_high),
                 _array(window.dilation), window.ceil_mode, out)
    return tuple(out[:len(shape)])


def _index_dtype():
    """int64 where jax_enable_x64 is on, else int32."""
    return jax.dtypes.canonicalize_dtype(np.int64)


def _floating(dtype):
    return jax.dtypes.issubdtype(dtype, np.floating)


def _pool_call(window, x):
    shape = _pooled_shape(window)
    return jax.ffi.ffi_call(
        _POOL, (jax.ShapeDtypeStruct(shape, x.dtype), jax.ShapeDtypeStruct(shape, _index_dtype())),
        vmap_method="broadcast_all")(x, **window.attributes())


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _max_pool(window, x):
    return _pool_call(window, x)


def _max_pool_fwd(window, x):
    values, indices = _pool_call(window, x)
    return (values, indices), indices


def _max_pool_bwd(window, indices, cotangents):
    grad_values = cotangents[0]
    if not _floating(grad_values.dtype):
        return (None,)
    grad_input = jax.ffi.ffi_call(
        _POOL_BACKWARD, jax.ShapeDtypeStruct(window.input_shape, grad_values.dtype),
        vmap_method="broadcast_all")(grad_values, indices, **window.attributes())
    return (grad_input,)


_max_pool.defvjp(_max_pool_fwd, _max_pool_bwd)


def max_pool(x, window_shape, strides=None, padding="VALID", *, channels_last=True, dilation=1,
             ceil_mode=False):
    """Max pooling with indices: (values, indices), both of the pooled shape.

    x: (batch..., spatial..., C), or (batch..., C, spatial...) with channels_last=False, of
    float32, float64, float16, bfloat16, int8, uint8, int16, int32 or int64; window_shape: nd
    ints (1 to 3); strides: nd ints (default 1); padding: "VALID", "SAME" or nd (low, high)
    pairs; dilation: an int or nd ints; ceil_mode: PyTorch's. The indices are plane offsets
    (the module's docstring), int32 or, with jax_enable_x64, int64.
    """
    x = jax.numpy.asarray(x)
    nd = _nd(window_shape)
    kernel = _ints(window_shape, nd, "window_shape", None)
    stride = _ints(strides, nd, "strides", 1)
    dilation = _ints(dilation, nd, "dilation", 1)
    low, high = _pads(padding, _spatial(x.shape, nd, channels_last, "x"), kernel, stride,
                      dilation)
    window = _Pool(nd, bool(channels_last), bool(ceil_mode), kernel, stride, low, high, dilation,
                   tuple(x.shape))
    return _max_pool(window, x)


class _Unpool(NamedTuple):
    """An unpooling call's static options."""
    nd: int
    channels_last: bool
    output_shape: Tuple[int, ...]  # the whole output array's

    def attributes(self):
        return dict(nd=self.nd, channels_last=self.channels_last)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _max_unpool(spec, values, indices):
    return jax.ffi.ffi_call(_UNPOOL, jax.ShapeDtypeStruct(spec.output_shape, values.dtype),
                            vmap_method="broadcast_all")(values, indices, **spec.attributes())


def _max_unpool_fwd(spec, values, indices):
    return _max_unpool(spec, values, indices), indices


def _max_unpool_bwd(spec, indices, grad_output):
    if not _floating(grad_output.dtype):
        return None, None
    grad_values = jax.ffi.ffi_call(
        _UNPOOL_BACKWARD, jax.ShapeDtypeStruct(indices.shape, grad_output.dtype),
        vmap_method="broadcast_all")(grad_output, indices, **spec.attributes())
    return grad_values, None


_max_unpool.defvjp(_max_unpool_fwd, _max_unpool_bwd)


def max_unpool(values, indices, window_shape, strides=None, padding="VALID", *,
               output_shape=None, channels_last=True):
    """Max unpooling by max_pool's indices: zero but for each value at its index in its plane.

    values and indices: one shape, as max_pool returned them; window_shape, strides, padding:
    the pooling's (they give the default output extents); output_shape: the nd spatial extents
    of the output, or a whole shape in the values' layout (the pooled input's). An index outside
    its output plane raises poolgen's error when the call runs.
    """
    values, indices = jax.numpy.asarray(values), jax.numpy.asarray(indices)
    nd = _nd(window_shape)
    if values.shape != indices.shape:
        raise ValueError(f"values and indices must have one shape, got {values.shape} and "
                         f"{indices.shape}")
    if not jax.dtypes.issubdtype(indices.dtype, np.integer):
        raise ValueError(f"indices must be integers, got {indices.dtype}")
    pooled = _spatial(values.shape, nd, channels_last, "values")
    if output_shape is not None:
        output_shape = tuple(output_shape)
        extents = (_ints(output_shape, nd, "output_shape", None) if len(output_shape) == nd else
                   _spatial(output_shape, nd, channels_last, "output_shape"))
    else:
        kernel = _ints(window_shape, nd, "window_shape", None)
        stride = _ints(strides, nd, "strides", 1)
        if isinstance(padding, str) and padding.upper() == "SAME":
            extents = tuple(unpooled_extent(p, k, s, True)
                            for p, k, s in zip(pooled, kernel, stride))
        else:  # VALID, or the pairs' padding taken back
            low, high = _pads(padding, pooled, kernel, stride, (1,) * nd)
            extents = tuple(unpooled_extent(p, k, s, False) - lo - hi
                            for p, k, s, lo, hi in zip(pooled, kernel, stride, low, high))
    shape = tuple(values.shape)
    out = _array([0] * len(shape))
    _shape_query(_library.poolgen_jax_unpool_shape, nd, len(shape), _array(shape),
                 bool(channels_last), _array(extents), out)
    spec = _Unpool(nd, bool(channels_last), tuple(out[:len(shape)]))
    return _max_unpool(spec, values, indices)
