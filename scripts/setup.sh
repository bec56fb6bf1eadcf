#!/usr/bin/env bash
# Installs every build and test dependency of moe-registry. Safe to run any number of times:
# it installs only what is missing. Debian packages go to the system; PyPI packages go to the
# project's virtual environment .venv/ (a stock Debian 12+ or Ubuntu 24.04 Python refuses pip
# installs into itself), which CMake and the tests use by themselves (cmake/Python.cmake).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build ccache python3 python3-venv python3-dev
  libyaml-cpp-dev libspdlog-dev libfmt-dev libboost-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev
  clang libclang-rt-dev   # scripts/fuzz.sh: libFuzzer, ASan, UBSan
)
CUTLASS_PIN="nvidia-cutlass==4.2.0.0"   # CUTLASS/CuTe headers for the GPU plugins
# The real safetensors writer for tests/fixtures/make_safetensors.py (bf16 and e4m3 numpy dtypes
# from ml_dtypes).
PY_PINS=("safetensors==0.8.0" "ml_dtypes==0.6.0" "numpy==2.4.6")
# The Python package moe_registry (python/): nanobind to build its extension in the CMake build,
# pytest to run tests/python; scikit-build-core is what `pip install .` builds it with.
PY_PINS+=("nanobind==3.1.0" "scikit-build-core==1.1.2" "pytest==9.2.0")
# cuobjdump (and the nvdisasm it runs) for tests/sass: the GPU plugins' machine code checked on the
# CPU, where the CUDA toolkit installed lacks them.
PY_PINS+=("nvidia-cuda-cuobjdump==13.5.37" "nvidia-cuda-nvdisasm==13.5.37")
VENV=.venv

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

# The venv is made again when its interpreter no longer starts (its base Python was removed).
if ! "$VENV/bin/python3" -c "" 2>/dev/null; then
  echo "setup: creating the virtual environment $VENV"
  "${PYTHON:-python3}" -m venv --clear "$VENV"
fi
# Installs the pins whose version is not the one present (one interpreter start for all).
todo=$("$VENV/bin/python3" - "$CUTLASS_PIN" "${PY_PINS[@]}" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        have = None
    if have != want:
        print(pin)
PY
)
if [ -n "$todo" ]; then
  echo "setup: installing into $VENV:" $todo
  # shellcheck disable=SC2086  # one pin per word
  "$VENV/bin/python3" -m pip install -q $todo
fi
echo "setup: dependencies present"
