"""PyTorch 2's compiler stack: the fake kernels let torch.library.opcheck, torch.compile (full
graph, forward and backward) and torch.export take poolgen's ops. PyTorch 1.x has none of it."""
import pytest
import torch

import poolgen.torch as pt
from helpers import assert_same

if not hasattr(torch.library, "opcheck"):
    pytest.skip("PyTorch 1.x: no torch.library.opcheck, torch.compile or torch.export",
                allow_module_level=True)

ops = torch.ops.poolgen


def samples():
    """(op, args) for every op: batched and batch-less, channels-last, overlapping windows."""
    g = torch.Generator().manual_seed(0)
    x = {1: torch.randn(2, 3, 9, generator=g), 2: torch.randn(2, 3, 7, 8, generator=g),
         3: torch.randn(1, 2, 5, 6, 4, generator=g)}
    cases = []
    for nd, t in x.items():
        for inp in (t, t[0]) + ((t.contiguous(memory_format=torch.channels_last),) if nd == 2
                                else ()):
            inp = inp.clone().requires_grad_()
            window = ([3] * nd, [2] * nd, [1] * nd, [1] * nd, True)
            cases.append((getattr(ops, f"max_pool{nd}d_with_indices"), (inp, *window)))
            values, indices = getattr(ops, f"max_pool{nd}d_with_indices")(inp.detach(), *window)
            cases.append((getattr(ops, f"max_pool{nd}d_with_indices_backward"),
                          (torch.randn(values.shape, generator=g), inp.detach(), *window,
                           indices)))
            v = values.detach().clone().requires_grad_()
            cases.append((getattr(ops, f"max_unpool{nd}d"),
                          (v, indices, [3] * nd, [2] * nd, [1] * nd, list(inp.shape[-nd:]))))
            cases.append((getattr(ops, f"max_unpool{nd}d_backward"),
                          (torch.randn(inp.shape, generator=g), indices, [3] * nd, [2] * nd,
                           [1] * nd)))
    return cases


CASES = samples()


@pytest.mark.parametrize("op,args", CASES, ids=[f"{op._qualified_op_name}-{k}"
                                                 for k, (op, args) in enumerate(CASES)])
def test_opcheck(op, args):
    torch.library.opcheck(op, args)


def segnet_step(x):
    """Pooling and unpooling of every rank, with an element-wise op between (no reduction, whose
    order a compiler may change)."""
    values, indices = pt.max_pool2d(x, 2, return_indices=True)
    y = pt.max_unpool2d(values.relu(), indices, 2, output_size=x.shape[-2:])
    y3, _ = pt.max_pool3d(y.unsqueeze(1), (1, 3, 3), 1, (0, 1, 1), return_indices=True)
    return pt.max_pool1d(y3.flatten(2), 3, 2, 1), indices


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_forward_and_backward(backend):
    x = torch.randn(2, 3, 12, 10, requires_grad=True)
    want = segnet_step(x)
    g = torch.randn(want[0].shape)
    (want_grad,) = torch.autograd.grad(want[0], x, g)
    compiled = torch.compile(segnet_step, fullgraph=True, backend=backend, dynamic=False)
    got = compiled(x)
    (got_grad,) = torch.autograd.grad(got[0], x, g)
    assert_same(got, want)
    assert_same(got_grad, want_grad)


def test_compile_dynamic_shapes():
    compiled = torch.compile(segnet_step, fullgraph=True, backend="aot_eager", dynamic=True)
    for shape in ((2, 3, 12, 10), (1, 3, 14, 16)):
        x = torch.randn(*shape)
        assert_same(compiled(x), segnet_step(x))


def test_export():
    class Net(torch.nn.Module):
        def forward(self, x):
            values, indices = pt.max_pool2d(x, 2, return_indices=True)
            return pt.max_unpool2d(values, indices, 2)

    x = torch.randn(2, 3, 8, 8)
    exported = torch.export.export(Net(), (x,))
    graph = str(exported.graph)
    assert "poolgen.max_pool2d_with_indices" in graph and "poolgen.max_unpool2d" in graph
    assert_same(exported.module()(x), Net()(x))
