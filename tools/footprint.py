#!/usr/bin/env python3
"""What a program pays in code for linking poolgen: the text size (code and read-only data, as
`size` counts it) of every kernel archive of a build, summed per kernel family and per value
type, and of the linked example programs. Sizes are deterministic, so budgets can be checked:

  tools/footprint.py BUILD_DIR [--budget-linked BYTES] [--budget-f32 BYTES]

--budget-linked: the largest example program (it links every kernel through poolgen::poolgen);
--budget-f32: what an f32 program needs: the f32 pooling kernels and their gradient's, the 32-bit
unpooling kernels and their gradient's, the runtime and Halide's runtime, summed from the
archives. Exit status 1 when one is exceeded. Only the kernels of the build's current matrix
(its generated kernel tables) count.
"""
import argparse
import collections
import pathlib
import re
import subprocess
import sys

KERNEL = re.compile(r"^lib(max_(?:pool|unpool)\w*?)_(f32|f64|f16|bf16|i8|u8|i16|i32|i64|b8|b16|b32|b64)"
                    r"_(i32|i64)(_sm\d+)?\.a$")
RUNTIME = ("libpoolgen.a", "libpoolgen_halide_runtime.a")


def text_bytes(path):
    """The text column of `size -t` (every member of an archive), or of one executable."""
    out = subprocess.run(["size", "-t", str(path)], check=True, capture_output=True, text=True)
    return int(out.stdout.strip().splitlines()[-1].split()[0])


def mb(n):
    return f"{n / 1e6:.2f} MB"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", type=pathlib.Path)
    ap.add_argument("--budget-linked", type=int)
    ap.add_argument("--budget-f32", type=int)
    args = ap.parse_args()

    families = collections.Counter()  # "max_pool3d_k3s2p1_cl" or "... (CUDA)"
    per_type = collections.Counter()  # value type or unpooling width
    runtime = 0
    # The kernels of the build's current matrix (archives of an earlier configuration may remain).
    built = set()
    for table in args.build.glob("generated/*kernel_table.inc"):
        built.update(re.findall(r"^POOLGEN_KERNEL\(.*, (\w+)\)$", table.read_text(), re.M))
    for archive in sorted(args.build.glob("*.a")):
        size = text_bytes(archive)
        m = KERNEL.match(archive.name)
        if m and archive.name[3:-2] in built:
            family, value, _, cuda = m.groups()
            families[family + (" (CUDA)" if cuda else "")] += size
            per_type[value + (" (CUDA)" if cuda else "")] += size
    for name in RUNTIME:  # the runtime's archive lives in runtime/, Halide's beside the kernels
        found = sorted(args.build.glob(name)) or sorted(args.build.glob("*/" + name))
        runtime += text_bytes(found[0]) if found else 0
    if not families:
        sys.exit(f"footprint: no kernel archives in {args.build}")
    f32 = runtime + per_type["f32"] + per_type["b32"]

    print("| kernel family | text |\n|---|---:|")
    for family, size in sorted(families.items(), key=lambda kv: -kv[1]):
        print(f"| {family} | {mb(size)} |")
    print("\n| value type (unpooling: element width) | text |\n|---|---:|")
    for value, size in sorted(per_type.items(), key=lambda kv: -kv[1]):
        print(f"| {value} | {mb(size)} |")
    print(f"\nkernels {mb(sum(families.values()))}, runtime (poolgen and Halide's) {mb(runtime)}; "
          f"an f32 program's share (f32 pooling, 32-bit unpooling, their gradients, runtime) "
          f"{mb(f32)} ({f32:,} bytes)")

    failures = []
    linked = {}
    for example in ("segnet_roundtrip", "c_api_example"):
        for path in (args.build / "examples" / example, args.build / "examples" / example / example):
            if path.is_file():
                linked[example] = text_bytes(path)
                print(f"linked: {example} {mb(linked[example])}")
                break
    if args.budget_linked is not None:
        if not linked:
            failures.append("--budget-linked: no linked example in BUILD/examples")
        elif max(linked.values()) > args.budget_linked:
            failures.append(f"linked example: expected at most {args.budget_linked:,} bytes, "
                            f"got {max(linked.values()):,}")
    if args.budget_f32 is not None and f32 > args.budget_f32:
        failures.append(f"f32 share: expected at most {args.budget_f32:,} bytes, got {f32:,}")
    for f in failures:
        print(f"footprint: over budget: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
