#!/usr/bin/env bash
# Installs the Debian packages pagellm needs (idempotent, quiet when all is there)
# and builds a Release tree in build/.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(cmake ninja-build g++ pkg-config libcli11-dev nlohmann-json3-dev libcpp-httplib-dev
      libspdlog-dev libfmt-dev libpcre2-dev libgtest-dev libgmock-dev libbenchmark-dev python3
      qemu-user  # qemu-user: the kernels on emulated CPUs without AVX-512 / AVX (tests)
      chromium chromium-driver  # the web UI's browser test (headless, through selenium)
      libopenmpi-dev openmpi-bin)  # pipeline stages across ranks (PAGELLM_MPI), and their tests
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python packages the tests use (from PyPI), installed only when missing, for
# the python3 that CMake's tests run with (PEP 668 systems need
# --break-system-packages).
PY=$(command -v python3)
py_missing=()
# rfc3339_validator (pip: rfc3339-validator): jsonschema's date-time and time
# format checks, which pass anything without it. numpy, gguf: the float64
# reference passes (tests/model/f64_reference.py).
for mod in pytest jinja2 openai requests jsonschema rfc3339_validator anthropic selenium numpy gguf; do
  "$PY" -c "import $mod" 2>/dev/null || py_missing+=("$mod")
done
if [ ${#py_missing[@]} -gt 0 ]; then
  echo "setup: pip installing ${py_missing[*]}"
  if ! "$PY" -m pip --version >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-pip >/dev/null
  fi
  pip_args=(-m pip install -q --disable-pip-version-check "${py_missing[@]}")
  [ "$(id -u)" -eq 0 ] && pip_args+=(--root-user-action=ignore)
  "$PY" "${pip_args[@]}" 2>/dev/null || "$PY" "${pip_args[@]}" --break-system-packages
fi

BUILD_DIR=${BUILD_DIR:-build}
# PAGELLM_CUDA_ARCHITECTURES (e.g. 90-real): the GPU architectures to build
# for, where nvcc is found (default: CMakeLists.txt's list).
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PY" \
    ${PAGELLM_CUDA_ARCHITECTURES:+-DCMAKE_CUDA_ARCHITECTURES="$PAGELLM_CUDA_ARCHITECTURES"} >/dev/null
fi
# One build at a time on this machine: serialize through a lock.
flock /tmp/pagellm-build.lock cmake --build "$BUILD_DIR" -j "$(nproc)"
