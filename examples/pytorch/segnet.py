"""poolgen inside PyTorch: a SegNet-style encoder-decoder (max pooling with indices on the way
down, max unpooling by those indices on the way up) trained for a few steps three ways: with
PyTorch's own kernels, with poolgen's drop-in switched on (the model unchanged), and built from
poolgen's nn modules. Every loss, output, gradient and updated weight must agree bit for bit.

    python3 examples/pytorch/segnet.py [--steps 3] [--size 64] [--threads 2]
"""
import argparse
import copy
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import poolgen.torch as pt


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class SegNet(nn.Module):
    """Two encoder stages (pool 2x2, keeping the indices) and two decoder stages (unpool by them)."""

    def __init__(self, channels=3, classes=5, width=16, pool=nn.MaxPool2d, unpool=nn.MaxUnpool2d):
        super().__init__()
        self.down = nn.ModuleList([block(channels, width), block(width, 2 * width)])
        self.up = nn.ModuleList([block(2 * width, width), block(width, width)])
        self.pool = pool(2, 2, return_indices=True)
        self.unpool = unpool(2, 2)
        self.head = nn.Conv2d(width, classes, 1)

    def forward(self, x):
        stack = []
        for stage in self.down:
            x = stage(x)
            size = x.shape
            x, indices = self.pool(x)
            stack.append((indices, size))
        for stage in self.up:
            indices, size = stack.pop()
            x = stage(self.unpool(x, indices, output_size=size))
        return self.head(x)


def train(model, images, labels, steps):
    """`steps` SGD steps; returns every loss, the last output and the trained weights."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        output = model(images)
        loss = F.cross_entropy(output, labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return [torch.stack(losses), output.detach()] + [p.detach() for p in model.parameters()]


def same_bits(a, b):
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.int32),
                                              b.contiguous().view(torch.int32))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--size", type=int, default=64, help="image height and width")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    images = torch.randn(4, 3, args.size, args.size)
    labels = torch.randint(0, 5, (4, args.size, args.size))
    model = SegNet()

    runs = {}
    timings = {}
    for name, make, switch in [
            ("PyTorch", lambda: copy.deepcopy(model), False),
            ("poolgen drop-in", lambda: copy.deepcopy(model), True),
            ("poolgen modules", lambda: SegNet(pool=pt.MaxPool2d, unpool=pt.MaxUnpool2d), False)]:
        m = make()
        m.load_state_dict(model.state_dict())
        start = time.perf_counter()
        with pt.enabled(switch):
            runs[name] = train(m, images, labels, args.steps)
        timings[name] = time.perf_counter() - start

    reference = runs["PyTorch"]
    ok = True
    for name, tensors in runs.items():
        same = all(same_bits(a, b) for a, b in zip(tensors, reference))
        ok = ok and same
        print(f"{name:16s} losses {[round(v, 6) for v in tensors[0].tolist()]}  "
              f"{args.steps} steps in {timings[name] * 1e3:.0f} ms  "
              f"{'bit-identical to PyTorch' if same else 'DIFFERS from PyTorch'}")
    stats = pt.stats()
    served = {op: counts["poolgen"] for op, counts in stats.items()
              if op != "last_fallback" and counts["poolgen"]}
    print(f"drop-in calls served by poolgen: {served}")
    fell_back = sum(c["pytorch"] for op, c in stats.items() if op != "last_fallback")
    if fell_back or not served:
        print(f"calls left to PyTorch: {fell_back} (last: {stats['last_fallback']!r})")
        ok = False
    print(f"pytorch segnet: {'OK' if ok else 'FAILED'} (torch {torch.__version__})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
