#!/usr/bin/env bash
# The main job: generate and build every kernel, install the library, then build the SegNet
# example against the installed tree (find_package(poolgen)) and run it. Then the same for
# aarch64 (when setup.sh installed the cross toolchain and qemu): ARM kernels, runtime and tests
# into install-aarch64/, with the example run under qemu.
set -euo pipefail
source "$(dirname "$0")/env.sh"
start=$(date +%s)
configure "$@"
cmake --build "$BUILD" -j "$JOBS"
cmake --install "$BUILD" >/dev/null
echo "build: kernels and library built and installed to $PREFIX in $(($(date +%s) - start)) s"
cmake -S "$ROOT/examples/segnet_roundtrip" -B "$BUILD/examples" -G Ninja \
  -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$BUILD/examples"
"$BUILD/examples/segnet_roundtrip"
"$BUILD/examples/c_api_example"

if have_aarch64; then
  start=$(date +%s)
  build_aarch64
  echo "build: aarch64 kernels, library and tests built in $(($(date +%s) - start)) s"
  toolchain="$ROOT/cmake/toolchains/aarch64-linux-gnu.cmake"
  cmake -S "$ROOT/examples/segnet_roundtrip" -B "$AARCH64_BUILD/examples" -G Ninja \
    --toolchain "$toolchain" -DCMAKE_PREFIX_PATH="$AARCH64_PREFIX" >/dev/null
  cmake --build "$AARCH64_BUILD/examples"
  qemu-aarch64-static -L /usr/aarch64-linux-gnu "$AARCH64_BUILD/examples/segnet_roundtrip"
else
  echo "build: no aarch64 cross toolchain or qemu-user-static (scripts/setup.sh installs them)"
fi
