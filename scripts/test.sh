#!/usr/bin/env bash
# Builds (if needed) and runs the whole test suite with ctest: on this machine, then (when the
# cross toolchain and qemu are installed) the aarch64 build's under qemu-user, with the SegNet
# example against the installed ARM library.
set -euo pipefail
source "$(dirname "$0")/env.sh"
configure "$@"
cmake --build "$BUILD" -j "$JOBS"
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS"
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
