#!/usr/bin/env python3
"""Turns poolgen_bench's JSON into <out-dir>/comparison.md and a sweep plot per op that ran,
<op>.png: max_pool, max_unpool, max_pool_backward, max_unpool_backward.

    tools/bench_report.py <benchmark.json> <out-dir>

Reads only the JSON: benchmark names "<op>/<case>/<impl>/threads:<T>" (bench/pool_bench.cpp),
their counters (traffic_bytes, input_bytes, sweep) and the context (poolgen_command,
poolgen_cpu_model, poolgen_llc_bytes, Google Benchmark's caches and date). Times are medians of
the repetitions (the single run with --poolgen_repetitions=1). The roofline time of a row is its
compulsory traffic over the copy bandwidth measured at the same byte count and thread count,
right after it: the time of its case's memcpy ("<op>/<case>/memcpy/threads:<T>"; JSON from
before that pairing has one "copy/<bytes>B/memcpy/threads:<T>" per traffic, read as such).
"""
import json
import os
import re
import sys
from collections import OrderedDict

UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
# What Google Benchmark appends to a registered name: "/min_time:0.100/repeats:5/real_time".
SUFFIX = re.compile(r"^(min_time:.*|min_warmup_time:.*|repeats:\d+|iterations:\d+|real_time|"
                    r"manual_time|process_time)$")
OPS = ("max_pool", "max_unpool", "max_pool_backward", "max_unpool_backward")
FORWARD = ("max_pool", "max_unpool")
# The peers with a kernel for each op (their columns in its tables): XNNPACK has no backward.
PEERS = {op: ("aten", "xnnpack") if op in FORWARD else ("aten",) for op in OPS}
TITLES = {"aten": "ATen", "xnnpack": "XNNPACK"}
# (ops, name, applies(case), peer impl or "roofline", threshold): a row meets a target when
# peer time / poolgen time (or roofline time / poolgen time) reaches the threshold. The backward
# passes have none (yet): their tables report the ratios alone.
TARGETS = [
    (("max_pool",), ">=10x ATen (contiguous)", lambda c: not c["cl"], "aten", 10.0),
    (("max_pool",), ">=1.5x ATen (channels-last)", lambda c: c["cl"], "aten", 1.5),
    (("max_pool",), ">=1.5x XNNPACK", lambda c: True, "xnnpack", 1.5),
    (("max_unpool",), ">=2x ATen", lambda c: True, "aten", 2.0),
    (("max_unpool",), ">=1.0x XNNPACK", lambda c: True, "xnnpack", 1.0),
    (FORWARD, ">=70% roofline (input > LLC)", lambda c: c["input_bytes"] > c["llc"], "roofline",
     0.7),
]


def parse_case(text):
    """'2d/8x64x112x112/k2s2p0/cl/bf16/idx32' -> dict (the --poolgen_cases syntax)."""
    f = text.split("/")
    opts = f[3:]
    return {"name": text, "nd": int(f[0][:-1]), "shape": [int(x) for x in f[1].split("x")],
            "window": f[2], "cl": "cl" in opts,
            "dtype": next((o for o in opts if o not in ("cl", "idx32", "general")), "f32"),
            "idx32": "idx32" in opts}


def load(path):
    """-> (context, {(op, case, impl, threads): run}) with each run's median time in ms."""
    with open(path) as f:
        data = json.load(f)
    runs = OrderedDict()
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            continue
        median = b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median"
        single = b.get("run_type") == "iteration" and b.get("repetitions", 1) <= 1
        if not (median or single):
            continue
        parts = b["run_name"].split("/")
        while parts and SUFFIX.match(parts[-1]):
            parts.pop()
        if len(parts) < 4 or not parts[-1].startswith("threads:"):
            continue
        key = (parts[0], "/".join(parts[1:-2]), parts[-2], int(parts[-1].split(":")[1]))
        runs[key] = {"ms": b["real_time"] * UNIT_MS[b.get("time_unit", "ns")],
                     "traffic": int(b.get("traffic_bytes", 0)),
                     "input_bytes": int(b.get("input_bytes", 0)),
                     "sweep": bool(b.get("sweep", 0))}
    return data["context"], runs


def rows_for(op, runs, llc):
    """One row per (case, threads) that poolgen ran, with its peers and roofline."""
    copy = {(r["traffic"], t): r["ms"] for (o, _, i, t), r in runs.items() if o == "copy"}
    rows = []
    for (o, case, impl, t), r in runs.items():
        if o != op or impl != "poolgen":
            continue
        c = parse_case(case)
        c.update(input_bytes=r["input_bytes"], llc=llc, sweep=r["sweep"])
        peer = lambda name: runs.get((op, case, name, t), {}).get("ms")
        rows.append({"case": c, "threads": t, "poolgen": r["ms"], "aten": peer("aten"),
                     "xnnpack": peer("xnnpack"), "reference": peer("reference"),
                     "roofline": peer("memcpy") or copy.get((r["traffic"], t))})
    return rows


def ratio(row, peer):
    """peer (or roofline) time / poolgen time, None where the peer did not run."""
    return row[peer] / row["poolgen"] if row.get(peer) else None


def targets_of(op, row):
    """[(target name, met, ratio)] for the targets that apply to the row."""
    out = []
    for t_ops, name, applies, peer, threshold in TARGETS:
        if op in t_ops and applies(row["case"]):
            r = ratio(row, peer)
            if r is not None:
                out.append((name, r >= threshold, r))
    return out


def fmt(v, f="%.4g"):
    return "n/a" if v is None else f % v


def human_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            v = n / size
            return ("%d %s" if v == int(v) else "%.1f %s") % (v, unit)
    return "%d B" % n


def write_markdown(path, ctx, runs, llc):
    caches = ", ".join("L%d%s %s%s" % (c["level"], {"Data": "d", "Instruction": "i"}.get(c["type"], ""),
                                      human_bytes(c["size"]),
                                      " (shared by %d)" % c["num_sharing"] if c.get("num_sharing", 1) > 1 else "")
                       for c in ctx.get("caches", []))
    out = ["# poolgen against ATen and XNNPACK", "",
           "- CPU: %s, %s logical CPUs at %s MHz" % (ctx.get("poolgen_cpu_model", "?"),
                                                    ctx.get("num_cpus", "?"), ctx.get("mhz_per_cpu", "?")),
           "- Caches: %s; last-level cache taken as %s (%s)" % (caches or "?", human_bytes(llc),
                                                               ctx.get("poolgen_llc_source", "?")),
           "- Date: %s" % ctx.get("date", "?"),
           "- Command: `%s`" % ctx.get("poolgen_command", "?"), "",
           "Times are medians in ms. Roofline: the op's compulsory traffic (pooling: input + values + "
           "indices; unpooling: values + indices + output; pooling's backward: grad_output + "
           "indices + grad_input; unpooling's backward: indices + grad_output + grad_values; as "
           "many bytes in all four) at the bandwidth of a memcpy of as many bytes on as many "
           "threads; % roofline = roofline time / poolgen time. Speed-ups: peer time / poolgen "
           "time. ATen runs its NCHW kernels on contiguous cases and its channels-last ones on `cl` "
           "cases; its backward rows are the kernels autograd runs "
           "(max_pool{2,3}d_with_indices_backward; for unpooling, a gather over flattened planes). "
           "XNNPACK (NHWC f32, stride = window) only runs `cl` f32 2-D cases with s = k, and has "
           "no backward passes. n/a: the "
           "peer has no kernel for the case (or was not run).", ""]
    summary = OrderedDict((name, [0, 0]) for _, name, _, _, _ in TARGETS)
    backward = [op for op in OPS if op not in FORWARD]
    for op in OPS:
        if op == backward[0]:
            out += glance("Backward passes at a glance", runs, llc, backward)
        rows = rows_for(op, runs, llc)
        if rows:
            out += ["## %s" % op, ""]
        for sweep in (False, True):
            group = [r for r in rows if r["case"]["sweep"] == sweep]
            if not group:
                continue
            out += ["### %s" % ("Size sweep (1x64xHxW f32)" if sweep else "Cases"), ""]
            out += table_head(op) + [table_row(op, row, summary) for row in group] + [""]
    out += ["## Targets", "", "Rows (case x thread count) meeting each target:", "",
            "| target | met | missed |", "|---|---:|---:|"]
    for name, (met, missed) in summary.items():
        out.append("| %s | %d | %d |" % (name, met, missed))
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def has_targets(op):
    return any(op in t_ops for t_ops, _, _, _, _ in TARGETS)


def table_head(op):
    """The header lines of an op's table: its peers' columns, and targets where it has any."""
    peers = [TITLES[p] for p in PEERS[op]]
    cols = (["case", "threads", "poolgen ms"] + ["%s ms" % p for p in peers] +
            ["roofline ms", "% roofline"] + ["vs %s" % p for p in peers])
    rule = ["---"] + ["---:"] * (len(cols) - 1)
    if has_targets(op):
        cols, rule = cols + ["targets"], rule + ["---"]
    return ["| %s |" % " | ".join(cols), "|%s|" % "|".join(rule)]


def table_row(op, row, summary):
    """One Markdown row; counts its targets into summary."""
    tg = targets_of(op, row)
    for name, met, _ in tg:
        summary[name][0 if met else 1] += 1
    pct = ratio(row, "roofline")
    cells = ([row["case"]["name"], "%d" % row["threads"], fmt(row["poolgen"])] +
             [fmt(row[p]) for p in PEERS[op]] +
             [fmt(row["roofline"]), fmt(pct and 100 * pct, "%.0f%%")] +
             [fmt(ratio(row, p), "%.1fx") for p in PEERS[op]])
    if has_targets(op):
        cells.append("; ".join("%s %s" % (n, "met" if m else "missed") for n, m, _ in tg) or "-")
    return "| %s |" % " | ".join(cells)


def glance(heading, runs, llc, ops):
    """The ops side by side, a line per case (sweep cases left out): poolgen ms, vs ATen and %
    roofline on the fewest and the most threads, as "a / b"."""
    by_case = OrderedDict()  # case name -> op -> threads -> row
    for op in ops:
        for row in rows_for(op, runs, llc):
            if not row["case"]["sweep"]:
                by_case.setdefault(row["case"]["name"], {}).setdefault(op, {})[row["threads"]] = row
    if not by_case:
        return []
    threads = sorted({t for per_op in by_case.values() for rows in per_op.values() for t in rows})
    threads = [threads[0], threads[-1]] if len(threads) > 1 else threads
    out = ["## " + heading, "",
           "Threads %s; each cell reads `%s`." % (" and ".join(map(str, threads)),
                                                 " / ".join("%d thread%s" % (t, "s" * (t > 1))
                                                            for t in threads)), "",
           "| case | " + " | ".join("%s ms | vs ATen | %% roofline" % op for op in ops) + " |",
           "|---|" + "---:|---:|---:|" * len(ops)]
    for name, per_op in by_case.items():
        cells = []
        for op in ops:
            rows = [per_op.get(op, {}).get(t) for t in threads]
            for cell in (lambda r: fmt(r["poolgen"]), lambda r: fmt(ratio(r, "aten"), "%.1fx"),
                         lambda r: fmt(ratio(r, "roofline") and 100 * ratio(r, "roofline"),
                                       "%.0f%%")):
                cells.append(" / ".join(cell(r) if r else "-" for r in rows) if any(rows) else "")
        out.append("| %s | %s |" % (name, " | ".join(cells)))
    return out + [""]


IMPLS = ("poolgen", "aten", "xnnpack", "reference", "memcpy")


def legend_order(label):
    return (IMPLS.index(label.split()[0]), label)


def plot(path, op, runs, llc, title):
    """Time against input size for the sweep cases: a panel per window and thread count."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    series = {}  # (window, threads, label) -> [(bytes, ms)]
    for row in rows_for(op, runs, llc):
        c = row["case"]
        if not c["sweep"]:
            continue
        layout = ("NHWC" if c["cl"] else "NCHW") + (" i32" if c["idx32"] else "")
        for impl in ("poolgen", "aten", "xnnpack", "reference", "roofline"):
            if c["idx32"] and impl != "poolgen":
                continue  # the peers and the roofline are drawn from the i64 case
            if row.get(impl):
                label = "memcpy roofline" if impl == "roofline" else "%s %s" % (impl, layout)
                series.setdefault((c["window"], row["threads"], label), {})[c["input_bytes"]] = row[impl]
    if not series:
        return False
    windows = sorted({w for w, _, _ in series})
    threads = sorted({t for _, t, _ in series})
    threads = [threads[0], threads[-1]] if len(threads) > 1 else threads
    colors = {"poolgen": "tab:blue", "aten": "tab:red", "xnnpack": "tab:green",
              "reference": "tab:gray", "memcpy": "black"}
    fig, axes = plt.subplots(len(windows), len(threads), figsize=(6.5 * len(threads), 4.8 * len(windows)),
                             squeeze=False, sharex=True)
    for wi, w in enumerate(windows):
        for ti, t in enumerate(threads):
            ax = axes[wi][ti]
            for (sw, st, label), pts in sorted(series.items(), key=lambda kv: legend_order(kv[0][2])):
                if (sw, st) != (w, t):
                    continue
                xs = sorted(pts)
                impl = label.split()[0]
                ax.plot(xs, [pts[x] for x in xs], label=label, color=colors[impl],
                        linestyle=":" if impl == "memcpy" else "-." if "i32" in label
                        else "--" if "NHWC" in label else "-",
                        marker="" if impl == "memcpy" else "s" if "NHWC" in label else "o",
                        markersize=3.5, linewidth=1.4, alpha=0.6 if impl == "reference" else 1.0)
            ax.axvline(llc, color="0.5", linestyle="-.", linewidth=1)
            ax.text(llc, 0.97, " LLC %s" % human_bytes(llc), transform=ax.get_xaxis_transform(),
                    va="top", fontsize=8, color="0.35")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human_bytes(int(v))))
            ax.grid(True, which="major", alpha=0.3)
            ax.set_title("%s %s, %d thread%s" % (op, w, t, "" if t == 1 else "s"))
            ax.set_xlabel("input bytes (1x64xHxW f32)")
            ax.set_ylabel("time (ms, median)")
            ax.legend(fontsize=7.5, loc="upper left")
            plt.setp(ax.get_xticklabels(), rotation=45, ha="right")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: bench_report.py <benchmark.json> <out-dir>")
    ctx, runs = load(argv[1])
    llc = int(ctx.get("poolgen_llc_bytes", 32 << 20))
    os.makedirs(argv[2], exist_ok=True)
    md = os.path.join(argv[2], "comparison.md")
    write_markdown(md, ctx, runs, llc)
    written = [md]
    for op in OPS:
        png = os.path.join(argv[2], op + ".png")
        names = ["poolgen"] + [TITLES[p] for p in PEERS[op]]
        title = "%s: %s and %s on %s (%s)" % (
            op, ", ".join(names[:-1]), names[-1], ctx.get("poolgen_cpu_model", "?"),
            ctx.get("date", "?")[:10])
        if plot(png, op, runs, llc, title):
            written.append(png)
    print("bench_report: wrote " + ", ".join(written))


if __name__ == "__main__":
    main(sys.argv)
