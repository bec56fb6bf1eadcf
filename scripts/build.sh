#!/usr/bin/env bash
# Sets up dependencies, configures and builds into build/ (tool: build/bin/moe, plugins: build/plugins).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_TYPE=${BUILD_TYPE:-Release}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" ${CMAKE_ARGS:-}
cmake --build build --parallel "$(nproc)"
