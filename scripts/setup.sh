#!/usr/bin/env bash
# Installs every build and test dependency of moe-registry. Safe to run any number of times:
# it installs only what is missing.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build ccache python3 python3-pip
  libyaml-cpp-dev libspdlog-dev libfmt-dev libboost-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev
)
CUTLASS_PIN="nvidia-cutlass==4.2.0.0"   # CUTLASS/CuTe headers for the GPU plugins

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
if ! "$PY" -m pip show nvidia-cutlass 2>/dev/null | grep -q '^Version: 4.2.0.0$'; then
  echo "setup: installing $CUTLASS_PIN"
  "$PY" -m pip install -q --root-user-action=ignore "$CUTLASS_PIN" 2>/dev/null \
    || "$PY" -m pip install -q "$CUTLASS_PIN"
fi
echo "setup: dependencies present"
