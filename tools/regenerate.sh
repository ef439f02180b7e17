#!/usr/bin/env bash
# Regenerates poolgen for a Halide target and installs a self-contained folder: the kernels'
# static libraries, Halide's runtime for that target, the public headers, poolgen's runtime
# (compiled, or as sources where this machine has no C++ toolchain for the target) and a CMake
# package (find_package(poolgen) with CMAKE_PREFIX_PATH=<out-dir>).
#
#   tools/regenerate.sh <halide-target>[,<halide-target>...] <out-dir> [cmake options...]
#
# Several comma-separated targets make one fat library per kernel, best first, the last the
# baseline (Halide picks at run time what the CPU supports). A CUDA target
# (...-cuda-cuda_capability_NN) builds the CPU kernels for its CPU part plus CUDA kernels for
# that capability. Examples:
#   tools/regenerate.sh arm-64-linux-arm_dot_prod-arm_fp16,arm-64-linux out/arm64
#   tools/regenerate.sh x86-64-osx-avx2-fma,x86-64-osx out/macos
#   tools/regenerate.sh x86-64-windows out/windows -DPOOLGEN_VALUE_TYPES=f32
#   tools/regenerate.sh arm-64-linux-cuda-cuda_capability_80 out/jetson
# The generators run on this machine: they come from the host build (scripts/build.sh's), which
# is configured and its generator built first if needed. The build folder is
# build-regen/<targets>, or $POOLGEN_REGEN_BUILD_DIR.
set -euo pipefail
source "$(dirname "$0")/../scripts/env.sh"

if (($# < 2)); then
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
targets="$1"
out="$(mkdir -p "$2" && cd "$2" && pwd)"
shift 2

# CUDA: the capability goes to POOLGEN_CUDA_CAPABILITIES, the rest of the target is the CPU's.
cpu_targets="" capabilities=""
IFS=, read -ra list <<<"$targets"
for t in "${list[@]}"; do
  if [[ "$t" == *-cuda* ]]; then
    [[ "$t" =~ cuda_capability_([0-9]+) ]] || {
      echo "regenerate: $t: pin a CUDA capability (cuda_capability_70 or higher)" >&2
      exit 2
    }
    capabilities="${capabilities:+$capabilities;}${BASH_REMATCH[1]}"
    t="$(sed -E 's/-cuda_capability_[0-9]+//; s/-cuda//' <<<"$t")"
  fi
  [[ ";$cpu_targets;" == *";$t;"* ]] || cpu_targets="${cpu_targets:+$cpu_targets;}$t"
done
platform="$(cut -d- -f1-3 <<<"${list[0]}")"  # arch-bits-os, e.g. arm-64-linux

# How poolgen's C++ runtime gets compiled for the target.
toolchain=()
case "$platform" in
  x86-64-linux) ;;  # this machine's own
  arm-64-linux)
    if command -v aarch64-linux-gnu-g++ >/dev/null; then
      toolchain=(--toolchain "$ROOT/cmake/toolchains/aarch64-linux-gnu.cmake")
    else
      toolchain=(-DPOOLGEN_BUILD_RUNTIME=OFF)
    fi
    ;;
  *) toolchain=(-DPOOLGEN_BUILD_RUNTIME=OFF) ;;  # shipped as sources; the package compiles them
esac

# The host build's generators.
[ -f "$BUILD/CMakeCache.txt" ] || configure
cmake --build "$BUILD" --target poolgen_generators -j "$JOBS" >/dev/null

regen_build="${POOLGEN_REGEN_BUILD_DIR:-$ROOT/build-regen/${targets//[,;\/]/_}}"
echo "regenerate: $targets -> $out (build folder $regen_build)"
cmake -S "$ROOT" -B "$regen_build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${toolchain[@]}" \
  -Dpoolgen-halide_generators_DIR="$BUILD/cmake" -DCMAKE_INSTALL_PREFIX="$out" \
  -DPOOLGEN_CPU_TARGETS="$cpu_targets" -DPOOLGEN_CUDA_CAPABILITIES="$capabilities" \
  -DPOOLGEN_BUILD_TESTS=OFF -DPOOLGEN_BUILD_BENCH=OFF "$@" >/dev/null
cmake --build "$regen_build" -j "$JOBS"
cmake --install "$regen_build" >/dev/null
python3 "$ROOT/tools/check_archives.py" "$out/lib" "${list[0]}"
echo "regenerate: done: use it with find_package(poolgen) and -DCMAKE_PREFIX_PATH=$out"
