#!/usr/bin/env bash
# Builds (if needed) and runs the whole test suite: ctest on this machine, the PyTorch binding's
# pytest suite against the installed PyTorch and its wheel in a fresh environment, the
# TensorFlow adapter's (and poolgen.keras') against tensorflow-cpu
# (python/requirements-tensorflow.txt), the OpenVINO adapter's against openvino
# (python/requirements-openvino.txt), the JAX adapter's against jax
# (python/requirements-jax.txt), then (when
# the cross toolchain and qemu are installed) the aarch64 build's ctest under qemu-user, with the
# SegNet example against the installed ARM library.
set -euo pipefail
source "$(dirname "$0")/env.sh"
configure -DPOOLGEN_BUILD_TESTS=ON -DPOOLGEN_BUILD_BENCH=ON "$@"
cmake --build "$BUILD" -j "$JOBS"
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS"
# The binding, installed from this tree (scripts/build.sh's install), against stock PyTorch; its
# OpInfo tests need expecttest (python/requirements-test.txt). poolgen.numpy's tests run there
# too, with that PyTorch as their oracle.
cmake --install "$BUILD" >/dev/null
install_torch_package
ensure_requirements "$ROOT/python/requirements-test.txt" "$TORCH_ENV"
"$TORCH_ENV/bin/python3" -m pytest -q -p no:cacheprovider "$ROOT/tests/python" "$ROOT/tests/numpy"
check_torch_wheel
start=$(date +%s)
check_tensorflow_package
echo "test: the TensorFlow adapter built and tested in $(($(date +%s) - start)) s"
start=$(date +%s)
check_openvino_package
echo "test: the OpenVINO adapter built and tested in $(($(date +%s) - start)) s"
start=$(date +%s)
check_jax_package
echo "test: the JAX adapter built and tested in $(($(date +%s) - start)) s"
if have_aarch64; then
  start=$(date +%s)
  [ -f "$AARCH64_BUILD/CMakeCache.txt" ] || build_aarch64
  cmake --build "$AARCH64_BUILD" -j "$JOBS"
  cmake --install "$AARCH64_BUILD" >/dev/null
  echo "test: aarch64 kernels, library and tests built in $(($(date +%s) - start)) s"
  ctest --test-dir "$AARCH64_BUILD" --output-on-failure -j "$JOBS"
  # The SegNet example against the installed ARM library, under qemu.
  cmake -S "$ROOT/examples/segnet_roundtrip" -B "$AARCH64_BUILD/examples" -G Ninja \
    --toolchain "$ROOT/cmake/toolchains/aarch64-linux-gnu.cmake" \
    -DCMAKE_PREFIX_PATH="$AARCH64_PREFIX" >/dev/null
  cmake --build "$AARCH64_BUILD/examples"
  qemu-aarch64-static -L /usr/aarch64-linux-gnu "$AARCH64_BUILD/examples/segnet_roundtrip"
else
  echo "test: no aarch64 cross toolchain or qemu-user-static (scripts/setup.sh installs them)"
fi
