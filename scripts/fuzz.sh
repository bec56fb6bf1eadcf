#!/usr/bin/env bash
# Builds the libFuzzer targets with clang, ASan and UBSan in build-fuzz/ and runs them.
#   scripts/fuzz.sh --corpus-only   run each target once over its corpus; non-zero on any crash
#   scripts/fuzz.sh --minutes N     fuzz each target N minutes (all targets at once), then
#                                   minimise its corpus in tests/fuzz/corpus/<name>/ (-merge=1)
# Crash inputs land in build-fuzz/artifacts/<name>/; logs in build-fuzz/logs/<name>.log.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
minutes=0
case "${1:-}" in
  --corpus-only) [ $# -eq 1 ] || usage ;;
  --minutes) [ $# -eq 2 ] && [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -gt 0 ] || usage; minutes=$2 ;;
  *) usage ;;
esac

BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
CORPUS=tests/fuzz/corpus
declare -A TARGETS=([safetensors_header]=fuzz_safetensors_header [config]=fuzz_config)

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (scripts/setup.sh installs it)"
  exit 1
fi
# Only the fuzz targets are built: the rest of the tree keeps its gcc build in build/. CUDA is
# left out (an empty CMAKE_CUDA_COMPILER): the fuzzed code is host code, and the GPU plugins'
# configuration then cannot stop the fuzz build.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CUDA_COMPILER= \
  -DMOE_BUILD_TESTS=ON -DMOE_BUILD_FUZZERS=ON >/dev/null
cmake --build "$BUILD" --target "${TARGETS[@]}"
mkdir -p "$BUILD/logs"

# Leaks count as findings; -runs=0 executes every corpus input once and stops.
COMMON=(-timeout=10 -rss_limit_mb=2048 -detect_leaks=1 -print_final_stats=1)

if [ "$minutes" -eq 0 ]; then
  status=0
  for name in "${!TARGETS[@]}"; do
    mkdir -p "$BUILD/artifacts/$name"
    if "$BUILD/bin/${TARGETS[$name]}" "${COMMON[@]}" -runs=0 \
        -artifact_prefix="$BUILD/artifacts/$name/" "$CORPUS/$name" >"$BUILD/logs/$name.log" 2>&1
    then
      echo "fuzz: $name: $(ls "$CORPUS/$name" | wc -l) corpus inputs, no crash"
    else
      echo "fuzz: $name FAILED over its corpus; log: $BUILD/logs/$name.log"
      tail -n 40 "$BUILD/logs/$name.log"
      status=1
    fi
  done
  exit $status
fi

# Fuzz every target at once, new inputs going into a working copy of its corpus.
declare -A PIDS
for name in "${!TARGETS[@]}"; do
  work="$BUILD/corpus/$name"
  rm -rf "$work" && mkdir -p "$work" "$BUILD/artifacts/$name"
  cp "$CORPUS/$name"/* "$work"/
  "$BUILD/bin/${TARGETS[$name]}" "${COMMON[@]}" -max_total_time=$((minutes * 60)) \
    -artifact_prefix="$BUILD/artifacts/$name/" "$work" >"$BUILD/logs/$name.log" 2>&1 &
  PIDS[$name]=$!
done
status=0
for name in "${!TARGETS[@]}"; do
  if wait "${PIDS[$name]}"; then
    # The committed corpus: the hand-written seeds (any name but a 40-hex-digit hash), then the
    # fewest fuzzer inputs that keep every edge reached (-use_counters=0 ignores hit counts,
    # which keeps it to a few hundred files).
    fresh="$BUILD/corpus/$name.min"
    rm -rf "$fresh" && mkdir -p "$fresh"
    find "$CORPUS/$name" -type f -regextype posix-extended ! -regex '.*/[0-9a-f]{40}' \
      -exec cp {} "$fresh"/ \;
    "$BUILD/bin/${TARGETS[$name]}" -merge=1 -use_counters=0 "${COMMON[@]}" "$fresh" \
      "$BUILD/corpus/$name" >>"$BUILD/logs/$name.log" 2>&1
    rm -rf "${CORPUS:?}/$name" && cp -r "$fresh" "$CORPUS/$name"
    execs=$(awk '/^stat::number_of_executed_units/ {print $2; exit}' "$BUILD/logs/$name.log")
    echo "fuzz: $name: $execs executions," \
      "corpus $(ls "$CORPUS/$name" | wc -l) files, $(cat "$CORPUS/$name"/* | wc -c) bytes"
  else
    echo "fuzz: $name FOUND A PROBLEM; log: $BUILD/logs/$name.log, inputs: $BUILD/artifacts/$name/"
    tail -n 60 "$BUILD/logs/$name.log"
    status=1
  fi
done
exit $status
