"""Every error path: poolgen.torch raises the exception type the installed PyTorch raises for the
same call, with poolgen's message naming the argument; through the drop-in (which leaves such
calls to PyTorch's kernel) the very same exception."""
import pytest
import torch
import torch.nn.functional as F

import poolgen.torch as pt
from helpers import assert_same_outcome, dropin, outcome, raised, stock

x4 = torch.randn(2, 3, 6, 6)
x5 = torch.randn(1, 2, 4, 4, 4)
x3 = torch.randn(2, 3, 8)
v4, i4 = F.max_pool2d(x4, 2, return_indices=True)
v5, i5 = F.max_pool3d(x5, 2, return_indices=True)
v3, i3 = F.max_pool1d(x3, 2, return_indices=True)

# (what, torch.nn.functional's name, args, kwargs, a word poolgen's message must contain)
POOL = [
    ("kernel 0", "max_pool2d", (x4, 0), {}, "kernel_size"),
    ("kernel negative", "max_pool3d", (x5, -1), {}, "kernel_size"),
    ("kernel of 3 entries in 2-D", "max_pool2d", (x4, (2, 2, 2)), {}, "kernel_size"),
    ("stride 0", "max_pool2d", (x4, 2, 0), {}, "stride"),
    ("stride negative", "max_pool1d", (x3, 2, -2), {}, "stride"),
    ("padding negative", "max_pool2d", (x4, 2, 1, -1), {}, "padding"),
    ("padding above half the kernel", "max_pool2d", (x4, 2, 1, 2), {}, "padding"),
    ("padding above half the kernel, dilated", "max_pool1d", (x3, 3, 1, 2, 2), {}, "padding"),
    ("padding above half the kernel, 3-D", "max_pool3d", (x5, 3, 1, 2), {}, "padding"),
    ("dilation 0", "max_pool2d", (x4, 2, 1, 0, 0), {}, "dilation"),
    ("window larger than the input", "max_pool2d", (x4, 7), {}, "input"),
    ("dilated window larger than the input", "max_pool1d", (x3, 3, 1, 0, 4), {}, "input"),
    ("rank too low", "max_pool2d", (torch.randn(6, 6), 2), {}, "input"),
    ("rank too high", "max_pool1d", (x4, 2), {}, "input"),
    ("empty channel dimension", "max_pool2d", (torch.randn(2, 0, 6, 6), 2), {}, "input"),
    ("empty spatial dimension", "max_pool3d", (torch.randn(1, 2, 0, 4, 4), 2), {}, "input"),
    ("bool input", "max_pool2d", (x4 > 0, 2), {}, "dtype"),
    ("complex input", "max_pool1d", (x3.to(torch.complex64), 2), {}, "dtype"),
    ("kernel a float", "max_pool2d", (x4, 2.0), {}, "kernel_size"),
    ("stride a list holding a float", "max_pool2d", (x4, 2, [1.5]), {}, "stride"),
    ("padding None", "max_pool3d", (x5, 2, 2, None), {}, "padding"),
    ("dilation a tuple holding a string", "max_pool1d", (x3, 2, 1, 0, ("a",)), {}, "dilation"),
]
UNPOOL = [
    ("output_size of the wrong length", "max_unpool2d", (v4, i4, 2), {"output_size": (6, 6, 6)},
     "output_size"),
    ("output_size too large", "max_unpool2d", (v4, i4, 2), {"output_size": (9, 6)}, "output_size"),
    ("output_size too small", "max_unpool3d", (v5, i5, 2), {"output_size": (2, 4, 4)},
     "output_size"),
    ("index past the plane", "max_unpool2d", (v4, torch.full_like(i4, 36), 2), {}, "36"),
    ("negative index", "max_unpool1d", (v3, torch.full_like(i3, -1), 2), {}, "-1"),
    ("indices of another shape", "max_unpool2d", (v4, i4[:, :, :2], 2), {}, "indices"),
    ("float indices", "max_unpool2d", (v4, i4.float(), 2), {}, "indices"),
    ("stride 0", "max_unpool3d", (v5, i5, 2, 0), {}, "stride"),
    ("rank too low", "max_unpool2d", (v4[0, 0], i4[0, 0], 2), {}, "values"),
    ("bool values", "max_unpool1d", (v3 > 0, i3, 2), {}, "dtype"),
    ("kernel a float", "max_unpool2d", (v4, i4, 2.5), {}, "kernel_size"),
]


@pytest.mark.parametrize("what,name,args,kwargs,word", POOL + UNPOOL,
                         ids=[c[0] for c in POOL + UNPOOL])
def test_same_exception_as_pytorch(what, name, args, kwargs, word):
    if name.startswith("max_pool"):
        kwargs = dict(kwargs, return_indices=True)
    want = stock(getattr(F, name), *args, **kwargs)
    assert raised(want), f"{what}: PyTorch raised nothing"
    got = outcome(getattr(pt, name), *args, **kwargs)
    assert_same_outcome(got, want, what)
    assert word in got[2], f"{what}: poolgen's message does not name {word!r}: {got[2]}"
    # The drop-in leaves refused calls to PyTorch's kernel (the same message), but raises an
    # invalid index itself (PyTorch's out= kernels may write outside their output first): with
    # PyTorch's message (which PyTorch's tests and users match), then poolgen's.
    through_dropin = dropin(getattr(F, name), *args, **kwargs)
    index_error = "invalid max index" in want[2]
    assert_same_outcome(through_dropin, want, what + " (drop-in)", same_message=not index_error)
    if index_error:
        assert through_dropin[2] == f"{want[2]} (poolgen: {got[2]})"


def test_invalid_index_writes_nothing_outside():
    """An invalid index is reported, and nothing outside the output is written: through the
    drop-in's out= form into a view of a larger tensor, whose other bytes keep their value."""
    backing = torch.full((2, 3, 8, 8), 7.0)
    out = backing[:, :, 1:7, 1:7]
    bad = i4.clone()
    bad[1, 2, 1, 1] = 99
    with pytest.raises(RuntimeError, match="99"):
        pt.max_unpool2d(v4, bad, 2)
    with pt.enabled(), pytest.raises(RuntimeError, match="99"):
        torch.ops.aten.max_unpool2d.out(v4, bad, [6, 6], out=out)
    inside = torch.zeros_like(backing, dtype=torch.bool)
    inside[:, :, 1:7, 1:7] = True
    assert backing[~inside].eq(7).all()


def test_backward_op_errors():
    """The explicit backward ops check grad_output and indices against the window."""
    with pytest.raises(RuntimeError, match="grad_output"):
        torch.ops.poolgen.max_pool2d_with_indices_backward(
            torch.randn(2, 3, 2, 2), x4, [2], [2], [0], [1], False, i4)
    with pytest.raises(RuntimeError, match="indices"):
        torch.ops.poolgen.max_pool2d_with_indices_backward(
            v4, x4, [2], [2], [0], [1], False, i4[:, :1])
    with pytest.raises(RuntimeError, match="grad_output"):
        torch.ops.poolgen.max_unpool2d_backward(torch.randn(2, 3, 9, 9), i4, [2])
    with pytest.raises(RuntimeError, match="36"):
        torch.ops.poolgen.max_unpool2d_backward(torch.randn(2, 3, 6, 6),
                                                torch.full_like(i4, 36), [2])
    with pytest.raises(RuntimeError, match="dtype"):  # gradients are floats
        torch.ops.poolgen.max_unpool2d_backward(torch.zeros(2, 3, 6, 6, dtype=torch.int32), i4,
                                                [2])


def test_rank_beyond_five():
    with pytest.raises(RuntimeError, match="rank"):
        torch.ops.poolgen.max_pool3d_with_indices(torch.randn(1, 1, 1, 2, 2, 2), [2])


def test_dropin_leaves_refused_calls_to_pytorch_and_says_why():
    pt.reset_stats()
    with pt.enabled():
        assert raised(outcome(F.max_unpool2d, v4, i4.int(), 2))  # PyTorch takes int64 only
    stats = pt.stats()
    assert stats["max_unpool2d"] == {"poolgen": 0, "pytorch": 1}
    assert "int64" in stats["last_fallback"]
