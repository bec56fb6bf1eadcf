#!/usr/bin/env bash
# On a machine with 2+ GPUs (the device tool's nvidia-h200-x2): every configs/ep/ep2_*.yaml run
# expert-parallel under torchrun (plain, skewed routing, an empty rank), then the bad inputs a
# deployment meets: mismatched configs across ranks, a rank that never joins, a lone rank; and a
# checkpoint with --inputs and --output (configs/ep/ep2_mixtral_ckpt.yaml) against the numpy layer.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/moe_out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 MOE_PLUGIN_PATH=
export MOE_NCCL_LIBRARY=${MOE_NCCL_LIBRARY:-$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))")}
RUN=(python3 -m torch.distributed.run --standalone --nproc-per-node 2 --no-python build/bin/moe run)
status=0
for cfg in configs/ep/ep2_*.yaml; do
  [[ $cfg == *_ckpt.yaml ]] && continue  # below: it needs the checkpoint fixture
  for extra in "" "--ep-skew" "--ep-empty-rank 1"; do
    echo "== $cfg $extra"
    "${RUN[@]}" --config "$cfg" $extra 2>&1 | grep -E "^rank|error|Error" || status=1
  done
done
# A checkpoint under EP: each rank loads its experts, runs its share of the inputs, and rank 0's
# --output must match the fixture's numpy layer as a one-GPU run's does (not bit for bit: two
# ranks' partial rows are summed in f32 and rounded once more).
ck=build/fixtures/checkpoints/mixtral
[ -d $ck ] || python3 tests/fixtures/make_checkpoints.py --out build/fixtures/checkpoints >/dev/null
echo "== configs/ep/ep2_mixtral_ckpt.yaml --inputs --output"
"${RUN[@]}" --config configs/ep/ep2_mixtral_ckpt.yaml --inputs $ck/inputs.safetensors \
  --output "$OUT/ep2_ckpt.safetensors" 2>&1 | grep -E "^rank|error|Error" || status=1
sed 's/ep_placement: round_robin, ep_size: 2/ep_placement: none/' configs/ep/ep2_mixtral_ckpt.yaml \
  > "$OUT/one_ckpt.yaml"
build/bin/moe run --config "$OUT/one_ckpt.yaml" --inputs $ck/inputs.safetensors \
  --output "$OUT/one_ckpt.safetensors" | grep -E "rel_err" || status=1
for f in ep2_ckpt one_ckpt; do
  python3 tests/fixtures/check_output.py $ck/expected.safetensors "$OUT/$f.safetensors" --tol 1e-2 \
    || status=1
done
cfg=configs/ep/ep2_softmax_linear.yaml
one() { RANK=$1 WORLD_SIZE=2 LOCAL_RANK=$1 TORCHELASTIC_RUN_ID=$2 build/bin/moe run --config $cfg "${@:3}"; }
# Each bad input must be refused with its message (a missing message fails the check).
expect() {  # expect <what> <regex>: stdin must match
  local out; out=$(cat)
  echo "$out" | tail -4
  if ! echo "$out" | grep -qE "$2"; then echo "FAILED: $1 was not refused with /$2/"; status=1; fi
}
echo "== mismatched configs (seed 7 vs 8)"
( one 0 mm --seed 7 & one 1 mm --seed 8; wait ) 2>&1 \
  | expect "a rank with another config" "runs a different config than rank 0"
echo "== rank 1 alone: rank 0 never publishes the id"
MOE_EP_TIMEOUT_S=8 one 1 nj 2>&1 | expect "a rank alone" "rank 0 did not publish the NCCL id"
echo "== rank 0 alone: nobody joins the communicator"
MOE_EP_TIMEOUT_S=15 one 0 lone 2>&1 | expect "rank 0 alone" "a rank never joined"
exit $status
