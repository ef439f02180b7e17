#!/usr/bin/env bash
# The CUDA checks on a machine with a GPU, from binaries built elsewhere (scripts/gpu_pack.sh
# packs them, xz-compressed, into .gpu/): the CUDA tests, poolgen_cuda_bench and PyTorch's CUDA
# kernels timed the same way (bench/torch_cuda_bench.py, needs python3 with CUDA PyTorch).
# Logs and JSON go to $OUT (default: build-gpu/), the table to stdout last.
#
#   scripts/gpu_check.sh [test|bench|pytorch|all] [gtest filter]
#   scripts/gpu_check.sh profile [benchmark filter]
# pytorch (part of all): builds poolgen's PyTorch package against the machine's CUDA PyTorch
# from the packed install tree and runs the binding's pytest suite (tests/python/test_cuda.py
# among it) on the GPU; with bench, the drop-in's column in the table.
# PEERS=0: no PyTorch runs; QUICK=1: fewer, shorter repetitions (a short lease); SHARDS=N: the
# tests in N processes at once; TEST_TIMEOUT=S: each stopped after S seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
filter=${2:-*}
out=${OUT:-build-gpu}
mkdir -p "$out" /tmp/poolgen-gpu
for f in .gpu/*.xz; do
  [[ $f == *.tar.xz ]] || xz -dc "$f" >"/tmp/poolgen-gpu/$(basename "$f" .xz)"
done
chmod +x /tmp/poolgen-gpu/poolgen_*
export LD_LIBRARY_PATH=/tmp/poolgen-gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$out/device.txt"
status=0
if [[ $what == test || $what == all ]]; then
  # SHARDS=N: N processes at once (gtest's sharding), the parity test's large shapes in
  # different ones; their logs end up in one.
  shards=${SHARDS:-1}
  for ((k = 0; k < shards; ++k)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$k \
        timeout "${TEST_TIMEOUT:-0}" /tmp/poolgen-gpu/poolgen_cuda_test \
        --gtest_filter="$filter" >"/tmp/poolgen-gpu/cuda_test-$k.log" 2>&1 &
  done
  # A sweep's tests (gpu_pack.sh --sweep), one process each beside the shards.
  sweeps=0
  for program in /tmp/poolgen-gpu/poolgen_cuda_test-*; do
    [[ -e $program ]] || continue
    timeout "${TEST_TIMEOUT:-0}" "$program" --gtest_filter="$filter" \
        >"/tmp/poolgen-gpu/cuda_test-${program##*poolgen_cuda_test-}.log" 2>&1 &
    ((++sweeps))
  done
  for ((k = 0; k < shards + sweeps; ++k)); do wait -n || status=1; done
  cat /tmp/poolgen-gpu/cuda_test-*.log >"$out/cuda_test.log"
  for log in /tmp/poolgen-gpu/cuda_test-*.log; do
    echo "${log##*/}: $(grep -E "^\[  (PASSED|FAILED) " "$log" | tr '\n' ' ')"
  done
  grep -E "^\[  FAILED  \]" "$out/cuda_test.log" | sort -u
fi
dropin=()
if [[ $what == pytorch || $what == all ]]; then
  # The package, built as a user builds it, into an environment that sees the machine's torch.
  rm -rf /tmp/poolgen-gpu/install /tmp/poolgen-gpu/env
  tar -xJf .gpu/install.tar.xz -C /tmp/poolgen-gpu
  python3 -m venv --system-site-packages /tmp/poolgen-gpu/env
  start=$(date +%s)
  POOLGEN_PREFIX=/tmp/poolgen-gpu/install MAX_JOBS=16 /tmp/poolgen-gpu/env/bin/python3 -m pip \
      install -q --no-build-isolation ./python >"$out/pytorch_build.log" 2>&1 || status=1
  echo "pytorch: the package built in $(($(date +%s) - start)) s"
  /tmp/poolgen-gpu/env/bin/python3 -m pip install -q expecttest >/dev/null 2>&1
  /tmp/poolgen-gpu/env/bin/python3 -m pytest -q -p no:cacheprovider tests/python \
      >"$out/pytest.log" 2>&1 || status=1
  tail -n 3 "$out/pytest.log"
  dropin=(--dropin)
fi
if [[ $what == bench || $what == all ]]; then
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
    python="python3"
    ((${#dropin[@]})) && python=/tmp/poolgen-gpu/env/bin/python3
    "$python" bench/torch_cuda_bench.py --poolgen "$out/poolgen_cuda.json" --min-time $torch_time \
        "${dropin[@]}" --markdown "$out/cuda_table.md" --json "$out/torch_cuda.json" || status=1
  else
    grep -E "median" "$out/poolgen_cuda.log" | awk '{print $1, $2, $3}'
  fi
fi
# profile FILTER: Nsight Compute's summary of the first kernels of the benchmark rows FILTER
# names (the image has ncu under /usr/local/cuda/bin).
if [[ $what == profile ]]; then
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  "$ncu" --section SpeedOfLight --section Occupancy --section ComputeWorkloadAnalysis \
      --launch-count "${NCU_LAUNCHES:-12}" /tmp/poolgen-gpu/poolgen_cuda_bench \
      --benchmark_filter="$filter" --benchmark_min_time=0.001 --benchmark_repetitions=1 \
      >"$out/ncu.txt" 2>&1 || status=1
  grep -E "^  [a-z_]+.*\(|Duration|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy" \
      "$out/ncu.txt"
fi
exit $status
