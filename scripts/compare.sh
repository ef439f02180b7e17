#!/usr/bin/env bash
# One command for the comparison against PyTorch ATen and XNNPACK: installs what is missing,
# builds poolgen_bench with both peers (the default kernel matrix, CPU only), runs the built-in
# cases and the size sweep (the forward ops and their backward passes), and writes
# <out-dir>/{benchmark.json,console.txt,comparison.md,max_pool.png,max_unpool.png,
# max_pool_backward.png,max_unpool_backward.png}.
#
#   ./scripts/compare.sh [out-dir]     default: bench/results/<cpu model>
#
# POOLGEN_COMPARE_BUILD_DIR picks the build folder (default build-compare), which gets the
# project's default kernel matrix unless POOLGEN_COMPARE_CMAKE_ARGS says otherwise (e.g.
# -DPOOLGEN_VALUE_TYPES=f32 builds faster); extra flags for poolgen_bench go in
# POOLGEN_BENCH_FLAGS (e.g. --poolgen_min_time=0.02 --poolgen_repetitions=1 for a quick look).
# Exits 2 (after writing the report) when a correctness check failed.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$ROOT"

# The peers: ATen and XNNPACK; matplotlib for the plots.
ensure_packages compare libtorch-dev libxnnpack-dev libpthreadpool-dev
[ -x .venv/bin/python3 ] || "$ROOT/scripts/setup.sh"
ensure_requirements tools/requirements-bench.txt

# e.g. "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz" -> intel-xeon-platinum-8375c
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
cpu=$(echo "${cpu:-unknown}" | sed -e 's/([RrTtMm]*)//g' -e 's/ CPU\b//; s/ Processor\b//; s/@.*//' \
  -e 's/[0-9]*-Core//' | tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '-' | sed 's/^-*//; s/-*$//')
out="${1:-$ROOT/bench/results/${cpu:-unknown}}"
mkdir -p "$out"
out=$(cd "$out" && pwd)

build="${POOLGEN_COMPARE_BUILD_DIR:-$ROOT/build-compare}"
start=$(date +%s)
# -U first: an existing build folder's own choices (a narrower matrix) give way to the defaults.
# shellcheck disable=SC2086  # POOLGEN_COMPARE_CMAKE_ARGS is a list of options
cmake -S "$ROOT" -B "$build" -G Ninja -U 'POOLGEN_*' -DCMAKE_BUILD_TYPE=Release \
  -DPOOLGEN_CUDA_CAPABILITIES= -DPOOLGEN_BUILD_TESTS=OFF -DPOOLGEN_BUILD_BENCH=ON \
  -DPOOLGEN_BENCH_ATEN=ON -DPOOLGEN_BENCH_XNNPACK=ON ${POOLGEN_COMPARE_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" --target poolgen_bench -j "$JOBS"
echo "compare: poolgen_bench built in $(($(date +%s) - start)) s; running (long: the sweep)"

start=$(date +%s)
rc=0
# shellcheck disable=SC2086  # POOLGEN_BENCH_FLAGS is a list of flags
"$build/bench/poolgen_bench" --poolgen_sweep --benchmark_out="$out/benchmark.json" \
  --benchmark_out_format=json ${POOLGEN_BENCH_FLAGS:-} | tee "$out/console.txt" || rc=$?
echo "compare: benchmark ran in $(($(date +%s) - start)) s"
.venv/bin/python3 tools/bench_report.py "$out/benchmark.json" "$out"
[ "$rc" -eq 0 ] || echo "compare: poolgen_bench exited with $rc (2: a correctness check failed, see MISMATCH lines)"
exit "$rc"
