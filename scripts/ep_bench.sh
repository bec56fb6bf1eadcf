#!/usr/bin/env bash
# On a machine with 2+ GPUs: expert-parallel step times (dispatch, local layer, combine) next to
# NCCL's own all-to-all of the same bytes and the same layer on one GPU.
#   scripts/ep_bench.sh [config] [steps] [tokens...]
# EP_JSONL=file: every rank also appends its record there (ep_size, the host step, the device
# step eager and as a replayed graph, NCCL's all-to-all, one GPU's layer). EP_CHUNKS=N: the
# device step is timed in N chunks too (its exchanges overlapping the layer).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 MOE_PLUGIN_PATH=
export MOE_NCCL_LIBRARY=${MOE_NCCL_LIBRARY:-$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))")}
CFG=${1:-configs/ep/ep_bench_qwen3.yaml}; STEPS=${2:-20}; shift 2 2>/dev/null
NPROC=$(nvidia-smi -L | wc -l)
for t in "${@:-64 4096}"; do
  echo "== $CFG tokens/rank $t, $NPROC GPUs"
  python3 -m torch.distributed.run --standalone --nproc-per-node "$NPROC" --no-python \
    build/bin/moe run --config "$CFG" --tokens "$t" --ep-bench "$STEPS" ${EP_JSONL:+--ep-jsonl "$EP_JSONL"} \
    ${EP_CHUNKS:+--ep-chunks "$EP_CHUNKS"} 2>&1 | grep -E "^rank|error"
done
