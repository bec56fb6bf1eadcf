#!/usr/bin/env bash
# Installs every build and test dependency of moe-registry. Safe to run any number of times:
# it installs only what is missing.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build ccache python3 python3-pip
  libyaml-cpp-dev libspdlog-dev libfmt-dev libboost-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev
  clang libclang-rt-dev   # scripts/fuzz.sh: libFuzzer, ASan, UBSan
)
CUTLASS_PIN="nvidia-cutlass==4.2.0.0"   # CUTLASS/CuTe headers for the GPU plugins
# The real safetensors writer for tests/fixtures/make_safetensors.py (bf16 and e4m3 numpy dtypes
# from ml_dtypes).
PY_PINS=("safetensors==0.8.0" "ml_dtypes==0.6.0" "numpy==2.4.6")

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q "${missing[@]}" || { $SUDO apt-get update -q && $SUDO apt-get install -y -q "${missing[@]}"; }
fi

PY=${PYTHON:-python3}
# Installs a pinned PyPI package unless that version is present. (sed reads all of pip's output:
# `grep -q` would exit early and fail the pipeline under pipefail, reinstalling every time.)
pip_pin() {
  local have
  have=$("$PY" -m pip show "${1%%==*}" 2>/dev/null | sed -n 's/^Version: //p') || true
  [ "$have" = "${1#*==}" ] && return 0
  echo "setup: installing $1"
  "$PY" -m pip install -q --root-user-action=ignore "$1" 2>/dev/null || "$PY" -m pip install -q "$1"
}
for pin in "$CUTLASS_PIN" "${PY_PINS[@]}"; do pip_pin "$pin"; done
echo "setup: dependencies present"
