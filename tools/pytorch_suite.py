#!/usr/bin/env python3
"""Runs a PyTorch test file's CPU tests (its slow ones included) twice, with stock kernels and with
poolgen's drop-in on, and compares the outcomes.

    <python with torch and poolgen.torch> tools/pytorch_suite.py PATH/test/nn/test_pooling.py

PATH is a PyTorch source tree of the installed version's era (its test file is PyTorch's code and
stays out of this repository; docs/pytorch.md says where to get one). Prints passed / failed /
skipped per run, every test whose outcome differs, and how many calls poolgen served; exits 1
when a test that passes stock fails with the drop-in, or when the drop-in served nothing.
Each run is a child process, so that one cannot leak state into the other.
"""
import argparse
import json
import os
import subprocess
import sys


class Outcomes:
    """A pytest plugin: the drop-in switched on around each test (with --run dropin), and each
    test's outcome."""

    def __init__(self, dropin):
        self.dropin = dropin
        self.results = {}

    def pytest_runtest_setup(self, item):
        if self.dropin:
            import poolgen.torch
            poolgen.torch.enable()

    def pytest_runtest_teardown(self, item):
        import poolgen.torch
        poolgen.torch.disable()

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            name = report.nodeid.split("::", 1)[-1]
            if report.outcome == "failed":
                lines = str(report.longrepr).strip().splitlines()
                self.results[name] = ("failed", lines[-1][:300] if lines else "")
            elif name not in self.results:
                self.results[name] = (report.outcome, "")


def run_child(test_file, mode, json_path):
    import pytest
    import poolgen.torch
    plugin = Outcomes(mode == "dropin")
    poolgen.torch.reset_stats()
    pytest.main([test_file, "-q", "-p", "no:cacheprovider", "-k", "not cuda and not mps",
                 "--rootdir", os.path.dirname(test_file), "-W", "ignore"], plugins=[plugin])
    stats = poolgen.torch.stats("cpu")
    served = sum(v["poolgen"] for v in stats.values() if isinstance(v, dict))
    with open(json_path, "w") as f:
        json.dump({"results": plugin.results, "served": served}, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("test_file")
    parser.add_argument("--run", choices=["stock", "dropin"], help=argparse.SUPPRESS)
    parser.add_argument("--json", help=argparse.SUPPRESS)
    args = parser.parse_args()
    test_file = os.path.abspath(args.test_file)
    if args.run:
        run_child(test_file, args.run, args.json)
        return 0

    import tempfile
    import torch
    runs = {}
    with tempfile.TemporaryDirectory() as scratch:
        for mode in ("stock", "dropin"):
            out = os.path.join(scratch, mode + ".json")
            subprocess.run([sys.executable, __file__, test_file, "--run", mode, "--json", out],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           cwd=os.path.dirname(test_file), check=False,
                           env=dict(os.environ, PYTORCH_TEST_WITH_SLOW="1"))
            with open(out) as f:
                runs[mode] = json.load(f)
    print(f"PyTorch {torch.__version__}, {test_file}")
    for mode, run in runs.items():
        counts = {}
        for outcome, _ in run["results"].values():
            counts[outcome] = counts.get(outcome, 0) + 1
        print(f"  {mode:7} passed {counts.get('passed', 0)}, failed {counts.get('failed', 0)}, "
              f"skipped {counts.get('skipped', 0)}; calls poolgen served: {run['served']}")
    stock, dropin = runs["stock"]["results"], runs["dropin"]["results"]
    worse = []
    for name in sorted(set(stock) | set(dropin)):
        a, b = stock.get(name, ("absent", "")), dropin.get(name, ("absent", ""))
        if a[0] != b[0]:
            print(f"  {name}: stock {a[0]}, drop-in {b[0]} {b[1]}")
            if a[0] == "passed":
                worse.append(name)
    return 1 if worse or runs["dropin"]["served"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
