# Sourced by the scripts: the project's toolchain and build folders.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$ROOT/.venv/bin:$PATH"
BUILD="${POOLGEN_BUILD_DIR:-$ROOT/build}"
PREFIX="${POOLGEN_INSTALL_DIR:-$ROOT/install}"
JOBS="${POOLGEN_JOBS:-$(nproc)}"

configure() {
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$PREFIX" "$@" >/dev/null
}
