#!/usr/bin/env bash
# Adds the Python package to a device bundle (bench/bundle.sh's folder) for the device's Python,
# which may not be this machine's (the H200 image's python3 is 3.12): the extension
# moe_registry._core is compiled again against that Python's headers (an interpreter of the same
# minor version here, e.g. pyenv's) with the project venv's nanobind, and travels with the
# package's Python files, libmoe_core and the yaml-cpp it links. On the device, after unpack.sh:
#
#   bench/bundle_python.sh build/g01 /root/.pyenv/versions/3.12.1/bin/python3   # here
#   source build/g01/py/env.sh; (cd tests/python && python3 -m pytest -q test_ep_gpu.py)  # there
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 2 ]; then
  echo "usage: bench/bundle_python.sh <bundle folder under build/> <python of the device's version>" >&2
  exit 2
fi
out=$1 py=$2
[ -f "$out/unpack.sh" ] || { echo "bench/bundle_python.sh: $out is not a bench/bundle.sh folder" >&2; exit 1; }
[ -f build/lib/libmoe_core.so.1 ] || { echo "bench/bundle_python.sh: build/lib/libmoe_core.so.1 was not built" >&2; exit 1; }
nanobind=$(.venv/bin/python -m nanobind --cmake_dir)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project(moe_python_for_device CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(Python COMPONENTS Interpreter Development.Module REQUIRED)
set(nanobind_ROOT $nanobind)
find_package(nanobind CONFIG REQUIRED)
file(GLOB sources $PWD/python/src/*.cpp)
nanobind_add_module(_core NB_STATIC \${sources})
target_include_directories(_core PRIVATE $PWD/core/include)
target_compile_definitions(_core PRIVATE FMT_HEADER_ONLY=1)
target_link_libraries(_core PRIVATE $PWD/build/lib/libmoe_core.so.1)
CMAKE
cmake -S "$work" -B "$work/b" -G Ninja -DPython_EXECUTABLE="$py" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/b" >/dev/null
rm -rf "$out/py" && mkdir -p "$out/py"
cp -r build/python/moe_registry "$out/py/"
rm -f "$out"/py/moe_registry/_core.*.so
cp "$work"/b/_core.*.so "$out/py/moe_registry/"
cp -L build/lib/libmoe_core.so.1 "$out/py/"
cp -L "$(ldd build/lib/libmoe_core.so.1 | awk '/libyaml-cpp/ {print $3}')" "$out/py/"
cat > "$out/py/env.sh" <<'ENV'
# Sourced on the device from the checkout's root after the bundle's unpack.sh: the package on
# PYTHONPATH and its libraries where the extension finds them (build/lib, as in this build tree).
_py=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p build/lib build/python
cp "$_py"/lib*.so* build/lib/
rm -rf build/python/moe_registry && cp -r "$_py/moe_registry" build/python/
export PYTHONPATH=$PWD/build/python LD_LIBRARY_PATH=$PWD/build/lib:${LD_LIBRARY_PATH:-}
export PYTHONDONTWRITEBYTECODE=1 MOE_PLUGIN_PATH=
ENV
echo "bench/bundle_python.sh: $out/py holds moe_registry for $("$py" -c 'import sys; print(sys.version.split()[0])')"
