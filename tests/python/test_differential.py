"""Random cases against the installed PyTorch: NaN, infinities, -0.0 and ties in the values;
dilation, padding, ceil_mode and empty windows; batch-less, channels-last and strided inputs;
every dtype; duplicate and invalid unpooling indices; order-sensitive gradient sums. Stock
PyTorch (one thread), poolgen.torch's functions and the drop-in (on one and two threads) must
give the same bits and strides, or raise the same exception type."""
import math
import random

import pytest
import torch
import torch.nn.functional as F

import poolgen.torch as pt
from helpers import (FLOATS, INTEGERS, assert_same, assert_same_outcome, dropin, lacks_kernel,
                     outcome, raised, special_values, stock, widened)

CASES = 60  # per rank, dtype class and thread count


def pick_layout(rng, x, nd):
    """x as contiguous, channels-last or a strided view (a slice of a bigger tensor, or a
    transpose made contiguous the other way)."""
    kind = rng.choice(["contiguous", "channels_last", "strided"])
    if kind == "channels_last" and x.dim() == nd + 2 and nd >= 2:
        return x.contiguous(memory_format=torch.channels_last if nd == 2 else torch.channels_last_3d)
    if kind == "strided":
        if x.dim() >= 3 and rng.random() < 0.5:  # swap the last two dims' storage order
            return x.transpose(-1, -2).contiguous().transpose(-1, -2)
        bigger = torch.zeros(*[s + 1 for s in x.shape[:-1]], x.shape[-1] * 2, dtype=x.dtype)
        view = bigger[tuple(slice(0, s) for s in x.shape[:-1]) + (slice(0, None, 2),)]
        view.copy_(x)
        return view
    return x


def random_tensor(rng, shape, dtype, nd):
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    n = 1
    for s in shape:
        n *= s
    return pick_layout(rng, special_values(dtype, n, g).reshape(shape), nd)


def order_sensitive_gradient(rng, shape, dtype):
    """Gradients whose sums depend on the order of the additions (large and small terms)."""
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    scale = torch.tensor([1e4, 1.0, -1e4, 1e-3, 3.0])[torch.randint(0, 5, shape, generator=g)]
    return (torch.randn(shape, generator=g) * scale).to(dtype)


def pool_args(rng, nd):
    kernel = [rng.randint(1, 4) for _ in range(nd)]
    args = dict(kernel_size=kernel if rng.random() < 0.7 else kernel[0],
                stride=None if rng.random() < 0.3 else [rng.randint(1, 3) for _ in range(nd)],
                padding=[rng.randint(0, k // 2) for k in kernel],
                dilation=[rng.randint(1, 3) for _ in range(nd)] if rng.random() < 0.4 else 1,
                ceil_mode=rng.random() < 0.4)
    if isinstance(args["kernel_size"], int):
        args["padding"] = args["padding"][0]
    return args


def input_shape(rng, nd, big=False):
    spatial = [rng.randint(24, 40) if big else rng.randint(1, 9) for _ in range(nd)]
    channels = rng.randint(16, 32) if big else rng.randint(1, 3)
    if rng.random() < 0.2:
        return [channels] + spatial  # batch-less
    return [rng.choice([0, 1, 2, 2, 3]) if not big else 2, channels] + spatial


def dtypes_of(kind):
    return FLOATS if kind == "float" else INTEGERS


def pools(nd):
    return getattr(F, f"max_pool{nd}d"), getattr(pt, f"max_pool{nd}d")


def pytorch_pool(nd, x, args):
    """Stock PyTorch's pooling, but for two faults of PyTorch 2's channels-last kernels, where
    the answer is its contiguous kernels' (and 1.13's, and poolgen's):
    - 3-D: a window whose taps are all -inf (the lowest integer) gets a wrong index (0, say)
      instead of its first tap's: the indices come from the contiguous kernel;
    - integers: planes beyond the value type's largest value (127 for int8) are refused
      ("integer_t"): the contiguous kernel answers, in channels-last."""
    f = getattr(F, f"max_pool{nd}d")
    want = stock(f, x, return_indices=True, **args)
    faulty = nd == 3 and x.dim() == 5 and not x.is_contiguous() and \
        x.is_contiguous(memory_format=torch.channels_last_3d)
    if raised(want) and "integer_t" in want[2]:
        faulty = True
        want = stock(f, x.contiguous(), return_indices=True, **args)
        fmt = torch.channels_last if nd == 2 else torch.channels_last_3d
        want = want if raised(want) else tuple(t.contiguous(memory_format=fmt) for t in want)
    if faulty and not raised(want):
        contiguous = stock(f, x.contiguous(), return_indices=True, **args)
        want = (want[0], want[1].copy_(contiguous[1]))
    return want


def pytorch_pool_gradient(nd, x, args, indices, g):
    """Stock PyTorch's gradient of pooling x, from `indices` (pytorch_pool's): its backward op, to
    which 1-D pooling goes as 2-D pooling of height 1, as its autograd does."""
    window = [args["kernel_size"], args["stride"] or [], args["padding"], args["dilation"]]
    if nd == 1:
        listed = [v if isinstance(v, (list, tuple)) else [v] for v in window]
        window = [[inner] + list(v) if v else [] for v, inner in zip(listed, (1, 1, 0, 1))]
        g, x, indices = g.unsqueeze(-2), x.unsqueeze(-2), indices.unsqueeze(-2)
    backward = getattr(torch.ops.aten, f"max_pool{max(nd, 2)}d_with_indices_backward")
    grad = backward(g, x, *window, args["ceil_mode"], indices)
    return grad.squeeze(-2) if nd == 1 else grad


def check_pool_case(nd, x, args, threads, what):
    stock_f, ours_f = pools(nd)
    want = pytorch_pool(nd, x, args)
    torch.set_num_threads(threads)
    got = outcome(ours_f, x, return_indices=True, **args)
    through_dropin = dropin(stock_f, x, return_indices=True, **args)
    torch.set_num_threads(1)
    assert_same_outcome(through_dropin, want, what + " (drop-in)", same_message=True)
    if lacks_kernel(want):  # poolgen has one: check it against PyTorch in a wider dtype
        wide = widened(x)
        if wide is None:
            return want
        want = pytorch_pool(nd, wide, args)
        want = want if raised(want) else (want[0].to(x.dtype), want[1])
    assert_same_outcome(got, want, what)
    return want


def pool_gradients(f, x, args, g):
    x = x.detach().clone().requires_grad_()
    values, _ = f(x, return_indices=True, **args)
    return torch.autograd.grad(values, x, g)[0]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kind", ["float", "integer"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_pool(nd, kind, threads):
    rng = random.Random(f"pool{nd}{kind}{threads}")
    stock_f, ours_f = pools(nd)
    checked = grads = beyond_planes = 0
    for case in range(CASES):
        dtype = rng.choice(dtypes_of(kind))
        x = random_tensor(rng, input_shape(rng, nd, big=case % 10 == 9), dtype, nd)
        args = pool_args(rng, nd)
        what = f"case {case}: {dtype} {tuple(x.shape)} strides {x.stride()} {args}"
        want = check_pool_case(nd, x, args, threads, what)
        checked += not raised(want)
        if kind == "float" and not raised(want):
            g = order_sensitive_gradient(rng, want[0].shape, dtype)
            # An empty window's index may lie past its plane: PyTorch adds that gradient there,
            # into the next plane (or past grad_input), where poolgen drops it (docs/semantics.md).
            # PyTorch gets -0.0 for those, which adds nothing anywhere.
            beyond = want[1] >= math.prod(x.shape[-nd:])
            want_grad = stock(pytorch_pool_gradient, nd, x, args, want[1],
                              g.masked_fill(beyond, -0.0))
            if raised(want_grad):
                # PyTorch has no such backward kernel (1.13: f16, 3-D bf16), nor the forward one
                # the drop-in would leave the call to. poolgen's sums there round as PyTorch 2's
                # do (the test on PyTorch 2, and tests/golden).
                assert lacks_kernel(want_grad), what + " grad: " + want_grad[2]
                continue
            torch.set_num_threads(threads)
            got_grad = outcome(pool_gradients, ours_f, x, args, g)
            dropin_grad = dropin(pool_gradients, stock_f, x, args, g)
            beyond_planes += bool(beyond.any())
            torch.set_num_threads(1)
            assert_same(got_grad, want_grad, what + " grad")
            assert_same(dropin_grad, want_grad, what + " grad (drop-in)")
            grads += 1
    assert checked > CASES // 2
    assert grads > 0 or kind == "integer"


def test_pool_nan_and_ties_exactly():
    """The window (1, NaN; 2, 2): PyTorch's rule gives NaN at offset 1; ties keep the first."""
    x = torch.tensor([[[[1.0, float("nan")], [2.0, 2.0]]], [[[2.0, 1.0], [2.0, 2.0]]]])
    values, indices = pt.max_pool2d(x, 2, return_indices=True)
    assert torch.isnan(values[0, 0, 0, 0]) and indices[0, 0, 0, 0] == 1
    assert values[1, 0, 0, 0] == 2.0 and indices[1, 0, 0, 0] == 0


def test_empty_windows():
    """Dilation and padding leave every tap of some windows outside the input: -inf, and the
    window's stepped start as the index (even outside the plane), as PyTorch gives."""
    x = torch.randn(1, 1, 1, 2)
    args = dict(kernel_size=(1, 2), stride=(3, 1), padding=(0, 1), dilation=(3, 3))
    want = F.max_pool2d(x, return_indices=True, **args)
    got = pt.max_pool2d(x, return_indices=True, **args)
    assert_same(got, want)
    assert torch.isinf(got[0]).any() and (got[1] >= 2).any()


def unpool_case(rng, nd, dtype, mode):
    """values, indices and F.max_unpool arguments: indices of a pooling with the same window
    (mode 0), random ones with duplicates (1), or some invalid (2)."""
    kernel = [rng.randint(1, 3) for _ in range(nd)]
    stride = [rng.randint(1, 3) for _ in range(nd)]
    padding = [rng.randint(0, k // 2) for k in kernel]
    shape = input_shape(rng, nd)
    while True:
        default = [(s - 1) * st - 2 * p + k for s, st, p, k in zip(shape[-nd:], stride, padding,
                                                                     kernel)]
        if min(default) >= 1:
            break
        shape[-nd:] = [s + 1 for s in shape[-nd:]]
    output_size = None
    if rng.random() < 0.3:
        output_size = [d + rng.randint(-(st - 1), st - 1) for d, st in zip(default, stride)]
        output_size = [max(1, o) for o in output_size]
    out_spatial = output_size or default
    plane = 1
    for s in out_spatial:
        plane *= s
    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    values = special_values(dtype, 1, g).new_empty(0)  # dtype only
    n = 1
    for s in shape:
        n *= s
    values = special_values(dtype, n, g).reshape(shape)
    if mode == 0:
        pooled_from = torch.randn(*shape[:-nd], *out_spatial, generator=g)
        try:
            _, indices = F.max_pool2d(pooled_from, kernel, stride, padding, return_indices=True) \
                if nd == 2 else getattr(F, f"max_pool{nd}d")(pooled_from, kernel, stride, padding,
                                                              return_indices=True)
        except RuntimeError:
            indices = None
        if indices is None or list(indices.shape) != list(shape):
            mode = 1
        else:
            values = special_values(dtype, n, g).reshape(indices.shape)
    if mode >= 1:
        indices = torch.randint(0, max(1, min(plane, 6)) if rng.random() < 0.5 else plane, shape,
                                generator=g)
        if mode == 2 and n > 0:
            flat = indices.view(-1)
            flat[rng.randrange(n)] = rng.choice([-1, plane, plane + 7])
    args = dict(kernel_size=kernel, stride=stride, padding=padding, output_size=output_size)
    return pick_layout(rng, values, nd), pick_layout(rng, indices, nd), args


def unpool_gradients(f, values, indices, args, g):
    values = values.detach().clone().requires_grad_()
    return torch.autograd.grad(f(values, indices, **args), values, g)[0]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_unpool(nd, threads):
    rng = random.Random(f"unpool{nd}{threads}")
    stock_f, ours_f = getattr(F, f"max_unpool{nd}d"), getattr(pt, f"max_unpool{nd}d")
    errors = grads = 0
    for case in range(2 * CASES):
        dtype = rng.choice(FLOATS + INTEGERS)
        values, indices, args = unpool_case(rng, nd, dtype, rng.choice([0, 0, 1, 1, 2]))
        what = (f"case {case}: {dtype} values {tuple(values.shape)} strides {values.stride()} "
                f"indices {indices.stride()} {args}")
        want = stock(stock_f, values, indices, **args)
        torch.set_num_threads(threads)
        got = outcome(ours_f, values, indices, **args)
        got_i32 = outcome(ours_f, values, indices.int(), **args)  # poolgen also takes int32
        through_dropin = dropin(stock_f, values, indices, **args)
        torch.set_num_threads(1)
        # Invalid indices: the drop-in raises poolgen's error itself (PyTorch's out= kernels may
        # write outside their output first), so only the type is the same.
        assert_same_outcome(through_dropin, want, what + " (drop-in)",
                            same_message=not (raised(want) and "invalid max index" in want[2]))
        if lacks_kernel(want):  # poolgen has one: check it against PyTorch in a wider dtype
            if widened(values) is None:
                continue
            want = stock(stock_f, widened(values), indices, **args)
            want = want if raised(want) else want.to(dtype)
        assert_same_outcome(got, want, what)
        assert_same_outcome(got_i32, want, what + " (int32 indices)")
        errors += raised(want)
        if dtype in FLOATS and not raised(want):
            g = order_sensitive_gradient(rng, want.shape, dtype)
            want_grad = stock(unpool_gradients, stock_f, values, indices, args, g)
            if raised(want_grad):
                continue
            torch.set_num_threads(threads)
            assert_same(outcome(unpool_gradients, ours_f, values, indices, args, g), want_grad,
                        what + " grad")
            torch.set_num_threads(1)
            grads += 1
    assert errors > 0 and grads > 0


def test_unpool_duplicates_latest_wins_on_two_threads():
    """Many values naming few slots, in a call big enough to share: the latest in input order
    wins on two threads, as PyTorch gives on one."""
    g = torch.Generator().manual_seed(7)
    values = torch.randn(4, 64, 32, 32, generator=g)
    indices = torch.randint(0, 8, values.shape, generator=g)
    want = F.max_unpool2d(values, indices, 2)
    torch.set_num_threads(2)
    assert_same(pt.max_unpool2d(values, indices, 2), want)
    with pt.enabled():
        assert_same(F.max_unpool2d(values, indices, 2), want)


@pytest.mark.parametrize("window", [(2, 1, 1), (0,), (1, 1, 1)],
                         ids=["extent 0", "kernel 0", "negative extent"])
def test_unpool_empty_extents_as_in_pytorch(window):
    """Unpooled extents of 0 ((1 - 1) * 1 - 2 + 2, or a kernel of 0): poolgen's C++ API refuses
    them; the functions return what the installed PyTorch returns (an empty tensor), and raise
    where it raises (a negative extent)."""
    values, indices = torch.randn(2, 3, 1, 1), torch.zeros(2, 3, 1, 1, dtype=torch.long)
    want = stock(F.max_unpool2d, values, indices, *window)
    assert_same_outcome(outcome(pt.max_unpool2d, values, indices, *window), want, str(window))
    with pytest.raises(ValueError, match="output_size"):  # the op itself keeps poolgen's rule
        torch.ops.poolgen.max_unpool2d(values, indices, [2], [1], [1])


def test_repeated_and_alternating_arguments():
    """The binding remembers the latest output shape per thread: calls that repeat an input's
    extents with other windows, ranks or a failure between them must not reuse a stale one."""
    x = torch.randn(2, 3, 9, 9)
    calls = [((2,), {}), ((3, 1, 1), {}), ((2,), {"ceil_mode": True}), ((2, 2, 0, 2), {}),
             ((2,), {}), ((9, 1, 4), {}), ((2,), {})]  # (9, 1, 4): padding over half, raises
    for args, kwargs in calls * 2:
        want = stock(F.max_pool2d, x, *args, return_indices=True, **kwargs)
        for got in (outcome(pt.max_pool2d, x, *args, return_indices=True, **kwargs),
                    dropin(F.max_pool2d, x, *args, return_indices=True, **kwargs)):
            assert_same_outcome(got, want, f"max_pool2d{args}{kwargs}")
        if not raised(want):
            values, indices = want
            for size in (None, list(x.shape[-2:]), [values.shape[-2] * 3, values.shape[-1] * 3]):
                want_unpooled = stock(F.max_unpool2d, values, indices, args[0], output_size=size)
                assert_same_outcome(outcome(pt.max_unpool2d, values, indices, args[0],
                                            output_size=size),
                                    want_unpooled, f"max_unpool2d{args} {size}")
    y = x.reshape(2, 3, 81)  # the same sizes' prefix at another rank
    assert_same_outcome(outcome(pt.max_pool1d, y, 2, return_indices=True),
                        stock(F.max_pool1d, y, 2, return_indices=True), "max_pool1d")
