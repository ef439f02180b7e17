#!/usr/bin/env bash
# Builds (if needed) and runs the whole test suite with ctest.
set -euo pipefail
source "$(dirname "$0")/env.sh"
configure "$@"
cmake --build "$BUILD" -j "$JOBS"
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS"
