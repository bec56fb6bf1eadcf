#!/usr/bin/env bash
# Sets up, builds and runs every test (unit, registry, conformance, install of a third-party plugin),
# then every fuzz target over its corpus (clang build in build-fuzz/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
export XDG_CACHE_HOME="$PWD/build/test_cache"  # the plugin scan cache stays in the build
ctest --test-dir build --output-on-failure --parallel "$(nproc)" --timeout 900
scripts/fuzz.sh --corpus-only
