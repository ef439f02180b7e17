"""torch.use_deterministic_algorithms(True): stock PyTorch refuses max_unpool1d/2d/3d ("does not
have a deterministic implementation"; on CUDA also MaxPool3d's backward). poolgen's ops are
deterministic on every device, so what the drop-in serves runs instead of raising: the one
intended difference from stock (docs/pytorch.md). With warn_only=True it warns about nothing.
What falls back to PyTorch's kernel keeps PyTorch's behaviour."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import poolgen.torch as pt
from helpers import assert_same


@pytest.fixture
def deterministic():
    was, warn_only = (torch.are_deterministic_algorithms_enabled(),
                      torch.is_deterministic_algorithms_warn_only_enabled())
    yield
    torch.use_deterministic_algorithms(was, warn_only=warn_only)


def unpool_cases():
    x1 = torch.randn(2, 3, 16)
    x2 = torch.randn(2, 3, 8, 8)
    x3 = torch.randn(2, 3, 4, 6, 6)
    return [(F.max_unpool1d, *F.max_pool1d(x1, 2, return_indices=True)),
            (F.max_unpool2d, *F.max_pool2d(x2, 2, return_indices=True)),
            (F.max_unpool3d, *F.max_pool3d(x3, 2, return_indices=True))]


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_stock_refuses_unpooling_and_the_dropin_runs_it(deterministic, nd):
    unpool, values, indices = unpool_cases()[nd - 1]
    want = unpool(values, indices, 2)  # deterministic mode off: stock's result
    torch.use_deterministic_algorithms(True)
    with pytest.raises(RuntimeError, match="deterministic"):
        unpool(values, indices, 2)
    pt.reset_stats()
    with pt.enabled():
        got = unpool(values, indices, 2)
    assert_same(got, want, f"max_unpool{nd}d")
    op = "max_unpool3d" if nd == 3 else "max_unpool2d"
    assert pt.stats()[op]["poolgen"] == 1


def test_warn_only_warns_about_nothing_served(deterministic):
    torch.use_deterministic_algorithms(True, warn_only=True)
    with pt.enabled(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for unpool, values, indices in unpool_cases():
            unpool(values, indices, 2)
    assert not [w for w in caught if "deterministic" in str(w.message)], \
        [str(w.message) for w in caught]
    # Stock warns, which shows the check is live.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        unpool, values, indices = unpool_cases()[1]
        unpool(values, indices, 2)
    assert [w for w in caught if "deterministic" in str(w.message)]


def test_training_runs_deterministically(deterministic):
    torch.use_deterministic_algorithms(True)
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    with pt.enabled():
        results = []
        for _ in range(2):
            x.grad = None
            v, i = F.max_pool2d(x, 2, return_indices=True)
            out = F.max_unpool2d(v * 2, i, 2)
            out.square().sum().backward()
            results.append((out.detach().clone(), x.grad.clone()))
    assert_same(results[1], results[0], "two runs")
