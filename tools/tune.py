#!/usr/bin/env python3
"""Tunes poolgen's CPU schedules for one Halide target and checks the winners in.

    tools/tune.py <halide-target> [family ...] [--all] [--threads 1,2] [--repetitions 5]

For each kernel family (a kernel name without its types: max_pool2d_k2s2p0_cl,
max_unpool_scatter, ...) it builds the family for that target alone, in a tuning build
(build-tune/<target>: f32 values, i64 indices, the host build's generators), once per candidate
schedule, and times each with the real benchmark (bench/poolgen_bench) on the family's
representative shapes, on 1 thread and all threads. The benchmark checks every kernel's output
bit for bit against its scalar reference before timing it; a candidate that fails to generate,
build or verify is recorded and skipped.

Candidates, in a fixed order: the hand schedule as the build has it (schedules/cpu_knobs.cmake),
then each knob's values in turn around the best so far (coordinate descent), then Halide's
autoschedulers Mullapudi2016 and Adams2019 (greedy: its default beam search took over three
minutes for one 2-D pooling variant). A candidate replaces the best only when it is at least 2%
faster (the score: geometric mean of the median times), so that reruns on the same machine settle
on the same winner despite timing noise. Nothing is random: the benchmark's data is seeded. A
shared VM's timings drift between runs by more than that, so the search's winner is then built
and timed against the hand schedule in turn (--confirm rounds, default 3) and stays only if the
median of its paired speed-ups still clears 2%.

Writes, per family, schedules/<target>/tuned.txt (the line "<family> <knobs>" that the build
passes to the generator: schedules/knobs.h) and schedules/<target>/records/<family>.json (machine,
CPU, Halide version, compiler, date, shapes, every candidate with its times, the confirmation's
speed-ups, the winner), and
rewrites schedules/<target>/README.md from all records. Run it on an otherwise idle machine.
"""
import argparse
import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv" / "bin"  # Halide, cmake and ninja (scripts/setup.sh)
os.environ["PATH"] = f"{VENV}{os.pathsep}{os.environ['PATH']}"
HOST_BUILD = Path(os.environ.get("POOLGEN_BUILD_DIR", ROOT / "build"))

# The hand schedules' knobs and their defaults (schedules/cpu_schedules.h), and the values the
# search tries for each. vector_width is in outputs per vector: the default 0 is the natural
# width of each value type (the f32 lanes for f32), and the search tries half to eight times the
# target's f32 lanes (`lanes` below): a vector of several registers is as many independent chains
# of compares, which a scan of dependent taps needs (channels-last k3s2p1 on AVX-512 ran 2x faster
# at 4x and 8x; docs/kernels.md). Tuning runs on f32; an explicit width applies to every value
# type of the family.
POOL_KNOBS = {"rows_per_task": [2, 4, 8, 16, 32, 64, 128],
              "vector_width": ["lanes/2", "2*lanes", "4*lanes", "8*lanes"],
              "stage_rows": [True, False]}
POOL_DEFAULTS = {"rows_per_task": 64, "vector_width": 0, "stage_rows": True}
GATHER_KNOBS = {"rows_per_task": [8, 16, 32, 64], "vector_width": ["lanes/2", "2*lanes"],
                "stage_cells": [True, False]}
GATHER_DEFAULTS = {"rows_per_task": 32, "vector_width": 0, "stage_cells": True}
SCATTER_KNOBS = {"vector_width": ["lanes/2", "2*lanes"], "unroll": [1, 2, 4, 8]}
SCATTER_DEFAULTS = {"vector_width": 0, "unroll": 1}
INDEX_GATHER_KNOBS = {"vector_width": ["lanes/2", "2*lanes"],
                      "elements_per_task": [4096, 16384, 65536]}
INDEX_GATHER_DEFAULTS = {"vector_width": 0, "elements_per_task": 16384}
# A challenger must take at most this share of the best time: 2% faster, in the search and in the
# confirmation alike.
WIN_RATIO = 0.98
AUTOSCHEDULERS = [{"autoscheduler": "Mullapudi2016"},
                  {"autoscheduler": "Adams2019", "beam_size": 1}]

# Representative shapes (bench --poolgen_cases syntax): the v0.1 benchmark shape of the rank, a
# smaller one that fits in L2, and in 2-D and 3-D one of small planes, whose rows are narrower
# than the widest vectors tried (a winner that ignored them ran 1x64x28x28 1.6x slower).
SHAPES = {1: ["8x64x65536", "1x64x8192"], 2: ["8x64x112x112", "1x64x56x56", "1x64x28x28"],
          3: ["2x16x32x64x64", "1x16x16x32x32", "1x64x8x14x14"]}
# Channels-last 2-D families also time a shape of 128 channels: the shapes above have 64, and a
# vector width that suits 64 channels alone (one whole vector of them, no channel loop) must not
# win for every channel count (2-D k2s2p0 at 8x64 lanes: 64 channels 1.3x faster, 128 1.12x
# slower).
# And one of many channels on few rows (seven output rows of 512 channels), which threads share
# only in tasks of few rows: with tasks of 8 rows, 2-D k3s2p1 took one thread's time on two.
CHANNELS_LAST_SHAPES = {1: [], 2: ["8x128x56x56", "1x512x14x14"], 3: []}
GENERAL_WINDOWS = {1: ["k2s2p0", "k3s2p1"], 2: ["k3s1p1", "k2s1p0"], 3: ["k3s1p1", "k2s1p0"]}


def lanes_of(target):
    if "avx512" in target:
        return 16
    if "avx2" in target or "avx" in target.split("-"):
        return 8
    return 4


def family_spec(family):
    """(kind, rank, windows, layout tag, bench op) of a family name, or None."""
    m = re.fullmatch(r"max_pool([123])d(?:_(k\d+s\d+p\d+))?(_cl)?", family)
    if m:
        nd = int(m.group(1))
        windows = [m.group(2)] if m.group(2) else GENERAL_WINDOWS[nd]
        return "pool", nd, windows, m.group(3) or "", "pool"
    m = re.fullmatch(r"max_unpool([23])d_(k\d+s\d+p\d+)(_cl)?", family)
    if m:
        return "gather", int(m.group(1)), [m.group(2)], m.group(3) or "", "unpool"
    # The scatter serves unpooling and, accumulating, max pooling's gradient.
    m = re.fullmatch(r"max_(unpool|pool_backward)_scatter(_cl)?", family)
    if m:
        op = "unpool" if m.group(1) == "unpool" else "pool_backward"
        return "scatter", 2, ["k2s2p0", "k3s2p1"], m.group(2) or "", op
    m = re.fullmatch(r"max_unpool_backward(_cl)?", family)
    if m:
        return "index_gather", 2, ["k2s2p0", "k3s2p1"], m.group(1) or "", "unpool_backward"
    return None


def all_families():
    families = []
    for cl in ["", "_cl"]:
        for nd in [1, 2, 3]:
            families.append(f"max_pool{nd}d{cl}")
            if nd > 1:
                families += [f"max_pool{nd}d_{w}{cl}" for w in ["k2s2p0", "k3s2p1"]]
        families += [f"max_unpool_scatter{cl}", f"max_pool_backward_scatter{cl}",
                     f"max_unpool_backward{cl}"]
    return families


def cases_of(family):
    kind, nd, windows, cl, op = family_spec(family)
    cases = []
    for shape in SHAPES[nd] + (CHANNELS_LAST_SHAPES[nd] if cl and kind == "pool" else []):
        for window in windows:
            case = f"{nd}d/{shape}/{window}" + ("/cl" if cl else "") + f"/{op}"
            cases.append(case)
    return cases[:2] if kind in ("scatter", "index_gather") else cases


def knob_text(knobs):
    def value(v):
        return ("true" if v else "false") if isinstance(v, bool) else str(v)
    return ",".join(f"{k}:{value(v)}" for k, v in knobs.items())


def hand_knobs(family):
    """The schedule the build gives `family` without tuning: cpu_knobs.cmake over the defaults."""
    kind = family_spec(family)[0]
    knobs = dict({"pool": POOL_DEFAULTS, "gather": GATHER_DEFAULTS, "scatter": SCATTER_DEFAULTS,
                  "index_gather": INDEX_GATHER_DEFAULTS}[kind])
    text = (ROOT / "schedules" / "cpu_knobs.cmake").read_text()
    m = re.search(rf"^set\(POOLGEN_KNOBS_{family} ([^)]*)\)", text, re.M)
    for item in (m.group(1).split(",") if m else []):
        name, value = item.split(":")
        knobs[name] = value == "true" if value in ("true", "false") else int(value)
    return {k: v for k, v in knobs.items() if k in knob_space(family, "")}


def knob_space(family, target):
    kind, _, _, cl, _ = family_spec(family)
    space = dict({"pool": POOL_KNOBS, "gather": GATHER_KNOBS, "scatter": SCATTER_KNOBS,
                  "index_gather": INDEX_GATHER_KNOBS}[kind])
    if kind == "pool" and cl:
        space.pop("stage_rows")  # channels-last pooling never stages (cpu_schedules.cpp)
    if kind == "scatter":  # contiguous: a scalar loop, unrolled; channels-last: vectors, no unroll
        space.pop("unroll" if cl else "vector_width")
    lanes = lanes_of(target)
    widths = {"lanes/2": lanes // 2, "2*lanes": 2 * lanes, "4*lanes": 4 * lanes,
              "8*lanes": 8 * lanes}
    if "vector_width" in space:
        space["vector_width"] = [widths[w] for w in space["vector_width"]]
    return space


def run(cmd, **kw):
    return subprocess.run(cmd, text=True, capture_output=True, **kw)


class Tuner:
    def __init__(self, target, args):
        self.target = target
        self.args = args
        self.build = Path(args.build_dir or ROOT / "build-tune" / target)
        self.schedules = self.build / "candidate-schedules"
        self.threads = args.threads or f"1,{os.cpu_count()}"
        self.gather_layouts = None

    def configure(self, family):
        kind, _, _, cl, _ = family_spec(family)
        gather = ("channels_last" if cl else "contiguous") if kind == "gather" else ""
        if gather == self.gather_layouts:
            return
        self.gather_layouts = gather
        (self.schedules / self.target).mkdir(parents=True, exist_ok=True)
        self.write_candidate(family, None)
        cmd = ["cmake", "-S", str(ROOT), "-B", str(self.build), "-G", "Ninja",
               "-DCMAKE_BUILD_TYPE=Release", f"-Dpoolgen-halide_generators_DIR={HOST_BUILD}/cmake",
               f"-DPOOLGEN_CPU_TARGETS={self.target}", "-DPOOLGEN_VALUE_TYPES=f32",
               "-DPOOLGEN_INDEX_TYPES=i64", "-DPOOLGEN_CUDA_CAPABILITIES=",
               "-DPOOLGEN_AVX512_FAMILIES=",  # the target alone, no AVX-512 variant besides
               "-DPOOLGEN_BUILD_TESTS=OFF", "-DPOOLGEN_BUILD_BENCH=ON",
               # Halide's entry checks in every candidate: a schedule that reads outside its
               # input (the autoschedulers' tiles can) then fails with Halide's bounds error,
               # where an unchecked kernel would read past the buffer, crash or, worse, pass.
               # They cost a call's fixed 0.1 us, nothing beside these shapes' times.
               "-DPOOLGEN_KERNEL_CHECKS=ON",
               f"-DPOOLGEN_SCHEDULES_DIR={self.schedules}",
               f"-DPOOLGEN_UNPOOL_GATHER_LAYOUTS={gather}"]
        r = run(cmd)
        if r.returncode:
            sys.exit(f"tune: configuring {self.build} failed:\n{r.stdout}{r.stderr}")

    def write_candidate(self, family, knobs):
        text = f"{family} {knob_text(knobs)}\n" if knobs else ""
        (self.schedules / self.target / "tuned.txt").write_text(text)

    def evaluate(self, family, knobs):
        """Median ms per (case, threads) of the candidate, or an error string."""
        self.write_candidate(family, knobs)
        r = run(["cmake", "--build", str(self.build), "--target", "poolgen_bench"])
        if r.returncode:
            lines = [l for l in (r.stdout + r.stderr).splitlines() if "rror" in l]
            return "build failed: " + (lines[0] if lines else r.stdout[-300:]).strip()[:300]
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            r = run([str(self.build / "bench" / "poolgen_bench"),
                     "--poolgen_cases=" + ",".join(cases_of(family)), "--poolgen_peers=",
                     f"--poolgen_threads={self.threads}", "--benchmark_filter=/poolgen/",
                     f"--poolgen_min_time={self.args.min_time}",
                     f"--poolgen_repetitions={self.args.repetitions}",
                     f"--benchmark_out={out.name}", "--benchmark_out_format=json"])
            if r.returncode:
                problems = [l for l in r.stdout.splitlines() if l.startswith("MISMATCH")]
                return "benchmark failed (exit %d): %s" % (
                    r.returncode, (problems[0] if problems else r.stderr[-300:]).strip())
            data = json.load(open(out.name))
        times = {}
        for b in data["benchmarks"]:
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            if b.get("error_occurred"):
                return "benchmark error: " + b.get("error_message", "")
            scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
            times[b["run_name"]] = b["real_time"] * scale
        if not times:
            return "benchmark ran no kernel of this family"
        return times

    def tune(self, family):
        self.configure(family)
        space = knob_space(family, self.target)
        hand = hand_knobs(family)
        candidates = []  # every candidate tried, in order

        def attempt(label, knobs):
            for c in candidates:  # coordinate descent revisits the incumbent: reuse its times
                if c["knobs"] == knobs and c["knobs"] is not None:
                    return c
            print(f"  {label:<12} {knob_text(knobs) if knobs else '(hand schedule)'}",
                  end="", flush=True)
            result = self.evaluate(family, knobs)
            c = {"label": label, "knobs": knobs, "knob_text": knob_text(knobs) if knobs else ""}
            if isinstance(result, str):
                c["status"] = result
                print(f"  -> {result}")
            else:
                c["status"] = "ok"
                c["times_ms"] = result
                c["score_ms"] = score_of(result)
                print(f"  -> {c['score_ms']:.3f} ms")
            candidates.append(c)
            return c

        best = attempt("hand", None)
        if best["status"] != "ok":
            sys.exit(f"tune: {family}: the hand schedule fails: {best['status']}")
        best_knobs = dict(hand)

        def better(c):
            return c["status"] == "ok" and c["score_ms"] < WIN_RATIO * best["score_ms"]

        for name, values in space.items():
            for value in values:
                knobs = dict(best_knobs, **{name: value})
                if knobs == hand and best["label"] == "hand":
                    continue
                c = attempt("knobs", knobs)
                if better(c):
                    best, best_knobs = c, knobs
        for auto in AUTOSCHEDULERS:
            c = attempt("auto", dict(auto))
            if better(c):
                best = c
        confirmation = None
        if best["label"] != "hand" and self.args.confirm > 0:
            confirmation = self.confirm(family, best)
            if not confirmation["accepted"]:
                best = candidates[0]
        self.write_candidate(family, None)
        return candidates, best, confirmation

    def confirm(self, family, best):
        """The search's winner against the hand schedule again, built and timed in turn
        (--confirm rounds): on a shared VM a run's timings move by more than the 2% a winner
        needs (two runs minutes apart scored one hand schedule 0.065 and 0.047 ms), so the
        winner stands only if the median of its paired speed-ups still clears 2%."""
        print(f"  confirm      {best['knob_text']} against the hand schedule:", end="", flush=True)
        speedups = []
        for _ in range(self.args.confirm):
            hand, ours = (self.evaluate(family, knobs) for knobs in (None, best["knobs"]))
            if isinstance(hand, str) or isinstance(ours, str):
                print(f" failed: {hand if isinstance(hand, str) else ours}")
                return {"candidate": best["knob_text"], "speedups": speedups, "accepted": False}
            speedups.append(score_of(hand) / score_of(ours))
            print(f" {speedups[-1]:.2f}x", end="", flush=True)
        accepted = statistics.median(speedups) >= 1 / WIN_RATIO
        print(" -> kept" if accepted else " -> within the noise: the hand schedule stays")
        return {"candidate": best["knob_text"], "speedups": speedups, "accepted": accepted}


def score_of(times):
    """A candidate's score: the geometric mean of its median times (ms)."""
    return math.exp(sum(math.log(t) for t in times.values()) / len(times))


def machine():
    # The first processor's fields, read once.
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    cpu = info.get("model name") or platform.processor()
    # Family and model tell the microarchitectures apart where a VM's model name does not
    # ("AMD EPYC" is Zen 4 as family 25 and Zen 5 as 26).
    for field in ("cpu family", "model"):
        if info.get(field):
            cpu += f", {field} {info[field]}"
    flags = info.get("flags", "").split()
    lscpu = run(["lscpu"]).stdout
    caches = {m.group(1): m.group(2).strip() for m in re.finditer(r"^(L\w+) cache:\s+(.*)$", lscpu, re.M)}
    gxx = run(["c++", "--version"]).stdout.splitlines()[0]
    git = run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"]).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "caches": caches,
            "isa": sorted(f for f in flags if f.startswith(("avx", "sse4", "fma", "f16c"))),
            "os": platform.platform(),
            "halide": run([str(VENV / "python"), "-c", "import importlib.metadata as m; "
                           "print(m.version('halide'))"]).stdout.strip(),
            "compiler": gxx, "poolgen": git}


def write_readme(folder, target):
    rows = []
    for path in sorted((folder / "records").glob("*.json")):
        r = json.load(open(path))
        hand = next(c for c in r["candidates"] if c["label"] == "hand")
        win = r["winner"]
        rows.append(f"| {r['family']} | {win['knob_text'] or '(hand schedule)'} | "
                    f"{hand['score_ms']:.3f} | {win['score_ms']:.3f} | "
                    f"{hand['score_ms'] / win['score_ms']:.2f}x | {len(r['candidates'])} | "
                    f"{r['date'][:10]} |")
    m = json.load(open(sorted((folder / "records").glob("*.json"))[-1]))["machine"] if rows else {}
    text = f"""# Tuned CPU schedules for `{target}`

Written by `tools/tune.py {target} ...` (do not edit by hand; rerun the tuner). `tuned.txt` holds
the winners that the build passes to the generators (schedules/knobs.h); `records/` holds, per
family, every candidate tried with its times. Families not listed use the hand schedule.

Machine of the latest record: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, Halide {m.get('halide', '?')}.
Score: geometric mean of the median times over the family's shapes on 1 and all threads (ms).

| family | winner | hand ms | tuned ms | speed-up | candidates | date |
|---|---|---:|---:|---:|---:|---|
""" + "\n".join(rows) + "\n"
    (folder / "README.md").write_text(text)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", help="Halide target, e.g. x86-64-linux-avx2-fma-f16c")
    p.add_argument("families", nargs="*", help="kernel families (default with --all: every one)")
    p.add_argument("--all", action="store_true", help="tune every family")
    p.add_argument("--threads", help="thread counts to time (default 1 and all cores)")
    p.add_argument("--repetitions", type=int, default=5, help="benchmark repetitions (median)")
    p.add_argument("--min-time", type=float, default=0.05, help="seconds per repetition")
    p.add_argument("--build-dir", help="tuning build folder (default build-tune/<target>)")
    p.add_argument("--out", default=str(ROOT / "schedules"), help="schedules folder to write")
    p.add_argument("--confirm", type=int, default=3,
                   help="rounds of the winner against the hand schedule, in turn (0: none)")
    args = p.parse_args()
    if args.target == "host" or "-" not in args.target:
        sys.exit("tune: name a full Halide target (x86-64-linux-avx2-fma-f16c), never host")
    families = all_families() if args.all else args.families
    for f in families:
        if not family_spec(f):
            sys.exit(f"tune: unknown family {f!r}; expected e.g. max_pool2d_k2s2p0_cl, "
                     "max_pool1d, max_unpool2d_k2s2p0 (gather), max_unpool_scatter_cl")
    if not families:
        sys.exit("tune: name families or pass --all")

    # The generators come from the host build (as tools/regenerate.sh does).
    if not (HOST_BUILD / "CMakeCache.txt").exists():
        sys.exit(f"tune: configure the host build first ({HOST_BUILD}: scripts/build.sh)")
    r = run(["cmake", "--build", str(HOST_BUILD), "--target", "poolgen_generators"])
    if r.returncode:
        sys.exit("tune: building the generators failed:\n" + r.stdout[-2000:])

    tuner = Tuner(args.target, args)
    folder = Path(args.out) / args.target
    (folder / "records").mkdir(parents=True, exist_ok=True)
    info = machine()
    for family in families:
        print(f"{family} on {args.target}: {', '.join(cases_of(family))}; threads {tuner.threads}")
        candidates, best, confirmation = tuner.tune(family)
        record = {"family": family, "target": args.target,
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "machine": info, "command": " ".join(["tools/tune.py"] + sys.argv[1:]),
                  "cases": cases_of(family), "threads": tuner.threads,
                  "benchmark": {"repetitions": args.repetitions, "min_time_s": args.min_time,
                                "statistic": "median real time", "value": "f32", "index": "i64"},
                  "candidates": candidates, "confirmation": confirmation, "winner": best}
        (folder / "records" / f"{family}.json").write_text(json.dumps(record, indent=1) + "\n")
        tuned = folder / "tuned.txt"
        lines = [l for l in (tuned.read_text().splitlines() if tuned.exists() else [])
                 if l and not l.startswith(family + " ") and not l.startswith("#")]
        if best["knob_text"]:
            lines.append(f"{family} {best['knob_text']}")
        tuned.write_text(f"# <family> <knobs>: written by tools/tune.py {args.target}; "
                         "how each was chosen: records/<family>.json\n" + "\n".join(sorted(lines)) + "\n")
        write_readme(folder, args.target)
        print(f"  winner: {best['knob_text'] or '(hand schedule)'} {best['score_ms']:.3f} ms")


if __name__ == "__main__":
    main()
