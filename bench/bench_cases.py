"""The shapes the PyTorch-side benchmarks time (bench/torch_bench.py on the CPU,
bench/torch_cuda_bench.py on CUDA), one list for both: each case is (rank, shape, kernel,
stride, padding, channels-last), f32 values and int64 indices."""

# v0.1's shapes in both layouts (1-D has one).
V01 = [
    (2, (8, 64, 112, 112), 2, 2, 0, False),
    (2, (8, 64, 112, 112), 3, 2, 1, False),
    (3, (2, 16, 32, 64, 64), 2, 2, 0, False),
    (1, (8, 64, 65536), 2, 2, 0, False),
    (2, (8, 64, 112, 112), 2, 2, 0, True),
    (2, (8, 64, 112, 112), 3, 2, 1, True),
    (3, (2, 16, 32, 64, 64), 2, 2, 0, True),
]
# One image of small planes: where a call's fixed cost and its task split show.
SMALL = [
    (2, (1, 64, 56, 56), 2, 2, 0, False),
    (2, (1, 64, 56, 56), 2, 2, 0, True),
    (2, (1, 64, 14, 14), 2, 2, 0, False),
    (2, (1, 64, 14, 14), 2, 2, 0, True),
]
# Large tensors on CUDA, where a call's fixed cost is negligible: the rows held against a
# device copy's bandwidth (bench/cuda_bench.cpp has them too).
LARGE = [
    (2, (32, 64, 224, 224), 2, 2, 0, False),
    (2, (32, 64, 224, 224), 2, 2, 0, True),
    (3, (16, 32, 64, 128, 128), 2, 2, 0, False),
    (3, (16, 32, 64, 128, 128), 2, 2, 0, True),
]
# The fixed cost of a call.
PER_CALL = (2, (1, 1, 2, 2), 2, 2, 0, False)

_LAYOUTS = {2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}


def label(case):
    """A table's name for a case: "2-D 8x64x112x112 k2s2p0 NCHW"."""
    nd, shape, k, s, p, last = case
    name = f"{nd}-D {'x'.join(map(str, shape))} k{k}s{s}p{p}"
    if case == PER_CALL:
        return name + " (per-call cost)"
    return name + (f" {_LAYOUTS[nd][last]}" if nd in _LAYOUTS else "")


def cuda_name(case):
    """poolgen_cuda_bench's name for a case: "2d_k2s2p0_8x64x112x112_first"."""
    nd, shape, k, s, p, last = case
    name = f"{nd}d_k{k}s{s}p{p}_{'x'.join(map(str, shape))}"
    return name + ("" if nd == 1 else "_last" if last else "_first")
