"""Every layout PyTorch's pooling kernels treat specially, through the drop-in: each dimension
order (batched and batch-less), channels-last inputs without their batch extent, dense and
sliced views, broadcast (stride 0) views and extents of 1. Outputs must have the installed
PyTorch's strides, bits and exceptions (PyTorch 2 refuses a batch-less 3-D input in 2-D
channels-last order, and gives a dense batch-less channels-last-3d input a channels-last
output)."""
import itertools
import os

import pytest
import torch
import torch.nn.functional as F

import poolgen.torch as pt
from helpers import assert_same_outcome, dropin, raised, stock

POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
UNPOOL = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}
BACKWARD = {2: torch.ops.aten.max_pool2d_with_indices_backward,
            3: torch.ops.aten.max_pool3d_with_indices_backward}
SPATIAL = {1: (9,), 2: (6, 8), 3: (4, 6, 8)}


def in_order(shape, order, generator):
    """A dense tensor of `shape` whose memory holds its dimensions in `order` (outermost first)."""
    base = torch.randn([shape[d] for d in order], generator=generator)
    return base.permute(*[order.index(d) for d in range(len(shape))])


def layouts(nd, generator):
    """(name, tensor) pairs for pooling nd spatial dimensions."""
    cases = []
    for batched in (True, False):
        shape = ((2, 3) if batched else (3,)) + SPATIAL[nd]
        for order in itertools.permutations(range(len(shape))):
            cases.append((f"{shape} order {order}", in_order(shape, order, generator)))
    if nd > 1:
        channels_last = torch.channels_last if nd == 2 else torch.channels_last_3d
        for extents in [(1, 3), (2, 1), (1, 1)]:
            shape = extents + SPATIAL[nd]
            x = torch.randn(shape, generator=generator)
            cases.append((f"{shape} channels-last", x.contiguous(memory_format=channels_last)))
            cases.append((f"{shape[1:]} channels-last, batch squeezed",
                          x[:1].contiguous(memory_format=channels_last).squeeze(0)))
        x = torch.randn((1, 6) + SPATIAL[nd], generator=generator)
        dense = x.contiguous(memory_format=channels_last).squeeze(0)
        cases.append(("batch-less channels-last, channels sliced", dense[::2]))
        cases.append(("batch-less channels-last, columns sliced", dense[..., ::2]))
    x = torch.randn((2, 3) + SPATIAL[nd], generator=generator)
    cases.append(("columns sliced", x[..., ::2]))
    cases.append(("channels broadcast", x[:, :1].expand(x.shape)))
    for d in range(nd):  # an extent of 1 in one spatial dimension
        shape = list((2, 3) + SPATIAL[nd])
        shape[2 + d] = 1
        cases.append((f"{tuple(shape)}", torch.randn(shape, generator=generator)))
    return cases


def window(nd, shape):
    """A window that fits every extent of `shape` (2, or 1 where an extent is 1)."""
    return [2 if e > 1 else 1 for e in shape[-nd:]]


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_pooling_and_unpooling_follow_pytorch_layouts(nd):
    generator = torch.Generator().manual_seed(nd)
    for name, x in layouts(nd, generator):
        k = window(nd, x.shape)

        def pool():
            return POOL[nd](x, k, return_indices=True)

        def unpool():
            values, indices = POOL[nd](x, k, return_indices=True)
            return UNPOOL[nd](values, indices, k, output_size=x.shape[-nd:])

        def gradient():
            leaf = x.detach().requires_grad_()
            values = POOL[nd](leaf, k)
            values.backward(torch.ones_like(values))
            return leaf.grad

        for op, f in (("pool", pool), ("unpool", unpool), ("autograd", gradient)):
            assert_same_outcome(dropin(f), stock(f), f"{nd}-d {op}, {name}")


@pytest.mark.parametrize("nd", [2, 3])
def test_backward_kernels_follow_pytorch_layouts(nd):
    """aten's backward ops called directly: their own output, before autograd restrides it."""
    generator = torch.Generator().manual_seed(10 + nd)
    for name, x in layouts(nd, generator):
        k = window(nd, x.shape)
        pooled = stock(POOL[nd], x, k, return_indices=True)
        if raised(pooled):
            continue  # a layout PyTorch refuses (test_pooling_and_unpooling_follow_...)
        values, indices = pooled
        for grad_name, grad in (("grad as pooled", torch.ones_like(values)),
                                ("grad contiguous", torch.ones(values.shape))):
            def backward():
                return BACKWARD[nd](grad, x, k, k, [0] * nd, [1] * nd, False, indices)
            assert_same_outcome(dropin(backward), stock(backward),
                                f"{nd}-d backward, {name}, {grad_name}")


def test_batchless_channels_last_3d_pools_to_channels_last():
    """PyTorch 2's test_max_pool3d_ndhwc case: strides (1, 12, 6, 6), as stock gives them."""
    x = torch.randn(1, 6, 14, 12, 13).contiguous(memory_format=torch.channels_last_3d).squeeze(0)
    f = lambda: F.max_pool3d(x, (5, 6, 7), return_indices=True)  # noqa: E731
    want = stock(f)
    pt.reset_stats()
    assert_same_outcome(dropin(f), want, "batch-less channels-last-3d")
    assert pt.stats("cpu")["max_pool3d_with_indices"]["poolgen"] == 1


def test_batchless_gradient_follows_grad_output():
    """PyTorch 2's batch-less 3-D gradient is channels-last where grad_output is (dense, and not
    also contiguous: a 1x1x1 output is both, and gets a contiguous gradient)."""
    for spatial, k in (((4, 6, 8), 2), ((3, 6, 5), 3)):
        x = torch.randn((2,) + spatial)
        values, indices = stock(F.max_pool3d, x, k, return_indices=True)
        grads = [torch.randn(values.shape),
                 torch.randn((1,) + values.shape).contiguous(
                     memory_format=torch.channels_last_3d).squeeze(0)]
        for grad in grads:
            def backward():
                return BACKWARD[3](grad, x, [k] * 3, [k] * 3, [0] * 3, [1] * 3, False, indices)
            assert_same_outcome(dropin(backward), stock(backward),
                                f"batch-less {spatial}, grad strides {grad.stride()}")


def vm_flags(address):
    """The VmFlags of the mapping of this process that holds `address` (Linux's smaps)."""
    with open("/proc/self/smaps") as smaps:
        inside = False
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:
                start, end = (int(a, 16) for a in fields[0].split("-"))
                inside = start <= address < end
            elif inside and fields[0] == "VmFlags:":
                return fields[1:]
    return None


@pytest.mark.skipif(not os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"),
                    reason="a kernel without transparent huge pages")
def test_large_outputs_on_huge_pages():
    """Outputs of 4 MiB and more are advised onto transparent huge pages (hg in VmFlags), as
    NumPy's are: their first writes then fault in 2 MiB at a time (docs/pytorch.md)."""
    x = torch.randn(1, 16, 512, 512)  # values 4 MiB, indices 8 MiB
    values, indices = pt.max_pool2d(x, 2, return_indices=True)
    unpooled = pt.max_unpool2d(values, indices, 2)
    for name, t in (("values", values), ("indices", indices), ("unpooled", unpooled)):
        # The middle: the advice covers whole pages, the first partly before the tensor.
        flags = vm_flags(t.data_ptr() + t.numel() * t.element_size() // 2)
        assert flags is not None and "hg" in flags, f"{name}: VmFlags {flags}"
