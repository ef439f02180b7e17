#!/usr/bin/env python3
"""PyTorch's CUDA kernels timed as poolgen_cuda_bench times poolgen's: each call followed by a
device synchronization, on the host clock, median of many; the same cases (v0.1 shapes in both
layouts, f32 values, int64 indices, and 1x1x2x2 for the fixed cost of a call), the same four ops
(PyTorch's max_pool{1,2,3}d(return_indices=True), max_unpool{1,2,3}d and their autograd
backward passes, each timed alone) and a device-to-device copy of the same bytes. It also times
an empty kernel's launch + synchronization, the floor of any call.

With --poolgen FILE (poolgen_cuda_bench's --benchmark_out JSON, aggregates), it prints one
markdown table: poolgen, PyTorch and the copy in microseconds, PyTorch's time over poolgen's
and the copy's over poolgen's (1.0: poolgen at the copy's bandwidth). With --dropin (poolgen's
PyTorch package installed, built against this CUDA PyTorch), the same PyTorch calls are timed
again with poolgen.torch.enabled(): poolgen as a PyTorch user gets it, allocation included. --sweep FILE... only
tabulates poolgen_cuda_bench JSON files side by side (scripts/gpu_pack.sh --sweep).

    python3 bench/torch_cuda_bench.py --poolgen cuda.json [--markdown FILE] [--json FILE]
    python3 bench/torch_cuda_bench.py --sweep default.json sweep-NAME.json...
"""
import argparse
import json
import pathlib
import statistics
import sys
import time

import bench_cases  # beside this script

torch = F = None  # imported by main() unless --sweep, which needs no PyTorch

# (poolgen_cuda_bench's case name, rank, shape, kernel, stride, padding, channels-last)
CASES = [(bench_cases.cuda_name(c),) + c
         for c in bench_cases.V01 + [bench_cases.PER_CALL] + bench_cases.LARGE]
OPS = ["pool", "unpool", "pool_backward", "unpool_backward"]


MIN_TIME = 0.2  # seconds per measurement (--min-time)


def median_us(fn, reps=7):
    """Median over `reps` blocks of the mean time of fn() + synchronize, in microseconds."""
    fn()
    torch.cuda.synchronize()
    n = 1
    while True:  # calls per block: enough for min_time / reps
        start = time.perf_counter()
        for _ in range(n):
            fn()
            torch.cuda.synchronize()
        if time.perf_counter() - start > MIN_TIME / reps or n > 100000:
            break
        n *= 2
    blocks = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(n):
            fn()
            torch.cuda.synchronize()
        blocks.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(blocks)


def torch_calls(case):
    """The four ops' calls, each a closure over its own inputs (autograd backward alone: the
    graph is kept and re-run with retain_graph)."""
    _, nd, shape, k, s, p, last = case
    pool = getattr(F, f"max_pool{nd}d")
    unpool = getattr(F, f"max_unpool{nd}d")
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randint(-512, 512, shape, generator=g, device="cuda") * 0.25).float()
    if last:
        x = x.contiguous(memory_format=torch.channels_last if nd == 2
                         else torch.channels_last_3d)
    values, indices = pool(x, k, s, p, return_indices=True)
    size = shape[-nd:]
    xg = x.clone().requires_grad_(True)
    yg, _ = pool(xg, k, s, p, return_indices=True)
    gy = torch.randn_like(yg)
    vg = values.clone().requires_grad_(True)
    ug = unpool(vg, indices, k, s, p, output_size=size)
    gu = torch.randn_like(ug)
    return {
        "pool": lambda: pool(x, k, s, p, return_indices=True),
        "unpool": lambda: unpool(values, indices, k, s, p, output_size=size),
        "pool_backward": lambda: torch.autograd.grad(yg, xg, gy, retain_graph=True),
        "unpool_backward": lambda: torch.autograd.grad(ug, vg, gu, retain_graph=True),
    }, x.numel() * 4, values.numel() * 4, indices.numel() * 8


def op_bytes(op, big, small, index):
    """poolgen_cuda_bench's compulsory bytes of each op."""
    return {"pool": big + small + index, "unpool": small + index + big,
            "pool_backward": small + index + big, "unpool_backward": index + 2 * small}[op]


def copy_us(nbytes):
    src = torch.ones(max(nbytes // 2, 1), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return median_us(lambda: dst.copy_(src))


def poolgen_medians(path):
    """name -> median microseconds from poolgen_cuda_bench's JSON."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data["benchmarks"]:
        if b.get("aggregate_name", "median") != "median" or b.get("error_occurred"):
            continue
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b["time_unit"]]
        name = b.get("run_name", b["name"]).replace("/manual_time", "")
        out[name] = b["real_time"] * scale
    return out


def sweep_table(paths):
    """poolgen_cuda_bench's medians from several builds (scripts/gpu_pack.sh --sweep), one
    column each, us; no PyTorch needed."""
    runs = [poolgen_medians(p) for p in paths]
    names = [pathlib.Path(p).stem.replace("sweep-", "") for p in paths]
    rows = ["| row | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for row in runs[0]:
        if not row.startswith("copy_"):
            rows.append(f"| {row} | " + " | ".join(
                f"{r[row]:.1f}" if row in r else "-" for r in runs) + " |")
    return "\n".join(rows)


def main():
    global MIN_TIME, torch, F
    if len(sys.argv) > 1 and sys.argv[1] == "--sweep":
        print(sweep_table(sys.argv[2:]))
        return
    import torch
    import torch.nn.functional as F
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--poolgen", help="poolgen_cuda_bench's --benchmark_out JSON")
    ap.add_argument("--markdown", help="write the table here too")
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--dropin", action="store_true",
                    help="also time the calls through poolgen.torch's drop-in")
    ap.add_argument("--min-time", type=float, default=MIN_TIME,
                    help="seconds per measurement (default %(default)s)")
    args = ap.parse_args()
    MIN_TIME = args.min_time
    torch.backends.cudnn.benchmark = False
    props = torch.cuda.get_device_properties(0)
    header = (f"{props.name}, {props.multi_processor_count} SMs, driver CUDA "
              f"{torch.version.cuda}, PyTorch {torch.__version__}")
    floor = median_us(lambda: torch.cuda._sleep(0))
    ours = poolgen_medians(args.poolgen) if args.poolgen else {}
    dropin = None
    if args.dropin:
        import poolgen.torch as dropin
        assert dropin.serves_cuda(), "poolgen.torch was built without CUDA"
    rows, records = [], []
    for case in CASES:
        calls, big, small, index = torch_calls(case)
        for op in OPS:
            torch_us = median_us(calls[op])
            dropin_us = None
            if dropin:
                with dropin.enabled():
                    dropin_us = median_us(calls[op])
            copy = copy_us(op_bytes(op, big, small, index))
            name = f"{op}/{case[0]}"
            ours_us = ours.get(name)
            ours_copy = ours.get("copy_" + name)
            records.append({"case": case[0], "op": op, "torch_us": torch_us,
                            "torch_copy_us": copy, "poolgen_us": ours_us,
                            "poolgen_copy_us": ours_copy, "dropin_us": dropin_us,
                            "bytes": op_bytes(op, big, small, index)})
            fmt = lambda v: "-" if v is None else f"{v:.1f}"
            ratio = lambda a, b: "-" if a is None or b is None else f"{a / b:.2f}"
            gbps = "-" if ours_us is None else f"{op_bytes(op, big, small, index) / ours_us / 1e3:.0f}"
            rows.append(f"| {case[0]} | {op} | {fmt(ours_us)} | {fmt(torch_us)} | {fmt(copy)} | "
                        f"{ratio(torch_us, ours_us)} | {ratio(copy, ours_us)} | {gbps} |"
                        + (f" {fmt(dropin_us)} | {ratio(torch_us, dropin_us)} |" if dropin else ""))
    table = [f"{header}; each call + synchronize, medians, us; empty kernel + synchronize: "
             f"{floor:.1f} us", "",
             "| case | op | poolgen | PyTorch | copy | PyTorch / poolgen | copy / poolgen "
             "| poolgen GB/s |" + (" drop-in | PyTorch / drop-in |" if dropin else ""),
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
             + (" ---: | ---: |" if dropin else "")] + rows
    print("\n".join(table))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(table) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": header, "empty_kernel_us": floor, "rows": records}, f, indent=1)


if __name__ == "__main__":
    main()
