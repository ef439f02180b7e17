#!/usr/bin/env bash
# The CUDA checks on a machine with a GPU, from binaries built elsewhere (scripts/gpu_pack.sh
# packs them, xz-compressed, into .gpu/): the CUDA tests, poolgen_cuda_bench and PyTorch's CUDA
# kernels timed the same way (bench/torch_cuda_bench.py, needs python3 with CUDA PyTorch).
# Logs and JSON go to $OUT (default: build-gpu/), the table to stdout last.
#
#   scripts/gpu_check.sh [test|bench|all] [gtest filter]
# PEERS=0: no PyTorch runs; QUICK=1: fewer, shorter repetitions (a short lease).
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
filter=${2:-*}
out=${OUT:-build-gpu}
mkdir -p "$out" /tmp/poolgen-gpu
for f in .gpu/*.xz; do xz -dc "$f" >"/tmp/poolgen-gpu/$(basename "$f" .xz)"; done
chmod +x /tmp/poolgen-gpu/poolgen_*
export LD_LIBRARY_PATH=/tmp/poolgen-gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$out/device.txt"
status=0
if [[ $what != bench ]]; then
  /tmp/poolgen-gpu/poolgen_cuda_test --gtest_filter="$filter" --gtest_brief=1 \
      >"$out/cuda_test.log" 2>&1 || status=1
  tail -n 25 "$out/cuda_test.log"
fi
if [[ $what != test ]]; then
  reps=7 min_time=0.05 torch_time=0.2
  [[ ${QUICK:-0} == 1 ]] && reps=3 min_time=0.02 torch_time=0.1
  /tmp/poolgen-gpu/poolgen_cuda_bench --benchmark_repetitions=$reps \
      --benchmark_report_aggregates_only=true --benchmark_min_time=$min_time \
      --benchmark_out="$out/poolgen_cuda.json" --benchmark_out_format=json \
      >"$out/poolgen_cuda.log" 2>&1 || status=1
  # A sweep's other builds (gpu_pack.sh --sweep): the same rows, one column each.
  sweep=("$out/poolgen_cuda.json")
  for program in /tmp/poolgen-gpu/poolgen_cuda_bench-*; do
    [[ -e $program ]] || continue
    name=${program##*poolgen_cuda_bench-}
    "$program" --benchmark_repetitions=$reps --benchmark_report_aggregates_only=true \
        --benchmark_min_time=$min_time --benchmark_out="$out/sweep-$name.json" \
        --benchmark_out_format=json >/dev/null 2>&1 || status=1
    sweep+=("$out/sweep-$name.json")
  done
  ((${#sweep[@]} == 1)) || python3 bench/torch_cuda_bench.py --sweep "${sweep[@]}" | tee "$out/sweep.md"
  if [[ ${PEERS:-1} != 0 ]]; then
    python3 bench/torch_cuda_bench.py --poolgen "$out/poolgen_cuda.json" --min-time $torch_time \
        --markdown "$out/cuda_table.md" --json "$out/torch_cuda.json" || status=1
  else
    grep -E "median" "$out/poolgen_cuda.log" | awk '{print $1, $2, $3}'
  fi
fi
exit $status
