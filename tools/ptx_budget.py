#!/usr/bin/env python3
"""The CUDA kernels' PTX, checked without a GPU: for each CUDA kernel of a build, the integer
divisions (`div`, `rem`: emulated on every NVIDIA GPU, about 20 instructions each for 32 bits)
and the widths of its global loads and stores, read from the PTX that Halide embeds in the
kernel's object, held against a checked-in budget. Counts are static (instructions in the PTX,
not executions), deterministic for a given Halide and schedule, so a change that adds a division
or narrows a load fails here, in CI, long before a GPU run would show it.

  tools/ptx_budget.py BUILD_DIR [--budget FILE] [--write] [--report]

--budget: the budget (default schedules/cuda/ptx_budget.txt), one line per kernel:
    <kernel> div=<n> ld=<widest bits> st=<widest bits>
  A kernel fails when it has more divisions than its line, or its widest global load or store is
  narrower. Kernels of the build the budget does not list are reported, not failed (a build with
  other options); listed kernels the build lacks are skipped.
--write: rewrite the budget from this build (after a deliberate change; say why in the commit).
--report: print every kernel's figures (divisions by type, loads and stores by width).
Exit status 1 when a kernel is over its budget.
"""
import argparse
import collections
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_BUDGET = HERE.parent / "schedules" / "cuda" / "ptx_budget.txt"
# One instruction of interest: predicate guard, opcode with its modifiers.
INSTRUCTION = re.compile(r"^\s*(?:@!?%p\d+\s+)?((?:div|rem|ld|st)\.[\w.]+)")
GLOBAL_ACCESS = re.compile(r"^(ld|st)\.global(?:\.nc)?(?:\.v(\d))?\.[a-z]+(\d+)$")


def ptx_modules(obj):
    """The PTX texts embedded in a Halide CUDA object: NUL-terminated strings holding .version."""
    data = obj.read_bytes()
    modules, at = [], data.find(b".version")
    while at >= 0:
        start = data.rfind(b"\0", 0, at) + 1
        end = data.find(b"\0", at)
        modules.append(data[start:end].decode("ascii", "replace"))
        at = data.find(b".version", end)
    return modules


class Figures:
    """One kernel's counts: divisions by opcode, global loads and stores by width in bits."""

    def __init__(self):
        self.divisions = collections.Counter()
        self.accesses = collections.Counter()  # ("ld", 128): count

    def add(self, ptx):
        for line in ptx.splitlines():
            m = INSTRUCTION.match(line)
            if not m:
                continue
            op = m.group(1)
            if op.startswith(("div.", "rem.")) and not op.startswith(("div.rn.", "div.approx.",
                                                                      "div.full.")):
                if re.search(r"\.[su]\d+$", op):  # integer division; float division is native
                    self.divisions[op] += 1
                continue
            g = GLOBAL_ACCESS.match(op)
            if g:
                kind, lanes, bits = g.group(1), int(g.group(2) or 1), int(g.group(3))
                self.accesses[(kind, lanes * bits)] += 1

    def div(self):
        return sum(self.divisions.values())

    def widest(self, kind):
        return max((bits for (k, bits) in self.accesses if k == kind), default=0)

    def budget_line(self, name):
        return f"{name} div={self.div()} ld={self.widest('ld')} st={self.widest('st')}"

    def report_line(self, name):
        divs = " ".join(f"{op}:{n}" for op, n in sorted(self.divisions.items())) or "-"
        acc = " ".join(f"{k}{bits}:{n}" for (k, bits), n in sorted(self.accesses.items()))
        return f"{name:56} div {self.div():3}  [{divs}]  {acc}"


def cuda_kernels(build):
    """Name -> object of every CUDA kernel in the build's current kernel tables."""
    names = []
    for table in sorted(build.glob("generated/*kernel_table.inc")):
        names += re.findall(r"^POOLGEN_KERNEL\(.*, cuda, \d+, (\w+)\)$", table.read_text(), re.M)
    return {name: build / f"{name}.o" for name in names}


def read_budget(path):
    budget = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, *fields = line.split()
        budget[name] = {k: int(v) for k, v in (f.split("=") for f in fields)}
    return budget


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", type=pathlib.Path)
    ap.add_argument("--budget", type=pathlib.Path, default=DEFAULT_BUDGET)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--report", action="store_true")
    args = ap.parse_args()

    figures = {}
    for name, obj in sorted(cuda_kernels(args.build).items()):
        if not obj.exists():
            sys.exit(f"ptx_budget: {obj} is missing: build the kernels first")
        f = Figures()
        modules = ptx_modules(obj)
        if not modules:
            sys.exit(f"ptx_budget: no PTX in {obj}")
        for ptx in modules:
            f.add(ptx)
        figures[name] = f
    if not figures:
        print("ptx_budget: this build has no CUDA kernels (POOLGEN_CUDA_CAPABILITIES is empty)")
        return 0
    if args.report:
        for name, f in figures.items():
            print(f.report_line(name))
    total = sum(f.div() for f in figures.values())
    print(f"ptx_budget: {len(figures)} CUDA kernels, {total} integer divisions in all")
    if args.write:
        header = [line for line in args.budget.read_text().splitlines() if line.startswith("#")] \
            if args.budget.exists() else []
        args.budget.write_text("\n".join(header + [f.budget_line(n) for n, f in figures.items()])
                               + "\n")
        print(f"ptx_budget: wrote {args.budget}")
        return 0

    budget = read_budget(args.budget)
    over, unlisted, better = [], [], []
    for name, f in figures.items():
        b = budget.get(name)
        if b is None:
            unlisted.append(name)
            continue
        got = {"div": f.div(), "ld": f.widest("ld"), "st": f.widest("st")}
        if got["div"] > b["div"]:
            over.append(f"{name}: {got['div']} integer divisions, budget {b['div']}")
        for kind in ("ld", "st"):
            if got[kind] < b[kind]:
                over.append(f"{name}: widest global {kind} {got[kind]} bits, budget {b[kind]}")
        if got["div"] < b["div"] or got["ld"] > b["ld"] or got["st"] > b["st"]:
            better.append(name)
    if unlisted:
        print(f"ptx_budget: {len(unlisted)} kernels without a budget line (not checked): "
              + ", ".join(unlisted[:8]) + (" ..." if len(unlisted) > 8 else ""))
    if better:
        print(f"ptx_budget: {len(better)} kernels better than their budget (tighten it with "
              "--write): " + ", ".join(better[:8]) + (" ..." if len(better) > 8 else ""))
    for line in over:
        print("ptx_budget: over budget: " + line)
    checked = len(figures) - len(unlisted)
    print(f"ptx_budget: {checked} kernels checked against {args.budget.name}, {len(over)} over")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
