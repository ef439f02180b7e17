"""poolgen on NumPy arrays, with no framework: max pooling with indices, max unpooling and their
gradients, PyTorch's functions and results (values, indices, gradients bit for bit), on arrays
of any layout and dtype the build has.

    import numpy as np
    import poolgen.numpy as pn

    x = np.random.default_rng(0).standard_normal((8, 64, 112, 112), np.float32)
    values, indices = pn.max_pool2d(x, 2)              # indices: int64 plane offsets
    y = pn.max_unpool2d(values, indices, 2)            # (8, 64, 224, 224)
    grad_x = pn.max_pool2d_backward(np.ones_like(values), indices, x.shape, 2)

Arrays are (N, C, spatial...) or (C, spatial...) in PyTorch's order of dimensions, in any memory
layout: an NHWC array is its transpose, `nhwc.transpose(0, 3, 1, 2)`, and its results come back
in the same layout (NHWC memory seen as (N, C, H, W)). Outputs are allocated, or given with
`out=` (written in place, any layout, each apart from the inputs). Indices are each element's
offset in its own (n, c) plane (PyTorch's), int64 or, with `index_dtype=np.int32`, int32.
bfloat16 arrays are ml_dtypes' (`ml_dtypes.bfloat16`, which JAX and TensorFlow bring).

Bad input is an exception naming the argument, what was expected and what was given:
ValueError (shapes, options, dtypes, overlapping outputs), IndexError (an index outside its plane),
NotImplementedError (a valid call this build has no kernel for). Each call goes through ctypes
into poolgen's C API: about 15 us on top of the kernel (the framework adapters' calls cost less).
docs/numpy.md says more.
"""
import ctypes
import functools
import threading

import numpy as np

from .. import _c_api
from .._adapters import compiled_library

_library = ctypes.CDLL(compiled_library(__file__, "_capi*.so", "poolgen.numpy"))

_DTYPES = _c_api.DTYPES
_DTYPE_CODES = {np.dtype(name): code for name, code in _DTYPES.items() if name != "bfloat16"}
_I64x3, _I64x5 = _c_api.I64x3, _c_api.I64x5
_Tensor, _PoolOptions, _UnpoolOptions, _Error = (
    _c_api.Tensor, _c_api.PoolOptions, _c_api.UnpoolOptions, _c_api.Error)

_T, _P, _U = (ctypes.POINTER(t) for t in (_Tensor, _PoolOptions, _UnpoolOptions))
_MESSAGE = [ctypes.c_char_p, ctypes.c_size_t]
for _name, _args in {
        "poolgen_max_pool_output_shape": [ctypes.c_int32, ctypes.c_int32, _I64x5, _P, _I64x5],
        "poolgen_max_unpool_output_shape": [ctypes.c_int32, ctypes.c_int32, _I64x5, _U, _I64x5],
        "poolgen_max_pool": [ctypes.c_int32, _T, _T, _T, _P],
        "poolgen_max_unpool": [ctypes.c_int32, _T, _T, _T, _U],
        "poolgen_max_pool_backward": [ctypes.c_int32, _T, _T, _T, _P],
        "poolgen_max_unpool_backward": [ctypes.c_int32, _T, _T, _T, _U],
        "poolgen_expand_option": [ctypes.c_char_p, _I64x3, ctypes.c_int32, ctypes.c_int32,
                                  _I64x3]}.items():
    getattr(_library, _name).argtypes = _args + _MESSAGE
    getattr(_library, _name).restype = ctypes.c_int32
_library.poolgen_last_error.restype = _Error
_library.poolgen_set_num_threads.argtypes = [ctypes.c_int32]

# poolgen's codes (POOLGEN_INVALID_ARGUMENT, ...) as Python's exceptions.
_EXCEPTIONS = {_c_api.INVALID_ARGUMENT: ValueError, _c_api.INDEX_OUT_OF_RANGE: IndexError,
               _c_api.UNSUPPORTED: NotImplementedError, _c_api.INTERNAL: RuntimeError}


_messages = threading.local()  # each thread's buffer for the C API's messages


def _call(function, *args):
    """A C API call; its failure raised with poolgen's message."""
    message = getattr(_messages, "buffer", None)
    if message is None:
        message = _messages.buffer = ctypes.create_string_buffer(1024)
    code = function(*args, message, len(message))
    if code:
        raise _EXCEPTIONS.get(code, RuntimeError)(message.value.decode())


def set_num_threads(n):
    """The threads poolgen's kernels run on (poolgen_set_num_threads); by default the cores."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive int, got {n!r}")
    _library.poolgen_set_num_threads(n)


def _dtype_code(argument, array):
    code = _DTYPE_CODES.get(array.dtype)
    if code is None:
        code = _DTYPES.get(array.dtype.name)  # (bfloat16: ml_dtypes', by name)
    if code is None:
        raise ValueError(f"{argument}: expected one of {', '.join(_DTYPES)}, got {array.dtype}")
    return code


def _array(argument, a):
    """An input as an ndarray poolgen can read: its own memory where strides allow, else a copy
    (an array whose strides are all zero, which the C API reads as "contiguous")."""
    a = np.asarray(a)
    if not 2 <= a.ndim <= 5:
        raise ValueError(f"{argument}: expected 2 to 5 dimensions, got shape {a.shape}")
    if a.ndim and a.size > 1 and not any(a.strides):
        a = np.ascontiguousarray(a)
    return a


def _tensor(argument, a):
    """a as a poolgen_tensor: strides in elements, as the C API takes them."""
    if any(s % a.itemsize for s in a.strides):
        raise ValueError(f"{argument}: expected strides in whole elements, got {a.strides} bytes "
                         f"for {a.dtype}")
    t = _Tensor(a.ctypes.data, _dtype_code(argument, a), a.ndim)
    t.shape[:a.ndim] = a.shape
    t.strides[:a.ndim] = [s // a.itemsize for s in a.strides]
    return t


def _like(shape, dtype, layout_of):
    """A new array of `shape`, its dimensions in memory in the order of layout_of's strides (an
    NHWC input's results NHWC), so that outputs keep their input's layout."""
    if layout_of.ndim != len(shape) or layout_of.flags.c_contiguous:
        return np.empty(shape, dtype)
    order = sorted(range(len(shape)), key=lambda d: (-layout_of.strides[d], d))
    return np.empty([shape[d] for d in order], dtype).transpose(np.argsort(order))


def _output(argument, out, shape, dtype, layout_of):
    """The output: `out` (checked: shape and dtype; poolgen checks the rest) or a new array."""
    if out is None:
        return _like(shape, dtype, layout_of)
    if not isinstance(out, np.ndarray):
        raise ValueError(f"{argument}: expected a numpy.ndarray, got {type(out).__name__}")
    if out.shape != tuple(shape) or out.dtype != np.dtype(dtype):
        raise ValueError(f"{argument}: expected shape {tuple(shape)} and dtype "
                         f"{np.dtype(dtype)}, got shape {out.shape} and dtype {out.dtype}")
    if not out.flags.writeable:
        raise ValueError(f"{argument}: expected a writeable array, got a read-only one")
    return out


def _expand(option, value, nd, default):
    """int or nd ints (PyTorch's lists), checked and expanded by poolgen (poolgen_expand_option);
    None: `default` (kernel_size's, or zeros)."""
    if value is None:
        return default
    values = [value] if np.ndim(value) == 0 else list(value)
    if len(values) > 3 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                  for v in values):
        raise ValueError(f"{option}: expected an int or {nd} ints, got {value!r}")
    out = _I64x3()
    _call(_library.poolgen_expand_option, option.encode(), _I64x3(*values), len(values), nd, out)
    return list(out)


def _default_stride(stride):
    """None for PyTorch's default stride (None or an empty list: the kernel's)."""
    return None if stride is None or (np.ndim(stride) == 1 and len(stride) == 0) else stride


def _pool_options(nd, kernel_size, stride, padding, dilation, ceil_mode):
    o = _PoolOptions()
    o.kernel_size[:] = kernel = _expand("kernel_size", kernel_size, nd, None)
    o.stride[:] = _expand("stride", _default_stride(stride), nd, kernel)
    o.padding[:] = _expand("padding", padding, nd, [0, 0, 0])
    o.dilation[:] = _expand("dilation", dilation, nd, [1, 1, 1])
    o.ceil_mode = bool(ceil_mode)
    return o


def _unpool_options(nd, kernel_size, stride, padding, output_size):
    o = _UnpoolOptions()
    o.kernel_size[:] = kernel = _expand("kernel_size", kernel_size, nd, None)
    o.stride[:] = _expand("stride", _default_stride(stride), nd, kernel)
    o.padding[:] = _expand("padding", padding, nd, [0, 0, 0])
    if output_size is not None:
        size = [int(s) for s in output_size]
        if len(size) not in (nd, nd + 2):
            raise ValueError(f"output_size: expected {nd} or {nd + 2} extents, got {size}")
        o.output_size_len = len(size)
        o.output_size[:len(size)] = size
    return o


def _shape(function, nd, shape, options):
    """An op's output shape for an input shape (poolgen's checks and messages)."""
    if not 2 <= len(shape) <= 5:
        raise ValueError(f"expected a shape of 2 to 5 dimensions, got {shape}")
    given, out = _I64x5(*shape), _I64x5()
    _call(function, nd, len(shape), given, options, out)
    return tuple(out[:len(shape)])


def _key(option, value):
    """An option as a cache key: lists and arrays as tuples."""
    if np.ndim(value):
        return tuple(np.ravel(value).tolist())
    try:
        hash(value)
    except TypeError:
        raise ValueError(f"{option}: expected an int or ints, got {value!r}") from None
    return value


def _window(kernel_size, stride, padding):
    return _key("kernel_size", kernel_size), _key("stride", stride), _key("padding", padding)


# A call's options and output shape, checked once for each set of options and input shape (a
# third of a small call's time was spent building them).
@functools.lru_cache(maxsize=256)
def _pool_plan(nd, shape, kernel_size, stride, padding, dilation, ceil_mode):
    o = _pool_options(nd, kernel_size, stride, padding, dilation, ceil_mode)
    return o, _shape(_library.poolgen_max_pool_output_shape, nd, shape, o)


@functools.lru_cache(maxsize=256)
def _unpool_plan(nd, shape, kernel_size, stride, padding, output_size):
    o = _unpool_options(nd, kernel_size, stride, padding, output_size)
    return o, _shape(_library.poolgen_max_unpool_output_shape, nd, shape, o)


def _index_dtype(index_dtype):
    dtype = np.dtype(index_dtype)
    if dtype not in (np.int64, np.int32):
        raise ValueError(f"index_dtype: expected int64 or int32, got {dtype}")
    return dtype


def _max_pool(nd, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, *,
              index_dtype=np.int64, out=None):
    x = _array("input", input)
    o, shape = _pool_plan(nd, x.shape, *_window(kernel_size, stride, padding),
                          _key("dilation", dilation), bool(ceil_mode))
    values_out, indices_out = (None, None) if out is None else out
    values = _output("values", values_out, shape, x.dtype, x)
    indices = _output("indices", indices_out, shape, _index_dtype(index_dtype), x)
    _call(_library.poolgen_max_pool, nd, _tensor("input", x), _tensor("values", values),
          _tensor("indices", indices), o)
    return values, indices


def _max_unpool(nd, input, indices, kernel_size, stride=None, padding=0, output_size=None, *,
                out=None):
    v, i = _array("input", input), _array("indices", indices)
    o, shape = _unpool_plan(nd, v.shape, *_window(kernel_size, stride, padding),
                            None if output_size is None else _key("output_size", output_size))
    output = _output("out", out, shape, v.dtype, v)
    _call(_library.poolgen_max_unpool, nd, _tensor("input", v), _tensor("indices", i),
          _tensor("out", output), o)
    return output


def _max_pool_backward(nd, grad_output, indices, input_shape, kernel_size, stride=None,
                       padding=0, dilation=1, ceil_mode=False, *, out=None):
    g, i = _array("grad_output", grad_output), _array("indices", indices)
    input_shape = tuple(int(s) for s in input_shape)
    o, _ = _pool_plan(nd, input_shape, *_window(kernel_size, stride, padding),
                      _key("dilation", dilation), bool(ceil_mode))
    grad_input = _output("out", out, input_shape, g.dtype, g)
    _call(_library.poolgen_max_pool_backward, nd, _tensor("grad_output", g),
          _tensor("indices", i), _tensor("out", grad_input), o)
    return grad_input


def _max_unpool_backward(nd, grad_output, indices, kernel_size, stride=None, padding=0, *,
                         out=None):
    g, i = _array("grad_output", grad_output), _array("indices", indices)
    o, _ = _unpool_plan(nd, i.shape, *_window(kernel_size, stride, padding),
                        g.shape[-nd:])
    grad_values = _output("out", out, i.shape, g.dtype, i)
    _call(_library.poolgen_max_unpool_backward, nd, _tensor("grad_output", g),
          _tensor("indices", i), _tensor("out", grad_values), o)
    return grad_values


def _define(name, nd, op, doc):
    """The module's function `name`: op for nd spatial dimensions."""
    def function(*args, **kwargs):
        return op(nd, *args, **kwargs)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc.format(nd=nd)
    globals()[name] = function


_POOL_DOC = """torch.nn.functional.max_pool{nd}d(..., return_indices=True) on NumPy arrays:
(values, indices). `out`: a (values, indices) pair to write; index_dtype: int64 or int32."""
_UNPOOL_DOC = """torch.nn.functional.max_unpool{nd}d on NumPy arrays: zeros but for each value
at its index; the latest in input order wins where two name one place."""
_POOL_BACKWARD_DOC = """max_pool{nd}d's gradient: grad_input (input_shape) zero but for each
grad_output element added at its index."""
_UNPOOL_BACKWARD_DOC = """max_unpool{nd}d's gradient: each value's gradient is grad_output at its
index (grad_output has the unpooled shape, which gives output_size)."""

for _nd in (1, 2, 3):
    _define(f"max_pool{_nd}d", _nd, _max_pool, _POOL_DOC)
    _define(f"max_unpool{_nd}d", _nd, _max_unpool, _UNPOOL_DOC)
    _define(f"max_pool{_nd}d_backward", _nd, _max_pool_backward, _POOL_BACKWARD_DOC)
    _define(f"max_unpool{_nd}d_backward", _nd, _max_unpool_backward, _UNPOOL_BACKWARD_DOC)

__all__ = [f"{op}{nd}d{suffix}" for nd in (1, 2, 3) for op in ("max_pool", "max_unpool")
           for suffix in ("", "_backward")] + ["set_num_threads"]
