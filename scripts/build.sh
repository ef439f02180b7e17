#!/usr/bin/env bash
# The main job: generate and build every kernel, install the library, then build the SegNet
# example against the installed tree (find_package(poolgen)) and run it, report the code it
# links, and install the PyTorch package and run its SegNet demo against stock PyTorch. The
# tests and benchmarks are scripts/test.sh's, as is the aarch64 build (ARM kernels under qemu).
set -euo pipefail
source "$(dirname "$0")/env.sh"
start=$(date +%s)
configure -DPOOLGEN_BUILD_TESTS=OFF -DPOOLGEN_BUILD_BENCH=OFF "$@"
cmake --build "$BUILD" -j "$JOBS"
cmake --install "$BUILD" >/dev/null
echo "build: kernels and library built and installed to $PREFIX in $(($(date +%s) - start)) s"
cmake -S "$ROOT/examples/segnet_roundtrip" -B "$BUILD/examples" -G Ninja \
  -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$BUILD/examples"
"$BUILD/examples/segnet_roundtrip"
"$BUILD/examples/c_api_example"
"$BUILD/examples/c_api_shared_example" | tail -1  # the C API through libpoolgen.so

# What a program linking the library pays in code (docs/footprint.md); the default matrix has
# budgets, which CI enforces (sizes are deterministic).
budgets=()
(($#)) || budgets=(--budget-linked "$POOLGEN_BUDGET_LINKED" --budget-f32 "$POOLGEN_BUDGET_F32")
python3 "$ROOT/tools/footprint.py" "$BUILD" "${budgets[@]}" | tail -4

# The PyTorch binding, installed into $TORCH_ENV as a user installs it, then its demo: a SegNet
# trained with PyTorch's kernels and with poolgen's must agree bit for bit.
start=$(date +%s)
install_torch_package
echo "build: the PyTorch package built and installed into $TORCH_ENV in $(($(date +%s) - start)) s"
"$TORCH_ENV/bin/python3" "$ROOT/examples/pytorch/segnet.py"
