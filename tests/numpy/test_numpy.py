"""poolgen.numpy against PyTorch (the installed one, run here as the oracle, where there is one)
and against itself across layouts and threads: values, indices and gradients bit for bit; every
error path an exception naming its argument.

    $PYTHON -m pytest -q tests/numpy   # a Python with numpy and poolgen.numpy (scripts/test.sh:
                                       # the PyTorch binding's environment)
"""
import ctypes
import os
import re

import numpy as np
import pytest

pn = pytest.importorskip("poolgen.numpy", reason="poolgen.numpy is not installed here")
from poolgen import _c_api  # noqa: E402
try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) is not installed")
FLOATS = (np.float32, np.float64, np.float16)
INTEGERS = (np.int8, np.uint8, np.int16, np.int32, np.int64)


def same_bits(got, want):
    """Same shape, dtype and bits (NaN payloads and -0.0 included)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    width = f"u{got.dtype.itemsize}"
    return np.array_equal(np.ascontiguousarray(got).view(width),
                          np.ascontiguousarray(want).view(width))


def sample(shape, dtype, seed=0, nan=False):
    """Values with ties (a few distinct integers) and, for floats, NaN where asked."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, size=shape)
    if np.dtype(dtype).kind == "f":
        x = x + rng.standard_normal(shape) * (rng.random(shape) < 0.5)
    x = x.astype(dtype)
    if nan:
        x.flat[rng.integers(0, x.size, size=max(1, x.size // 13))] = np.nan
    return x


def test_structures_match_the_c_api():
    """ctypes' layouts are the C API's (csrc/numpy/capi.cpp asserts the same offsets in C++)."""
    assert ctypes.sizeof(pn._Tensor) == 104 and pn._Tensor.strides.offset == 56
    assert pn._PoolOptions.pool_rule.offset == 160
    assert pn._UnpoolOptions.cuda_stream.offset == 160


def test_codes_match_the_header():
    """poolgen._c_api's codes are the header's (POOLGEN_<name>), dtypes by their short names."""
    header = open(os.path.join(os.path.dirname(__file__), "..", "..", "include", "poolgen",
                               "poolgen.h")).read()
    codes = {name: int(value) for name, value in re.findall(r"POOLGEN_(\w+) = (\d+)", header)}
    short = {"float32": "F32", "int64": "I64", "float64": "F64", "float16": "F16",
             "bfloat16": "BF16", "int8": "I8", "uint8": "U8", "int16": "I16", "int32": "I32"}
    assert {short[name]: code for name, code in _c_api.DTYPES.items()} == {
        name: codes[name] for name in short.values()}
    mirrored = {name: value for name, value in vars(_c_api).items()
                if name.isupper() and isinstance(value, int)}
    assert len(mirrored) > 25
    assert {name: codes.get(name) for name in mirrored} == mirrored


CASES = [  # nd, shape, kernel_size, stride, padding, dilation, ceil_mode
    (1, (2, 3, 17), 3, 2, 1, 1, False),
    (1, (3, 20), 2, None, 0, 2, True),
    (2, (2, 3, 9, 10), 2, None, 0, 1, False),
    (2, (2, 4, 11, 9), (3, 2), (2, 1), (1, 0), 1, True),
    (2, (3, 8, 7), 3, 2, 1, (2, 1), False),
    (3, (1, 2, 5, 6, 7), 2, None, 0, 1, False),
    (3, (2, 2, 7, 5, 6), (3, 2, 2), (2, 1, 2), (1, 0, 1), 1, True),
]


def torch_pool(x, nd, k, s, p, d, ceil):
    t = torch.from_numpy(np.ascontiguousarray(x)).requires_grad_(x.dtype.kind == "f")
    pool = getattr(F, f"max_pool{nd}d")
    values, indices = pool(t, k, s if s is not None else None, p, d, ceil, return_indices=True)
    return t, values, indices


@needs_torch
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pooling_and_gradients_match_pytorch(case, dtype):
    nd, shape, k, s, p, d, ceil = case
    x = sample(shape, dtype, nan=True)
    t, want_values, want_indices = torch_pool(x, nd, k, s, p, d, ceil)
    values, indices = getattr(pn, f"max_pool{nd}d")(x, k, s, p, d, ceil)
    assert same_bits(values, want_values.detach().numpy())
    assert same_bits(indices, want_indices.numpy())

    grad = sample(values.shape, dtype, seed=1)
    (want_grad,) = torch.autograd.grad(want_values, t, torch.from_numpy(grad))
    got_grad = getattr(pn, f"max_pool{nd}d_backward")(grad, indices, x.shape, k, s, p, d, ceil)
    assert same_bits(got_grad, want_grad.numpy())


@needs_torch
@pytest.mark.parametrize("nd,shape,k,s,p", [(1, (2, 3, 8), 2, 2, 0), (2, (2, 3, 6, 8), 3, 2, 1),
                                            (3, (1, 2, 4, 4, 6), 2, 2, 0)])
def test_unpooling_and_gradient_match_pytorch(nd, shape, k, s, p):
    x = sample(shape, np.float32)
    _, values, indices = torch_pool(x, nd, k, s, p, 1, False)
    v = values.detach().numpy().copy()
    i = indices.numpy().copy()
    unpool = getattr(F, f"max_unpool{nd}d")
    if k == s and p == 0:  # windows that tile the input: the default output holds every index
        want = unpool(torch.from_numpy(v), torch.from_numpy(i), k, s, p)
        assert same_bits(getattr(pn, f"max_unpool{nd}d")(v, i, k, s, p), want.numpy())
    sized = list(shape[2:])  # the pooled input's extents, within PyTorch's range
    want = unpool(torch.from_numpy(v), torch.from_numpy(i), k, s, p, output_size=sized)
    assert same_bits(getattr(pn, f"max_unpool{nd}d")(v, i, k, s, p, sized), want.numpy())

    grad_output = sample(want.shape, np.float32, seed=2)
    tv = torch.from_numpy(v).requires_grad_()
    (want_grad,) = torch.autograd.grad(unpool(tv, torch.from_numpy(i), k, s, p, output_size=sized),
                                       tv, torch.from_numpy(grad_output))
    got_grad = getattr(pn, f"max_unpool{nd}d_backward")(grad_output, i, k, s, p)
    assert same_bits(got_grad, want_grad.numpy())


@pytest.mark.parametrize("dtype", FLOATS + INTEGERS)
def test_every_dtype_agrees_with_float64(dtype):
    """Small integers are exact in every dtype: each gives float64's indices and values."""
    x = sample((2, 3, 9, 8), dtype)
    want_values, want_indices = pn.max_pool2d(x.astype(np.float64), 3, 2, 1)
    values, indices = pn.max_pool2d(x, 3, 2, 1)
    assert values.dtype == x.dtype
    assert np.array_equal(indices, want_indices)
    assert np.array_equal(values.astype(np.float64), want_values)
    y = pn.max_unpool2d(values, indices, 3, 2, 1, output_size=x.shape)
    assert np.array_equal(y.astype(np.float64), pn.max_unpool2d(want_values, want_indices, 3, 2,
                                                                1, output_size=x.shape))


def test_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes (bfloat16) is not installed")
    x = sample((1, 2, 6, 6), np.float32)
    values, indices = pn.max_pool2d(x.astype(ml_dtypes.bfloat16), 2)
    want_values, want_indices = pn.max_pool2d(x.astype(ml_dtypes.bfloat16).astype(np.float32), 2)
    assert values.dtype == ml_dtypes.bfloat16
    assert np.array_equal(indices, want_indices)
    assert np.array_equal(values.astype(np.float32), want_values)


def test_int32_indices():
    x = sample((2, 3, 9, 10), np.float32)
    values, indices = pn.max_pool2d(x, 2, index_dtype=np.int32)
    want_values, want_indices = pn.max_pool2d(x, 2)
    assert indices.dtype == np.int32 and np.array_equal(indices, want_indices)
    assert same_bits(pn.max_unpool2d(values, indices, 2), pn.max_unpool2d(values, want_indices, 2))


def test_layouts_are_kept_and_any_layout_is_read():
    """NHWC memory seen as (N, C, H, W) in, NHWC results out; strided and out= views too."""
    x = sample((2, 5, 9, 8), np.float32, nan=True)
    want_values, want_indices = pn.max_pool2d(x, 3, 2, 1)
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    nhwc_values, nhwc_indices = pn.max_pool2d(nhwc, 3, 2, 1)
    assert nhwc_values.transpose(0, 2, 3, 1).flags.c_contiguous
    assert nhwc_indices.transpose(0, 2, 3, 1).flags.c_contiguous
    assert same_bits(nhwc_values, want_values) and same_bits(nhwc_indices, want_indices)
    unpooled = pn.max_unpool2d(nhwc_values, nhwc_indices, 3, 2, 1, output_size=x.shape[2:])
    assert unpooled.transpose(0, 2, 3, 1).flags.c_contiguous
    assert same_bits(unpooled, pn.max_unpool2d(want_values, want_indices, 3, 2, 1,
                                               output_size=x.shape[2:]))

    strided = np.zeros((2, 5, 18, 16), np.float32)
    strided[:, :, ::2, ::2] = x
    values, indices = pn.max_pool2d(strided[:, :, ::2, ::2], 3, 2, 1)
    assert same_bits(values, want_values) and same_bits(indices, want_indices)

    out_values = np.full((6, 5, 5, 2), -1, np.float32).transpose(3, 2, 0, 1)[:, :, :5, :4]
    out_indices = np.zeros((2, 5, 5, 4), np.int64)
    got = pn.max_pool2d(x, 3, 2, 1, out=(out_values, out_indices))
    assert got[0] is out_values and got[1] is out_indices
    assert same_bits(out_values, want_values) and same_bits(out_indices, want_indices)


def test_batchless_and_broadcast_inputs():
    x = sample((3, 8, 8), np.float32)
    values, indices = pn.max_pool2d(x, 2)
    want_values, want_indices = pn.max_pool2d(x[None], 2)
    assert same_bits(values, want_values[0]) and same_bits(indices, want_indices[0])
    # All-zero strides (a broadcast array) are read as the array, not as "contiguous".
    ones = np.broadcast_to(np.float32(1), (1, 2, 4, 4))
    values, indices = pn.max_pool2d(ones, 2)
    assert np.array_equal(values, np.ones((1, 2, 2, 2), np.float32))
    assert np.array_equal(indices[0, 0], [[0, 2], [8, 10]])


def test_threads_give_the_same_bits():
    x = sample((8, 16, 64, 64), np.float32, nan=True)
    results = []
    for threads in (1, 2):
        pn.set_num_threads(threads)
        values, indices = pn.max_pool2d(x, 3, 2, 1)
        results.append((values, indices, pn.max_unpool2d(values, indices, 3, 2, 1,
                                                         output_size=x.shape)))
    for got, want in zip(*results):
        assert same_bits(got, want)


def test_errors_name_the_argument():
    x = sample((1, 2, 4, 4), np.float32)
    values, indices = pn.max_pool2d(x, 2)
    with pytest.raises(ValueError, match="kernel_size: expected every entry >= 1, got 0"):
        pn.max_pool2d(x, 0)
    with pytest.raises(ValueError, match=r"kernel_size: expected an int or 2 ints"):
        pn.max_pool2d(x, 2.5)
    with pytest.raises(ValueError, match="stride"):
        pn.max_pool2d(x, 2, 0)
    with pytest.raises(ValueError, match="padding: expected an int or ints, got {}"):
        pn.max_pool2d(x, 2, padding={})
    with pytest.raises(ValueError, match="input: expected one of float32.*got bool"):
        pn.max_pool2d(x > 0, 2)
    with pytest.raises(ValueError, match="input: expected 2 to 5 dimensions"):
        pn.max_pool2d(np.zeros((1, 1, 1, 1, 2, 2), np.float32), 2)
    with pytest.raises(ValueError, match="input"):
        pn.max_pool2d(np.zeros((2,), np.float32), 2)
    with pytest.raises(ValueError, match=r"index_dtype: expected int64 or int32, got int16"):
        pn.max_pool2d(x, 2, index_dtype=np.int16)
    with pytest.raises(ValueError, match=r"values: expected shape \(1, 2, 2, 2\)"):
        pn.max_pool2d(x, 2, out=(np.zeros((1, 2, 2, 3), np.float32), indices.copy()))
    read_only = values.copy()
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="values: expected a writeable array"):
        pn.max_pool2d(x, 2, out=(read_only, indices.copy()))
    with pytest.raises(ValueError, match="values"):  # an output over its input
        pn.max_pool2d(x, 2, out=(x[:, :, :2, :2], indices.copy()))
    odd = np.lib.stride_tricks.as_strided(np.zeros(64, np.float32), (1, 1, 4, 4), (64, 64, 14, 2))
    with pytest.raises(ValueError, match="input: expected strides in whole elements"):
        pn.max_pool2d(odd, 2)
    with pytest.raises(IndexError, match=r"indices: expected indices in \[0, 15\].*got 16"):
        pn.max_unpool2d(values, np.full_like(indices, 16), 2)
    with pytest.raises(ValueError, match="output_size"):
        pn.max_unpool2d(values, indices, 2, output_size=[9, 9])
    with pytest.raises(ValueError, match="output_size: expected 2 or 4 extents"):
        pn.max_unpool2d(values, indices, 2, output_size=[4])
    with pytest.raises(ValueError, match="indices"):
        pn.max_unpool2d(values, indices.astype(np.float32), 2)
    with pytest.raises(ValueError, match="grad_output"):
        pn.max_pool2d_backward(values.astype(np.int32), indices, x.shape, 2)
    with pytest.raises(IndexError, match="indices"):
        pn.max_unpool2d_backward(x, np.full_like(indices, -1), 2)
    with pytest.raises(ValueError, match="set_num_threads: expected a positive int, got 0"):
        pn.set_num_threads(0)
