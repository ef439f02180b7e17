#!/usr/bin/env bash
# Packs the CUDA test and benchmark programs of a build (default build/) for a GPU machine:
# stripped and xz-compressed into .gpu/ (ignored by git), with the Google Benchmark library they
# link. scripts/gpu_check.sh runs them there.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rm -rf .gpu && mkdir -p .gpu
for program in "$build/tests/poolgen_cuda_test" "$build/bench/poolgen_cuda_bench"; do
  strip -o ".gpu/$(basename "$program")" "$program"
done
cp -L "$(ldd "$build/bench/poolgen_cuda_bench" | awk '/libbenchmark/ {print $3}')" .gpu/
xz -T2 -6 .gpu/*
du -sh .gpu
