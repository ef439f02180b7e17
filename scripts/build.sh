#!/usr/bin/env bash
# The main job: generate and build every kernel, install the library, then build the SegNet
# example against the installed tree (find_package(poolgen)) and run it.
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
