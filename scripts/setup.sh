#!/usr/bin/env bash
# Installs what poolgen needs on Debian 12, idempotently: Debian packages (compiler, GoogleTest,
# Google Benchmark; clang and its sanitizer and libFuzzer runtimes for scripts/reliability.sh;
# the aarch64 cross toolchain and qemu; PoCL, an OpenCL on the CPU, for the GPU kernels' check;
# PyTorch 1.13 and pytest for the PyTorch binding) and a
# project-local virtual environment (.venv) with pinned Halide 21 (its official wheel: the C++
# SDK with LLVM built in), CMake and Ninja.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/env.sh
ensure_packages setup g++ make libgtest-dev libgmock-dev googletest libbenchmark-dev python3 \
  python3-venv pkg-config g++-aarch64-linux-gnu qemu-user-static clang libclang-rt-14-dev
# The GPU kernels' check without a GPU (scripts/reliability.sh opencl): PoCL, an OpenCL on the CPU.
ensure_packages setup --no-install-recommends ocl-icd-libopencl1 pocl-opencl-icd
# The PyTorch binding's: Debian's PyTorch (1.13) with its C++ headers, pytest, and pybind11's headers
# (the functions' direct entry points; PyTorch's wheels carry them, Debian's package does not).
ensure_packages setup --no-install-recommends python3-torch libtorch-dev python3-pytest pybind11-dev

if [ ! -x .venv/bin/python3 ]; then
  python3 -m venv .venv || /usr/bin/python3 -m venv .venv
fi
ensure_requirements tools/requirements.txt
echo "setup: done ($(.venv/bin/cmake --version | head -1), halide $(.venv/bin/python3 -c 'import importlib.metadata as m; print(m.version("halide"))'))"
