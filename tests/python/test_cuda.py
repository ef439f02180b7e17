"""poolgen.torch on CUDA tensors (a GPU and a CUDA build of PyTorch 2; skipped elsewhere): the
drop-in and the explicit ops serve them on the tensors' device and current stream, bit for bit
with poolgen's CPU path and, where PyTorch's CUDA kernels are deterministic, with them;
deterministic mode runs what PyTorch refuses (MaxPool3d's backward, unpooling); an invalid
unpooling index is reported once its kernels have run (cuda_check), nothing written through it;
a SegNet training step gives the same bits twice and the CPU's."""
import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F

import poolgen.torch as pt
from helpers import assert_same

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and pt.serves_cuda()),
    reason="needs a CUDA GPU and poolgen built against a CUDA build of PyTorch 2")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "pytorch"))
import segnet  # noqa: E402

SHAPES = {1: (2, 3, 37), 2: (2, 5, 13, 17), 3: (1, 3, 7, 9, 11)}
WINDOWS = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
           dict(kernel_size=3, stride=1)]
POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
UNPOOL = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}
FORMATS = {2: torch.channels_last, 3: torch.channels_last_3d}


def cuda(t, channels_last=False):
    t = t.cuda()
    return t.contiguous(memory_format=FORMATS[t.dim() - 2]) if channels_last else t


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_every_op_matches_the_cpu_and_pytorch(nd, window, channels_last, dtype):
    if channels_last and nd == 1:
        pytest.skip("1-D has no channels-last format")
    x = torch.randn(SHAPES[nd]).to(dtype)
    x.view(-1)[3] = float("nan")
    grad = torch.randn(POOL[nd](x, **window).shape).to(dtype)

    def run(t, g, dropin):
        t = t.clone().requires_grad_()
        with pt.enabled(dropin):
            v, i = POOL[nd](t, return_indices=True, **window)
            v.backward(g)
            u = UNPOOL[nd](v.detach(), i, window["kernel_size"], window.get("stride"),
                           window.get("padding", 0), output_size=t.shape[-nd:])
        return v.detach(), i, t.grad, u

    pt.reset_stats()
    ours = run(cuda(x, channels_last), cuda(grad, channels_last), True)
    served = pt.stats("cuda")
    assert served["max_pool2d_with_indices" if nd < 3 else "max_pool3d_with_indices"]["poolgen"]
    cpu = run(x, grad, True)
    for got, want, what in zip(ours, cpu, ("values", "indices", "grad_input", "unpooled")):
        assert_same(got.cpu().contiguous(), want.contiguous(), what)
    stock = run(cuda(x, channels_last), cuda(grad, channels_last), False)
    assert_same(ours[0], stock[0], "values against PyTorch's CUDA kernel")
    assert_same(ours[1], stock[1], "indices against PyTorch's CUDA kernel")


def test_explicit_ops_take_cuda_tensors_on_a_side_stream():
    x = torch.randn(4, 8, 32, 32, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        v, i = pt.max_pool2d(x, 2, return_indices=True)
        u = pt.max_unpool2d(v, i, 2)
    side.synchronize()
    want = F.max_pool2d(x.cpu(), 2, return_indices=True)
    assert_same(v.cpu(), want[0])
    assert_same(i.cpu(), want[1])
    assert_same(u.cpu(), F.max_unpool2d(*want, 2))


def test_invalid_index_is_reported_after_its_kernels_ran():
    values = torch.ones(1, 1, 2, 2, device="cuda")
    indices = torch.tensor([[[[0, 1], [99, 3]]]], device="cuda")
    with pt.enabled():
        out = F.max_unpool2d(values, indices, 2)  # queued: no error yet
        with pytest.raises(RuntimeError, match="invalid index"):
            pt.cuda_check()
    assert out.shape == (1, 1, 4, 4)
    pt.cuda_check()  # reported once


def test_deterministic_mode_runs_what_pytorch_refuses():
    was = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        x = torch.randn(2, 3, 6, 8, 8, device="cuda", requires_grad=True)
        with pytest.raises(RuntimeError, match="deterministic"):
            F.max_pool3d(x, 2).sum().backward()
        x.grad = None
        with pt.enabled():
            grads = []
            for _ in range(2):
                x.grad = None
                F.max_pool3d(x, 3, stride=1, padding=1).sum().backward()
                grads.append(x.grad.clone())
            v, i = F.max_pool2d(x[:, :, 0], 2, return_indices=True)
            F.max_unpool2d(v, i, 2)
        assert_same(grads[1], grads[0], "two runs")
        cpu = x.detach().cpu().requires_grad_()
        with pt.enabled():
            F.max_pool3d(cpu, 3, stride=1, padding=1).sum().backward()
        assert_same(grads[0].cpu(), cpu.grad, "against the CPU")
    finally:
        torch.use_deterministic_algorithms(was)


def test_segnet_training_step_is_deterministic_and_the_cpus():
    was = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        torch.manual_seed(3)
        images = torch.randn(2, 3, 30, 34)
        labels = torch.randint(0, 5, (2, 30, 34))
        model = segnet.SegNet(width=8)

        def run(device):
            m = segnet.SegNet(width=8)
            m.load_state_dict(model.state_dict())
            with pt.enabled():
                return segnet.train(m.to(device), images.to(device), labels.to(device), steps=1)

        first, second = run("cuda"), run("cuda")
        assert_same(second, first, "two CUDA runs")
    finally:
        torch.use_deterministic_algorithms(was)
