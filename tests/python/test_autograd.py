"""Gradients of poolgen's ops: gradcheck and gradgradcheck in f64 (distinct values, so that
finite differences see no ties), for every rank, batch-less and channels-last inputs, and the
same through the drop-in; the ops' own backward ops are differentiable too."""
import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

import poolgen.torch as pt
from helpers import assert_same


def distinct(shape, seed, memory_format=torch.contiguous_format):
    """Values far apart (a permutation), so that no window holds a near-tie."""
    n = 1
    for s in shape:
        n *= s
    g = torch.Generator().manual_seed(seed)
    values = torch.randperm(n, generator=g).to(torch.float64).reshape(shape) / n - 0.5
    return values.contiguous(memory_format=memory_format).requires_grad_()


SHAPES = {1: [(2, 3, 9), (3, 8)], 2: [(2, 2, 7, 6), (2, 5, 6)], 3: [(1, 2, 5, 4, 6), (2, 4, 5, 4)]}
FORMATS = {2: torch.channels_last, 3: torch.channels_last_3d}


def cases():
    for nd, shapes in SHAPES.items():
        for shape in shapes:
            yield nd, shape, torch.contiguous_format
            if len(shape) == nd + 2 and nd in FORMATS:
                yield nd, shape, FORMATS[nd]


CASES = list(cases())


@pytest.mark.parametrize("nd,shape,fmt", CASES, ids=[f"{nd}d-{s}-{str(f)[6:]}" for nd, s, f in CASES])
@pytest.mark.parametrize("window", [dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1),
                                    dict(kernel_size=2, stride=1, dilation=2, ceil_mode=True)])
def test_pool(nd, shape, fmt, window):
    x = distinct(shape, nd, fmt)
    f = getattr(pt, f"max_pool{nd}d")
    assert gradcheck(lambda t: f(t, **window), (x,))
    assert gradgradcheck(lambda t: f(t, **window), (x,))


@pytest.mark.parametrize("nd,shape,fmt", CASES, ids=[f"{nd}d-{s}-{str(f)[6:]}" for nd, s, f in CASES])
def test_unpool(nd, shape, fmt):
    x = distinct(shape, 10 + nd, fmt)
    pool, unpool = getattr(pt, f"max_pool{nd}d"), getattr(pt, f"max_unpool{nd}d")
    # Windows apart: a duplicate index would make only its latest value count, which finite
    # differences see and the gradient (a gather, PyTorch's too) does not.
    values, indices = pool(x.detach(), 2, return_indices=True)
    values = values.detach().requires_grad_()
    assert gradcheck(lambda v: unpool(v, indices, 2, output_size=x.shape[-nd:]), (values,))
    assert gradgradcheck(lambda v: unpool(v, indices, 2, output_size=x.shape[-nd:]), (values,))


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_backward_ops_are_differentiable(nd):
    """The backward ops themselves, in their grad_output: gradcheck and gradgradcheck."""
    shape = SHAPES[nd][0]
    x = distinct(shape, 20 + nd).detach()
    values, indices = getattr(pt, f"max_pool{nd}d")(x, 3, 1, 1, return_indices=True)
    grad = distinct(values.shape, 30 + nd)
    backward = getattr(torch.ops.poolgen, f"max_pool{nd}d_with_indices_backward")
    args = ([3] * nd, [1] * nd, [1] * nd, [1] * nd, False, indices)
    assert gradcheck(lambda g: backward(g, x, *args), (grad,))
    assert gradgradcheck(lambda g: backward(g, x, *args), (grad,))
    unpooled = distinct(x.shape, 40 + nd)
    unpool_backward = getattr(torch.ops.poolgen, f"max_unpool{nd}d_backward")
    pooled_indices = getattr(pt, f"max_pool{nd}d")(x, 2, return_indices=True)[1]
    assert gradcheck(lambda g: unpool_backward(g, pooled_indices, [2] * nd), (unpooled,))
    assert gradgradcheck(lambda g: unpool_backward(g, pooled_indices, [2] * nd), (unpooled,))


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_dropin_second_derivatives_equal_pytorch(nd):
    """Through the drop-in, double backward (PyTorch's own formulas over poolgen's kernels) gives
    PyTorch's bits."""
    import torch.nn.functional as F
    f = getattr(F, f"max_pool{nd}d")
    x = distinct(SHAPES[nd][0], 50 + nd)

    def second(use_poolgen):
        with pt.enabled(use_poolgen):
            y = f(x, 3, 1, 1)
            (g,) = torch.autograd.grad(y.sin().sum(), x, create_graph=True)
            return torch.autograd.grad(g.pow(2).sum(), x)[0], g

    assert_same(second(True), second(False))
    with pt.enabled():
        assert gradgradcheck(lambda t: f(t, 3, 1, 1), (x,))
