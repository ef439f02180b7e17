"""Comparing poolgen.torch with the installed PyTorch: bit for bit, strides included."""
import math

import torch

import poolgen.torch as pt

_BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
         torch.bfloat16: torch.int16}
FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
INTEGERS = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)
TORCH_2 = int(torch.__version__.split(".")[0]) >= 2


def bits(t):
    """t's elements as integers of their width (NaN payloads and -0.0 compared exactly)."""
    t = t.detach().contiguous()
    return t.view(_BITS[t.dtype]) if t.dtype in _BITS else t


def assert_same(got, want, what="result"):
    """Same dtype, shape, strides and bits (tensors, or tuples of them)."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), what
        for k, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{what}[{k}]")
        return
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, PyTorch {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)}, PyTorch {tuple(want.shape)}"
    if got.numel() > 1:
        assert got.stride() == want.stride(), \
            f"{what}: strides {got.stride()}, PyTorch {want.stride()} (shape {tuple(got.shape)})"
    differ = bits(got) != bits(want)
    if want.dtype == torch.bfloat16:
        # PyTorch narrows bf16 results from f32 with two conversions that disagree on NaN bits:
        # the scalar one (0x7fc0) and, in its channels-last kernels, the vectorized one (0xffff,
        # in whole vectors of channels: 16 or 32 of them, by the CPU). poolgen gives 0x7fc0.
        differ &= ~((bits(got) == 0x7fc0) & (bits(want) == -1))
    if differ.any():
        diff = differ.nonzero()
        first = tuple(diff[0].tolist())
        raise AssertionError(f"{what}: {len(diff)} elements differ, first at {first}: "
                             f"{got[first].item()} vs PyTorch {want[first].item()}")


def outcome(f, *args, **kwargs):
    """f's result, or ("raised", exception type, message)."""
    try:
        return f(*args, **kwargs)
    except Exception as e:  # noqa: BLE001  (the type is what is compared)
        return ("raised", type(e), str(e))


def raised(result):
    return isinstance(result, tuple) and len(result) == 3 and result[0] == "raised"


def stock(f, *args, **kwargs):
    """f with PyTorch's own kernels (the drop-in off)."""
    with pt.enabled(False):
        return outcome(f, *args, **kwargs)


def dropin(f, *args, **kwargs):
    """f with the drop-in on."""
    with pt.enabled():
        return outcome(f, *args, **kwargs)


def assert_same_outcome(got, want, what, same_message=False):
    """Both raised the same exception type (and message, if asked), or gave the same bits."""
    if raised(want) or raised(got):
        assert raised(got) and raised(want), f"{what}: {short(got)} vs PyTorch {short(want)}"
        assert got[1] is want[1], f"{what}: raised {got[1].__name__} ({got[2]}), PyTorch " \
                                  f"{want[1].__name__} ({want[2]})"
        if same_message:
            assert got[2] == want[2], what
        return
    assert_same(got, want, what)


def short(r):
    return f"raised {r[1].__name__}: {r[2][:200]}" if raised(r) else "returned"


def special_values(dtype, n, generator):
    """n values with ties, NaN, infinities and -0.0 (floats), or ties and extremes (integers)."""
    if dtype.is_floating_point:
        pool = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, math.inf, -math.inf, math.nan, 3.0,
                             -2.5, 1.0])
        pick = torch.randint(0, len(pool), (n,), generator=generator)
        noise = torch.randn(n, generator=generator)
        special = torch.rand(n, generator=generator) < 0.5
        return torch.where(special, pool[pick], noise).to(dtype)
    info = torch.iinfo(dtype)
    pool = torch.tensor([info.min, info.max, 0, 1, 2, 1, -1 if info.min < 0 else 3])
    pick = torch.randint(0, len(pool), (n,), generator=generator)
    return pool[pick].to(dtype)


def lacks_kernel(result):
    """PyTorch raised for want of a kernel for the dtype (1.13: f16 pooling, most unpooling)."""
    return raised(result) and (result[1] is NotImplementedError or "not implemented" in result[2])


# A wider dtype that holds every value exactly, for checking dtypes PyTorch has no kernel for
# (pooling compares values, unpooling moves them: both commute with an exact widening).
WIDER = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.int8: torch.float64,
         torch.uint8: torch.float64, torch.int16: torch.float64, torch.int32: torch.float64}


def widened(x):
    return x.to(WIDER[x.dtype]) if x.dtype in WIDER else None
