#!/usr/bin/env bash
# Builds (if needed) and runs the whole test suite with ctest: on this machine, then (when the
# cross toolchain and qemu are installed) the aarch64 build's under qemu-user.
set -euo pipefail
source "$(dirname "$0")/env.sh"
configure "$@"
cmake --build "$BUILD" -j "$JOBS"
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS"
if have_aarch64; then
  [ -f "$AARCH64_BUILD/CMakeCache.txt" ] || build_aarch64
  cmake --build "$AARCH64_BUILD" -j "$JOBS"
  ctest --test-dir "$AARCH64_BUILD" --output-on-failure -j "$JOBS"
fi
