#!/usr/bin/env bash
# Packs the CUDA test and benchmark programs of a build (default build/) for a GPU machine:
# stripped and xz-compressed into .gpu/ (ignored by git), with the Google Benchmark library they
# link, and the install tree (./install, scripts/build.sh's) that the PyTorch package builds
# against there. scripts/gpu_check.sh runs them there.
#
#   scripts/gpu_pack.sh [BUILD]
#   scripts/gpu_pack.sh --sweep NAME [CMAKE ARGS...]
#
# --sweep adds one more poolgen_cuda_bench and poolgen_cuda_test (-NAME), built with the CMake
# arguments (CUDA knobs: -DPOOLGEN_CUDA_KNOBS_max_pool="gpu_threads_x=64;gpu_threads_y=4") in
# build-sweep-NAME: f32 values and i64 indices (all the benchmark uses) on the SSE4.1 floor only,
# a few minutes on two cores. gpu_check.sh times every packed benchmark and tabulates them, and
# runs every packed test (a sweep's checks its schedules on f32 and i64 against the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
pack() {  # pack PROGRAM NAME
  strip -o ".gpu/$2" "$1"
  xz -T2 -6 -f ".gpu/$2"
}
if [[ ${1:-} == --sweep ]]; then
  name=$2
  shift 2
  export POOLGEN_BUILD_DIR=$PWD/build-sweep-$name
  source scripts/env.sh
  configure -DPOOLGEN_VALUE_TYPES=f32 -DPOOLGEN_INDEX_TYPES=i64 \
    -DPOOLGEN_CPU_TARGETS=x86-64-linux-sse41 -DPOOLGEN_BUILD_BENCH=ON "$@"
  cmake --build "build-sweep-$name" --target poolgen_cuda_bench poolgen_cuda_test
  mkdir -p .gpu
  pack "build-sweep-$name/bench/poolgen_cuda_bench" "poolgen_cuda_bench-$name"
  pack "build-sweep-$name/tests/poolgen_cuda_test" "poolgen_cuda_test-$name"
  du -sh .gpu
  exit 0
fi
build=${1:-build}
rm -rf .gpu && mkdir -p .gpu
for program in "$build/tests/poolgen_cuda_test" "$build/bench/poolgen_cuda_bench"; do
  pack "$program" "$(basename "$program")"
done
library=$(ldd "$build/bench/poolgen_cuda_bench" | awk '/libbenchmark/ {print $3}')
cp -L "$library" .gpu/ && xz -T2 -6 ".gpu/$(basename "$library")"
tar cf - install | xz -T2 -6 >.gpu/install.tar.xz
du -sh .gpu
