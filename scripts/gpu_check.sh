#!/usr/bin/env bash
# On a GPU machine (through the device tool) with a build carried in build/: the GPU unit tests,
# the GPU conformance run (every plugin against the reference; with --gpu-sized also the model
# shapes against the gpu_oracle plugin) and, with --bench SHAPES, the benchmark grid with its
# peers. Results go to $OUT (default /tmp/moe_out). MOE_COMMIT names the commit where the copy has
# no .git.
#   scripts/gpu_check.sh [--gpu-sized] [--bench qwen3_30b_a3b,mixtral_8x7b] [--tokens 1,8,64,512,4096,16384]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/moe_out}
mkdir -p "$OUT"
BENCH="" TOKENS="1,8,64,512,4096,16384" TESTS=1 CHECK="deepseek_v3=8,default=64" GPU_SIZED=""
while (($#)); do
  case $1 in
    --bench) BENCH=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --no-tests) TESTS=0; shift ;;
    --gpu-sized) GPU_SIZED=--gpu-sized; shift ;;
    --check-max-tokens) CHECK=$2; shift 2 ;;
    *) echo "unknown argument $1"; exit 2 ;;
  esac
done
export MOE_TEST_BUILD_DIR=$PWD/build MOE_TEST_SOURCE_DIR=$PWD MOE_PLUGIN_PATH=
# gpu_oracle links libcublas.so.13: the toolkit's, or the one pip's nvidia-cublas ships.
CUBLAS_PIP=$(python3 -c "import nvidia.cublas as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${CUBLAS_PIP:+:$CUBLAS_PIP}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/device.txt"
status=0
# Every plugin that was built must load here: a missing library (libcublas.so.13, say) would
# otherwise turn its GPU tests and conformance into skips that read like a clean run. The example
# third-party plugin is built apart (build/example_plugin) and joins every check by name.
EXAMPLE_DIR=(--plugin-dir build/example_plugin)
build/bin/moe "${EXAMPLE_DIR[@]}" list >"$OUT/list.txt" 2>&1
for so in build/plugins/*.so build/example_plugin/*.so; do
  if grep -q "skipped:" "$OUT/list.txt" && grep -q "$(basename "$so")" <(sed -n '/skipped:/,$p' "$OUT/list.txt"); then
    echo "FAILED: $so was built but does not load:"; sed -n '/skipped:/,$p' "$OUT/list.txt"; status=1
  fi
done
if ((TESTS)); then
  # The EP tests borrow a one-rank communicator from the NCCL that pip installed (as torch's).
  NCCL_PIP=$(python3 -c "import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], 'lib', 'libnccl.so.2'))" 2>/dev/null)
  [ -n "$NCCL_PIP" ] && [ -f "$NCCL_PIP" ] && export MOE_NCCL_LIBRARY="${MOE_NCCL_LIBRARY:-$NCCL_PIP}"
  for t in moe_cuda_common_tests moe_trtllm_gpu_tests moe_deepgemm_gpu_tests moe_gpu_oracle_tests \
           moe_conformance_tests moe_registry_tests moe_trtllm_layout_tests moe_ep_tests; do
    echo "== $t"
    build/bin/$t --gtest_brief=1 >"$OUT/$t.log" 2>&1 || status=1
    grep -E "FAILED|PASSED|SKIPPED \]|Failure" "$OUT/$t.log" | head -40
  done
  echo "== moe conformance"
  build/bin/moe "${EXAMPLE_DIR[@]}" conformance $GPU_SIZED --report "$OUT/conformance.json" >"$OUT/conformance.log" 2>&1 || status=1
  grep -v "^skip" "$OUT/conformance.log" | tail -30
  # With --gpu-sized, a model shape may be skipped only as unsupported by the plugin or because
  # the plugin keeps host memory: "no GPU oracle", a failed load or the like fails the check.
  if [ -n "$GPU_SIZED" ]; then
    python3 - "$OUT/conformance.json" <<'PY' || status=1
import json, sys
ok = ("unsupported", "GPU-sized model shape: ")
bad = [c for c in json.load(open(sys.argv[1]))["cases"]
       if c.get("status") == "skip" and not str(c.get("detail", "")).startswith(ok[0])
       and not (str(c.get("detail", "")).startswith(ok[1]) and "host memory" in c["detail"])]
for c in bad:
    print(f"FAILED: {c.get('plugin')} / {c.get('problem')} skipped: {c.get('detail')}")
sys.exit(1 if bad else 0)
PY
  fi
fi
if [ -n "$BENCH" ]; then
  echo "== bench $BENCH"
  PYTHONUNBUFFERED=1 python3 bench/run_grid.py --moe build/bin/moe --peers .peers --out "$OUT" \
    --shapes "$BENCH" --tokens "$TOKENS" --check-max-tokens "$CHECK" --commit "${MOE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}" \
    >"$OUT/bench.log" 2>&1 || status=1
  tail -40 "$OUT/bench.log"
fi
exit $status
