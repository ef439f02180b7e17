"""A SegNet training run (examples/pytorch/segnet.py) with and without poolgen: the same bits in
every loss, output and trained weight, on one and two threads, and every pooling call served by
poolgen."""
import pathlib
import sys

import pytest
import torch

import poolgen.torch as pt
from helpers import assert_same

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "pytorch"))
import segnet  # noqa: E402


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("channels_last", [False, True])
def test_training_steps_are_bit_identical(threads, channels_last):
    torch.set_num_threads(threads)
    torch.manual_seed(threads)
    images = torch.randn(2, 3, 30, 34)  # 30: odd pooled extents (15), output_size needed
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 5, (2, 30, 34))
    model = segnet.SegNet(width=8)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)

    def run(make, switch):
        m = make()
        m.load_state_dict(model.state_dict())
        if channels_last:
            m = m.to(memory_format=torch.channels_last)
        with pt.enabled(switch):
            return segnet.train(m, images, labels, steps=2)

    want = run(lambda: segnet.SegNet(width=8), False)
    pt.reset_stats()
    assert_same(run(lambda: segnet.SegNet(width=8), True), want, "drop-in")
    stats = pt.stats()
    for op in ("max_pool2d_with_indices", "max_pool2d_with_indices_backward", "max_unpool2d"):
        assert stats[op] == {"poolgen": 2 * 2, "pytorch": 0}, (op, stats)
    modules = lambda: segnet.SegNet(width=8, pool=pt.MaxPool2d, unpool=pt.MaxUnpool2d)  # noqa
    assert_same(run(modules, False), want, "poolgen's modules")
