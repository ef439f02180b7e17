# Sourced by the scripts: the project's toolchain and build folders.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$ROOT/.venv/bin:$PATH"
BUILD="${POOLGEN_BUILD_DIR:-$ROOT/build}"
PREFIX="${POOLGEN_INSTALL_DIR:-$ROOT/install}"
JOBS="${POOLGEN_JOBS:-$(nproc)}"

# ensure_packages <who> [--apt-option...] <debian package>...: installs the missing ones
# (apt-get, sudo if not root).
ensure_packages() {
  local who="$1" missing=() options=() p sudo=""
  shift
  for p in "$@"; do
    if [[ "$p" == --* ]]; then
      options+=("$p")
    elif ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  ((${#missing[@]})) || return 0
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "$who: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${options[@]}" "${missing[@]}"
}

# ensure_requirements <file> [environment]: pip-installs a pinned requirements file into a
# virtual environment (default .venv) once per change.
ensure_requirements() {
  local env="${2:-$ROOT/.venv}"
  local stamp="$env/.installed-$(basename "$1" .txt)"
  cmp -s "$1" "$stamp" 2>/dev/null && return 0
  "$env/bin/python3" -m pip install -q --disable-pip-version-check -r "$1"
  cp "$1" "$stamp"
}

# The PyTorch binding (python/): built against a Python that has PyTorch (Debian's python3-torch
# by default) and installed, as a user installs it, into an environment made from that Python
# which sees its packages: TORCH_ENV.
TORCH_PYTHON="${POOLGEN_TORCH_PYTHON:-/usr/bin/python3}"
TORCH_ENV="${POOLGEN_TORCH_ENV:-$BUILD/torch-env}"
install_torch_package() {
  [ -x "$TORCH_ENV/bin/python3" ] || "$TORCH_PYTHON" -m venv --system-site-packages "$TORCH_ENV"
  POOLGEN_PREFIX="$PREFIX" "$TORCH_ENV/bin/python3" -m pip install -q --disable-pip-version-check \
    --no-build-isolation "$ROOT/python"
}

# The PyTorch package as a wheel (pip wheel), installed into a fresh environment that sees only
# the system's PyTorch and used from outside the source tree (tests/python/wheel_smoke.py).
check_torch_wheel() {
  local wheels="$BUILD/torch-wheel" env="$BUILD/torch-wheel-env" run
  rm -rf "$wheels" "$env"
  POOLGEN_PREFIX="$PREFIX" "$TORCH_ENV/bin/python3" -m pip wheel -q --disable-pip-version-check \
    --no-build-isolation --no-deps -w "$wheels" "$ROOT/python"
  "$TORCH_PYTHON" -m venv --system-site-packages "$env"
  "$env/bin/python3" -m pip install -q --disable-pip-version-check --no-index --no-deps \
    "$wheels"/poolgen-*.whl
  run=$(mktemp -d)
  cp "$ROOT/tests/python/wheel_smoke.py" "$run/"
  (cd "$run" && "$env/bin/python3" -I wheel_smoke.py "$wheels"/poolgen-*.whl)
  rm -rf "$run"
}

# The TensorFlow and OpenVINO adapters (python/): each built against its framework's pinned wheels
# (python/requirements-<framework>.txt) in an environment of its own, made from ADAPTER_PYTHON,
# then its suites run there (pytest's arguments after the first two).
ADAPTER_PYTHON="${POOLGEN_ADAPTER_PYTHON:-/usr/bin/python3}"
check_adapter_package() {
  local framework="$1" env="$2"
  shift 2
  [ -x "$env/bin/python3" ] || "$ADAPTER_PYTHON" -m venv "$env"
  ensure_requirements "$ROOT/python/requirements-$framework.txt" "$env"
  POOLGEN_PREFIX="$PREFIX" "$env/bin/python3" -m pip install -q \
    --disable-pip-version-check --no-build-isolation "$ROOT/python"
  "$env/bin/python3" -m pytest -q -p no:cacheprovider "$@"
}

# poolgen.tensorflow against TensorFlow's own kernels (tests/tensorflow), with poolgen.keras on
# Keras' TensorFlow backend (tests/keras). About a minute where pip's cache holds the wheels,
# plus their download (about 300 MB) on a fresh machine.
TENSORFLOW_ENV="${POOLGEN_TENSORFLOW_ENV:-$BUILD/tensorflow-env}"
check_tensorflow_package() {
  TF_CPP_MIN_LOG_LEVEL=3 KERAS_BACKEND=tensorflow check_adapter_package tensorflow \
    "$TENSORFLOW_ENV" "$ROOT/tests/tensorflow" "$ROOT/tests/keras"
}

# poolgen.openvino against ONNX Runtime's outputs checked in under tests/golden
# (tests/openvino). About 20 s where pip's cache holds the wheels, plus their download (about
# 80 MB) on a fresh machine.
OPENVINO_ENV="${POOLGEN_OPENVINO_ENV:-$BUILD/openvino-env}"
check_openvino_package() {
  check_adapter_package openvino "$OPENVINO_ENV" "$ROOT/tests/openvino"
}

# poolgen.jax against a NumPy reference of PyTorch's rules and JAX's transformations
# (tests/jax), with poolgen.keras on Keras' JAX backend (tests/keras), and against PyTorch itself where ADAPTER_PYTHON has it (Debian's python3-torch): its
# environment sees the system's packages, unlike the other adapters'. About 10 s where pip's
# cache holds the wheels, plus their download (about 100 MB) on a fresh machine.
JAX_ENV="${POOLGEN_JAX_ENV:-$BUILD/jax-env}"
check_jax_package() {
  [ -x "$JAX_ENV/bin/python3" ] || "$ADAPTER_PYTHON" -m venv --system-site-packages "$JAX_ENV"
  KERAS_BACKEND=jax check_adapter_package jax "$JAX_ENV" "$ROOT/tests/jax" "$ROOT/tests/keras"
}

# Budgets of the default build's code (tools/footprint.py; docs/footprint.md): the largest
# linked example, and an f32 program's share of the archives.
POOLGEN_BUDGET_LINKED=${POOLGEN_BUDGET_LINKED:-13056900}
POOLGEN_BUDGET_F32=${POOLGEN_BUDGET_F32:-2994500}

configure() {
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$PREFIX" "$@" >/dev/null
}

# The aarch64 build: the ARM kernels (the variants cmake/PoolgenKernels.cmake picks for ARM),
# runtime and tests, cross-compiled with Debian's aarch64 toolchain and tested under qemu-user.
AARCH64_TARGETS="arm-64-linux-arm_dot_prod-arm_fp16,arm-64-linux"
AARCH64_BUILD="${POOLGEN_AARCH64_BUILD_DIR:-$ROOT/build-aarch64}"
AARCH64_PREFIX="${POOLGEN_AARCH64_INSTALL_DIR:-$ROOT/install-aarch64}"
have_aarch64() {
  [ "${POOLGEN_AARCH64:-1}" != 0 ] && command -v aarch64-linux-gnu-g++ >/dev/null &&
    command -v qemu-aarch64-static >/dev/null
}
build_aarch64() {
  POOLGEN_REGEN_BUILD_DIR="$AARCH64_BUILD" "$ROOT/tools/regenerate.sh" "$AARCH64_TARGETS" \
    "$AARCH64_PREFIX" -DPOOLGEN_BUILD_TESTS=ON "$@"
}
