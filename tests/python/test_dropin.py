"""The drop-in switch: enable / disable / enabled() give PyTorch's kernels back exactly; every
operator it serves is reached (forward, backward, out= forms, 1-D through 2-D); out= tensors
that need resizing and dtypes PyTorch lacks go to PyTorch's kernel; stats() counts it all."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import poolgen.torch as pt
from helpers import TORCH_2, assert_same, assert_same_outcome, dropin, outcome, raised, stock

x = torch.randn(2, 3, 8, 8)
x5 = torch.randn(2, 3, 4, 6, 6)


def counts(op):
    return pt.stats()[op]


def test_switch_and_context_manager_restore_pytorch():
    assert not pt.is_enabled()
    pt.enable()
    assert pt.is_enabled()
    pt.enable()  # idempotent
    pt.disable()
    assert not pt.is_enabled()
    with pt.enabled():
        assert pt.is_enabled()
        with pt.enabled(False):
            assert not pt.is_enabled()
        assert pt.is_enabled()
    assert not pt.is_enabled()
    pt.reset_stats()
    F.max_pool2d(x, 2, return_indices=True)
    assert counts("max_pool2d_with_indices") == {"poolgen": 0, "pytorch": 0}  # stock ran


def test_every_operator_is_served():
    pt.reset_stats()
    with pt.enabled():
        for f, inp in ((F.max_pool1d, x[:, :, 0]), (F.max_pool2d, x), (F.max_pool3d, x5)):
            t = inp.clone().requires_grad_()
            v, i = f(t, 2, return_indices=True)
            v.sum().backward()
        v2, i2 = F.max_pool2d(x, 2, return_indices=True)
        F.max_unpool2d(v2, i2, 2)
        F.max_unpool1d(*F.max_pool1d(x[:, :, 0], 2, return_indices=True), 2)
        v3, i3 = F.max_pool3d(x5, 2, return_indices=True)
        F.max_unpool3d(v3, i3, 2)
        aten = torch.ops.aten
        values, indices = torch.empty_like(v2), torch.empty_like(i2)
        aten.max_pool2d_with_indices.out(x, [2], out=values, indices=indices)
        aten.max_pool3d_with_indices.out(x5, [2], out=torch.empty_like(v3),
                                         indices=torch.empty_like(i3))
        aten.max_pool2d_with_indices_backward.grad_input(
            torch.ones_like(v2), x, [2], [2], [0], [1], False, i2, grad_input=torch.empty_like(x))
        aten.max_pool3d_with_indices_backward.grad_input(
            torch.ones_like(v3), x5, [2], [2], [0], [1], False, i3, grad_input=torch.empty_like(x5))
        aten.max_unpool2d.out(v2, i2, [8, 8], out=torch.empty_like(x))
        aten.max_unpool3d.out(v3, i3, [4, 6, 6], [2, 2, 2], [0, 0, 0], out=torch.empty_like(x5))
        for unpool, v, i in ((F.max_unpool2d, v2, i2), (F.max_unpool3d, v3, i3)):
            unpool(v.requires_grad_(), i, 2).sum().backward()
    stats = pt.stats()
    for op, served in [("max_pool2d_with_indices", 4), ("max_pool3d_with_indices", 2),
                       ("max_pool2d_with_indices_backward", 2),
                       ("max_pool3d_with_indices_backward", 1), ("max_unpool2d", 3),
                       ("max_unpool3d", 2), ("max_pool2d_with_indices.out", 1),
                       ("max_pool3d_with_indices.out", 1),
                       ("max_pool2d_with_indices_backward.grad_input", 1),
                       ("max_pool3d_with_indices_backward.grad_input", 1),
                       ("max_unpool2d.out", 1), ("max_unpool3d.out", 1),
                       ("max_unpool2d_backward", 1), ("max_unpool3d_backward", 1)]:
        assert stats[op] == {"poolgen": served, "pytorch": 0}, (op, stats[op], stats)
    assert stats["last_fallback"] == ""


@pytest.mark.parametrize("resize", [False, True])
def test_out_forms(resize):
    """out= tensors of the result's shape are filled by poolgen; others PyTorch resizes."""
    want = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    shape = (1,) if resize else want[0].shape
    values, indices = torch.empty(shape), torch.empty(shape, dtype=torch.long)
    pt.reset_stats()
    with pt.enabled():
        got = torch.ops.aten.max_pool2d_with_indices.out(x, [3], [2], [1], out=values,
                                                         indices=indices)
    assert got[0] is values and got[1] is indices
    assert_same((values, indices), want)
    served = counts("max_pool2d_with_indices.out")
    assert served == ({"poolgen": 0, "pytorch": 1} if resize else {"poolgen": 1, "pytorch": 0})
    want_unpool = F.max_unpool2d(*want, 3, 2, 1, output_size=x.shape)
    out = torch.empty(1 if resize else want_unpool.shape)
    with pt.enabled():
        torch.ops.aten.max_unpool2d.out(*want, list(want_unpool.shape[-2:]), out=out)
    assert_same(out, want_unpool)


def unpool_gradient(unpool, v, i, *args, create_graph=False):
    """The gradient of unpool(v, i, *args) in v for a fixed random grad_output, and that
    grad_output (which, with create_graph, the gradient is differentiable in)."""
    v = v.detach().clone().requires_grad_()
    y = unpool(v, i, *args)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(1), dtype=y.dtype)
    g.requires_grad_(create_graph)
    return torch.autograd.grad(y, v, g, create_graph=create_graph)[0], g


@pytest.mark.parametrize("layout", ["nchw", "nhwc", "batch-less", "3-d"])
def test_unpooling_gradient(layout):
    """Autograd's gradient of max_unpool2d/3d (aten has no operator of its own for it) runs on
    poolgen: the same bits and strides as PyTorch's, counted as served."""
    inp = {"nchw": x, "nhwc": x.contiguous(memory_format=torch.channels_last), "batch-less": x[0],
           "3-d": x5}[layout]
    nd = 3 if layout == "3-d" else 2
    pool, unpool = getattr(F, f"max_pool{nd}d"), getattr(F, f"max_unpool{nd}d")
    v, i = pool(inp, 3, 2, 1, return_indices=True)
    args = (3, 2, 1, inp.shape[-nd:])
    want = unpool_gradient(unpool, v, i, *args)
    pt.reset_stats()
    with pt.enabled():
        got = unpool_gradient(unpool, v, i, *args)
    assert_same(got[0], want[0])
    assert counts(f"max_unpool{nd}d_backward") == {"poolgen": 1, "pytorch": 0}


def test_unpooling_gradient_keeps_pytorchs_other_derivatives():
    """Second derivatives (create_graph) take PyTorch's own formula, forward-mode AD unpools the
    tangent, and gradcheck / gradgradcheck pass, all with the drop-in on."""
    xd = x.double()
    v, i = F.max_pool2d(xd, 2, return_indices=True)
    want = unpool_gradient(F.max_unpool2d, v, i, 2, create_graph=True)
    pt.reset_stats()
    with pt.enabled():
        got = unpool_gradient(F.max_unpool2d, v, i, 2, create_graph=True)
        weights = torch.randn(got[0].shape, dtype=got[0].dtype)  # a scatter-add of these
        assert_same(torch.autograd.grad(got[0], got[1], weights)[0],
                    torch.autograd.grad(want[0], want[1], weights)[0])
        vg = v.detach().clone().requires_grad_()
        assert torch.autograd.gradcheck(lambda t: F.max_unpool2d(t, i, 2), (vg,))
        assert torch.autograd.gradgradcheck(lambda t: F.max_unpool2d(t, i, 2), (vg,))
        import torch.autograd.forward_ad as fw
        tangent = torch.randn_like(v)
        with fw.dual_level():
            y = F.max_unpool2d(fw.make_dual(v, tangent), i, 2)
            assert_same(fw.unpack_dual(y).tangent, F.max_unpool2d(tangent, i, 2))
    assert_same(got[0].detach(), want[0].detach())
    assert counts("max_unpool2d_backward")["poolgen"] >= 1  # gradcheck's first derivatives


@pytest.mark.skipif(not TORCH_2, reason="torch.func is PyTorch 2's")
def test_unpooling_gradient_under_torch_func():
    """functorch's transforms (vjp, jvp, per-sample grad under vmap) give PyTorch's results with
    the drop-in on, as with aten's own autograd kernel."""
    from torch.func import grad, jvp, vjp, vmap
    v, i = F.max_pool2d(x, 2, return_indices=True)
    g = torch.randn(x.shape)

    def run():
        unpool = lambda t: F.max_unpool2d(t, i, 2)  # noqa: E731
        per_sample = vmap(grad(lambda t, j: (F.max_unpool2d(t, j, 2) * 3).sum()))
        return (vjp(unpool, v)[1](g)[0], jvp(unpool, (v,), (v * 2,))[1],
                per_sample(v.unsqueeze(1), i.unsqueeze(1)))
    want = run()
    with pt.enabled():
        assert_same(run(), want)


def test_dtypes_pytorch_lacks_go_to_pytorch():
    """The drop-in serves no dtype PyTorch's kernel refuses: such calls raise as PyTorch does."""
    half = x.half()
    want = outcome(F.max_pool2d, half, 2, return_indices=True)
    pt.reset_stats()
    with pt.enabled():
        got = outcome(F.max_pool2d, half, 2, return_indices=True)
    assert_same_outcome(got, want, "f16 max_pool2d", same_message=True)
    assert counts("max_pool2d_with_indices") == (
        {"poolgen": 1, "pytorch": 0} if not raised(want) else {"poolgen": 0, "pytorch": 1})


def test_modules_unchanged():
    """torch.nn's own modules run on poolgen under the switch."""
    pool, unpool = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)
    want = unpool(*pool(x))
    pt.reset_stats()
    with pt.enabled():
        assert_same(unpool(*pool(x)), want)
    assert counts("max_pool2d_with_indices")["poolgen"] == 1
    assert counts("max_unpool2d")["poolgen"] == 1


def test_poolgen_modules_mirror_torch_nn():
    for cls, base in ((pt.MaxPool2d, nn.MaxPool2d), (pt.MaxUnpool3d, nn.MaxUnpool3d)):
        m, b = cls(3, 2, 1), base(3, 2, 1)
        assert isinstance(m, base) and repr(m) == repr(b)
        assert m.state_dict().keys() == b.state_dict().keys()
    pool = pt.MaxPool1d(3, 2, 1, dilation=1, ceil_mode=True, return_indices=True)
    assert_same(pool(x[:, :, 0]), nn.MaxPool1d(3, 2, 1, ceil_mode=True,
                                               return_indices=True)(x[:, :, 0]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_tensors_stay_with_pytorch():
    """The drop-in replaces CPU kernels only: CUDA tensors run PyTorch's CUDA kernels."""
    xc = x.cuda()
    want = F.max_pool2d(xc, 2, return_indices=True)
    pt.reset_stats()
    with pt.enabled():
        assert_same(F.max_pool2d(xc, 2, return_indices=True), want)
    assert counts("max_pool2d_with_indices") == {"poolgen": 0, "pytorch": 0}


def test_threads_follow_torch():
    """poolgen runs on torch.set_num_threads's count: results are the same on 1 and 2."""
    big = torch.randn(4, 64, 40, 40)
    want = F.max_pool2d(big, 3, 2, 1, return_indices=True)
    for threads in (2, 1, 2):
        torch.set_num_threads(threads)
        with pt.enabled():
            assert_same(F.max_pool2d(big, 3, 2, 1, return_indices=True), want)
        assert_same(pt.max_pool2d(big, 3, 2, 1, return_indices=True), want)


def test_torch_version_behaviours_are_asked_not_assumed():
    """PyTorch 1.13's 3-D pooling gives contiguous outputs for channels-last inputs, 2.x's
    channels-last ones: poolgen gives what the installed one gives."""
    cl = x5.contiguous(memory_format=torch.channels_last_3d)
    want = F.max_pool3d(cl, 2, return_indices=True)
    assert_same(pt.max_pool3d(cl, 2, return_indices=True), want)
    assert want[0].is_contiguous(memory_format=torch.channels_last_3d) == TORCH_2


def test_forked_children_run_poolgen():
    """A process forked after poolgen's threads started (a DataLoader worker, multiprocessing)
    runs poolgen on its calling thread instead of waiting for threads it does not have. (The child
    compares small slices only: PyTorch's own OpenMP pool does not survive a fork either.)"""
    import os
    import time
    torch.set_num_threads(2)
    big = torch.randn(8, 64, 112, 112)
    want = pt.max_pool2d(big, 2, return_indices=True)
    child = os.fork()
    if child == 0:
        got = pt.max_pool2d(big, 2, return_indices=True)
        with pt.enabled():
            through_dropin = F.max_pool2d(big, 2, return_indices=True)
        ok = all(a[n, c].equal(w[n, c]) for result in (got, through_dropin)
                 for a, w in zip(result, want) for n in range(8) for c in (0, 63))
        os._exit(0 if ok else 3)
    for _ in range(600):
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        time.sleep(0.1)
    else:
        os.kill(child, 9)
        os.waitpid(child, 0)
        raise AssertionError("the forked child hung")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def pooled_sample(k):
    """One DataLoader sample, pooled (and unpooled) inside the worker process."""
    x = torch.randn(4, 32, 32, generator=torch.Generator().manual_seed(k))
    values, indices = F.max_pool2d(x, 2, return_indices=True)
    return values, indices, F.max_unpool2d(values, indices, 2)


class PooledSamples(torch.utils.data.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, k):
        return pooled_sample(k)


def test_dataloader_workers_forked_after_use():
    """DataLoader workers, forked after poolgen's threads ran in the parent, serve their samples
    with the drop-in on, with stock's bits."""
    torch.set_num_threads(2)
    big = torch.randn(8, 64, 64, 64)
    with pt.enabled():
        F.max_pool2d(big, 2, return_indices=True)  # the parent's threads are running
        loader = torch.utils.data.DataLoader(PooledSamples(), batch_size=None, num_workers=2)
        got = list(loader)
    want = [pooled_sample(k) for k in range(6)]
    for k, (g, w) in enumerate(zip(got, want)):
        assert_same(list(g), list(w), f"sample {k}")


def test_inter_op_threads():
    """Calls from PyTorch's inter-op pool (torch.jit.fork) and from several Python threads at once
    give stock's bits."""
    import threading
    torch.set_num_threads(2)
    xs = [torch.randn(2, 16, 48, 48, generator=torch.Generator().manual_seed(k)) for k in range(8)]
    want = [F.max_pool2d(x, 3, 2, 1, return_indices=True) for x in xs]

    def pool(x):
        return F.max_pool2d(x, 3, 2, 1, return_indices=True)

    with pt.enabled():
        futures = [torch.jit.fork(pool, x) for x in xs]
        forked = [torch.jit.wait(f) for f in futures]
        threaded = [None] * len(xs)

        def run(k):
            for _ in range(20):
                threaded[k] = pool(xs[k])

        threads = [threading.Thread(target=run, args=(k,)) for k in range(len(xs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for k in range(len(xs)):
        assert_same(forked[k], want[k], f"forked {k}")
        assert_same(threaded[k], want[k], f"thread {k}")


def test_windows_alternating_on_one_thread():
    """The binding remembers the latest window's options per thread: alternating windows, a
    refused one between them and the same window spelt differently all give stock's results."""
    x = torch.randn(2, 3, 9, 9)
    windows = [dict(kernel_size=2), dict(kernel_size=2, ceil_mode=True),
               dict(kernel_size=3, stride=1), dict(kernel_size=2, padding=2),
               dict(kernel_size=(2, 2), stride=(2, 2)), dict(kernel_size=3, stride=2, padding=1)]
    for w in windows * 2:
        f = lambda: F.max_pool2d(x, return_indices=True, **w)  # noqa: E731
        assert_same_outcome(dropin(f), stock(f), f"max_pool2d {w}")
        g = lambda: F.max_unpool2d(*stock(F.max_pool2d, x, 2, return_indices=True), **{  # noqa
            k: v for k, v in w.items() if k != "ceil_mode"})
        assert_same_outcome(dropin(g), stock(g), f"max_unpool2d {w}")


def test_repeated_calls_run_prepared():
    """A call repeating the thread's latest arguments of its op but their data (pooling, its
    gradient, unpooling) reruns their prepared call, on outputs allocated as PyTorch allocates
    them: repeats on new data in each layout (a channels-last input, one whose outputs' strides
    are contiguous but for unit extents, a batch-less one, a strided one, an expanded one, 1-D),
    with a call whose outputs are given between repeats and a repeat whose index is out of range,
    all give stock's results (strides included) or raise as stock does."""
    base = torch.randn(2, 3, 8, 8)
    layouts = [lambda t: t, lambda t: t.contiguous(memory_format=torch.channels_last),
               lambda t: t[:1, :, :2, :2].contiguous(memory_format=torch.channels_last),
               lambda t: t[0], lambda t: t[:, :, :, :7],
               lambda t: t[:1, :1, :1, :1].expand(2, 3, 8, 8), lambda t: t.flatten(-2)]
    for k, layout in enumerate(layouts):
        nd = 1 if k == len(layouts) - 1 else 2
        pool, unpool = (F.max_pool1d, F.max_unpool1d) if nd == 1 else (F.max_pool2d,
                                                                       F.max_unpool2d)
        for round in range(4):
            data = layout(base * (round + 1) - round)
            f = lambda: pool(data, 2, return_indices=True)  # noqa: E731
            assert_same_outcome(dropin(f), stock(f), f"layout {k} round {round}")
            values, indices = stock(f)
            if round == 3:  # a slot past the plane: raised by the repeated call's kernel
                indices = indices.clone()
                indices[..., -1] = data.shape[-1] * (data.shape[-2] if nd == 2 else 1)
            grad = values * 2 + 1
            # aten's 1-D gradient is the 2-D one's with a unit height.
            two_d = (lambda t: t.unsqueeze(-2)) if nd == 1 else (lambda t: t)
            window = [1, 2] if nd == 1 else [2, 2]
            g = lambda: torch.ops.aten.max_pool2d_with_indices_backward(  # noqa: E731
                two_d(grad), two_d(data), window, window, [0, 0], [1, 1], False, two_d(indices))
            if round < 3:  # PyTorch's gradient reads out of bounds at an invalid index
                assert_same_outcome(dropin(g), stock(g), f"gradient, layout {k} round {round}")
            u = lambda: unpool(values, indices, 2, output_size=list(data.shape[-nd:]))  # noqa
            assert_same_outcome(dropin(u), stock(u), f"unpooling, layout {k} round {round}")
            if round == 1:
                with pt.enabled():
                    got = torch.empty(0), torch.empty(0, dtype=torch.long)
                    torch.ops.aten.max_pool2d_with_indices.out(base, [2], out=got[0],
                                                               indices=got[1])
                assert_same(got, stock(F.max_pool2d, base, 2, return_indices=True))
