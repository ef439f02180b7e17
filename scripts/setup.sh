#!/usr/bin/env bash
# Installs what poolgen needs on Debian 12, idempotently: Debian packages (compiler, GoogleTest,
# Google Benchmark) and a project-local virtual environment (.venv) with pinned Halide 21 (its
# official wheel: the C++ SDK with LLVM built in), CMake and Ninja.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ make libgtest-dev libgmock-dev googletest libbenchmark-dev python3 python3-venv pkg-config
          g++-aarch64-linux-gnu qemu-user-static)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

if [ ! -x .venv/bin/python3 ]; then
  python3 -m venv .venv || /usr/bin/python3 -m venv .venv
fi
if ! cmp -s tools/requirements.txt .venv/.installed-requirements 2>/dev/null; then
  .venv/bin/python3 -m pip install -q --disable-pip-version-check -r tools/requirements.txt
  cp tools/requirements.txt .venv/.installed-requirements
fi
echo "setup: done ($(.venv/bin/cmake --version | head -1), halide $(.venv/bin/python3 -c 'import importlib.metadata as m; print(m.version("halide"))'))"
