#!/usr/bin/env python3
"""PyTorch on poolgen against stock PyTorch, as users call them: torch.nn.functional's max
pooling with indices and max unpooling, forward and backward (autograd), allocation included, on
the v0.1 shapes and small ones, on 1 and 2 threads, in one run:

- stock:     PyTorch's own CPU kernels;
- drop-in:   the same calls with poolgen.torch.enable() (unpooling's backward through the
             drop-in's Autograd kernels, docs/pytorch.md);
- functions: poolgen.torch's functions (their backward passes run poolgen's kernels, unpooling's
             included).

    build/torch-env/bin/python3 bench/torch_bench.py [--quick] [--case REGEX] [--markdown FILE] [--json FILE]

Times are medians of torch.utils.benchmark's blocked runs (each block repeats the call until it
takes a while), in ms; speed-up = stock time / poolgen time. Every poolgen result is checked
against stock's bits before it is timed.
"""
import argparse
import json
import platform
import re
import sys

import torch
import torch.nn.functional as F
import torch.utils.benchmark as benchmark

import poolgen.torch as pt

import bench_cases  # beside this script

# (label, rank, shape, kernel, stride, padding, channels-last)
CASES = [(bench_cases.label(c),) + c
         for c in bench_cases.V01 + bench_cases.SMALL + [bench_cases.PER_CALL]]
OPS = ["max_pool", "max_pool backward", "max_unpool", "max_unpool backward"]
VARIANTS = ["stock", "drop-in", "functions"]


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
        a.contiguous().view(torch.int32 if a.dtype == torch.float32 else torch.int64),
        b.contiguous().view(torch.int32 if b.dtype == torch.float32 else torch.int64))


def calls(case, variant):
    """The four timed calls of a case for a variant, each a (statement, globals) pair, and the
    results they give (checked against stock's)."""
    _, nd, shape, k, s, p, channels_last = case
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=g)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last if nd == 2 else torch.channels_last_3d)
    fns = pt if variant == "functions" else F
    pool, unpool = getattr(fns, f"max_pool{nd}d"), getattr(fns, f"max_unpool{nd}d")
    size = list(shape[-nd:])
    with pt.enabled(variant == "drop-in"):
        xg = x.clone().requires_grad_()
        values, indices = pool(xg, k, s, p, return_indices=True)
        grad_values = torch.empty_like(values).normal_(generator=g)  # values' layout, as a next layer's
        vg = values.detach().clone().requires_grad_()
        unpooled = unpool(vg, indices, k, s, p, output_size=size)
        grad_unpooled = torch.empty_like(unpooled).normal_(generator=g)
        results = [pool(x, k, s, p, return_indices=True),
                   torch.autograd.grad(values, xg, grad_values, retain_graph=True)[0],
                   unpool(values.detach(), indices, k, s, p, output_size=size),
                   torch.autograd.grad(unpooled, vg, grad_unpooled, retain_graph=True)[0]]
    env = dict(pool=pool, unpool=unpool, x=x, xg=xg, k=k, s=s, p=p, size=size, values=values,
               indices=indices, grad_values=grad_values, vg=vg, unpooled=unpooled,
               grad_unpooled=grad_unpooled, grad=torch.autograd.grad, torch=torch)
    statements = [
        "pool(x, k, s, p, return_indices=True)",
        "grad(values, xg, grad_values, retain_graph=True)",
        "unpool(values.detach(), indices, k, s, p, output_size=size)",
        "grad(unpooled, vg, grad_unpooled, retain_graph=True)",
    ]
    return [(stmt, env) for stmt in statements], results


def flat(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def measure(args):
    rows = []
    for case in CASES:
        if args.quick and case[2][0] * case[2][1] > 64:
            continue
        if args.case and not re.search(args.case, case[0]):
            continue
        timed = {variant: calls(case, variant) for variant in VARIANTS}
        for op in range(len(OPS)):
            want = flat(timed["stock"][1][op])
            for variant in VARIANTS[1:]:
                got = flat(timed[variant][1][op])
                if not all(same_bits(a, b) for a, b in zip(got, want)):
                    sys.exit(f"{case[0]} {OPS[op]}: {variant} differs from stock PyTorch")
            for threads in (1, 2):
                row = {"case": case[0], "op": OPS[op], "threads": threads}
                for variant in VARIANTS:
                    stmt, env = timed[variant][0][op]
                    with pt.enabled(variant == "drop-in"):
                        timer = benchmark.Timer(stmt=stmt, globals=env, num_threads=threads)
                        row[variant] = timer.blocked_autorange(min_run_time=args.min_time).median
                rows.append(row)
                print(f"{case[0]:40s} {OPS[op]:20s} {threads}T " +
                      "  ".join(f"{v} {row[v] * 1e3:9.4f} ms" for v in VARIANTS), flush=True)
    return rows


def ms(t):
    t *= 1e3
    return f"{t:.3g}" if t >= 0.01 else f"{t:.2g}"


def markdown(rows):
    """One table per op: a row per case, each cell 1 thread / 2 threads."""
    by = {(r["case"], r["op"], r["threads"]): r for r in rows}
    cases = list(dict.fromkeys(r["case"] for r in rows))
    lines = [f"PyTorch {torch.__version__}, {platform.processor() or platform.machine()}; ms on "
             "1 / 2 threads; speed-up = stock time / poolgen time", ""]
    for op in OPS:
        lines += [f"**{op}**", "",
                  "| case | stock ms | drop-in ms | speed-up | functions ms | speed-up |",
                  "|---|---:|---:|---:|---:|---:|"]
        for case in cases:
            one, two = by.get((case, op, 1)), by.get((case, op, 2))
            if not one:
                continue
            cell = lambda v: f"{ms(one[v])} / {ms(two[v])}"  # noqa: E731
            speed = lambda v: f"{one['stock'] / one[v]:.2g}x / {two['stock'] / two[v]:.2g}x"  # noqa
            lines.append(f"| {case} | {cell('stock')} | {cell('drop-in')} | {speed('drop-in')} | "
                         f"{cell('functions')} | {speed('functions')} |")
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes only")
    parser.add_argument("--case", help="only the cases whose name matches this regex "
                        "(rerunning a row whose ratio looks like noise)")
    parser.add_argument("--min-time", type=float, default=0.3,
                        help="seconds per measurement (default 0.3)")
    parser.add_argument("--markdown", help="write the tables here")
    parser.add_argument("--json", help="write every measurement here")
    args = parser.parse_args()
    rows = measure(args)
    text = markdown(rows)
    print("\n" + text)
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(text + "\n")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"torch": torch.__version__, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
