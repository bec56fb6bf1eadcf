#!/usr/bin/env bash
# Issue 12 (trtllm_style) on one GPU, ~8 min: OUT=$OUT bash bench/trtllm_measure.sh [BUNDLE]
# BUNDLE: bench/bundle.sh's folder of moe and moe_trtllm_gpu_tests (default build/g07), carried
# alone, with ckpt.tgz of the four weight-only checkpoint fixtures beside it. Timings compare
# only within this call: say which card gave them.
# 1. moe_trtllm_gpu_tests: the first run of last_block: narrow (eight reference cases and the
#    narrow-vs-full sums test), of the one-expert scenario that now really routes every token to
#    one expert, and of the wrong-shape scale refusals.
# 2. The four weight-only checkpoint fixtures end to end through `moe run --inputs/--output`
#    (last run 2026-12-02).
# 3. bf16 A/B at T = 512 and 4096 on Qwen3 and Mixtral: default (CUTLASS 128x256 + separate
#    activation) / own (weight-only GEMM, auto tile) / own + narrow / own 128 + narrow / CUTLASS
#    128x256 with the activation fused (never measured for bf16).
# 4. conformance --gpu-sized of trtllm_style on the new weight-only model problems (Qwen3 mxfp4,
#    nvfp4, mxfp8; gpt-oss-120b mxfp4).
set -uo pipefail
bundle=${1:-build/g07}
source "$bundle/unpack.sh"
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
pk() { tar -C $OUT --exclude=all.tgz -czf /tmp/x.tgz . && cp /tmp/x.tgz $OUT/all.tgz; }
mkdir -p build/fixtures/checkpoints && tar -C build/fixtures/checkpoints -xzf "$bundle/ckpt.tgz"
timeout 300 build/bin/moe_trtllm_gpu_tests > $OUT/trtllm_gpu_tests.txt 2>&1
echo "trtllm gpu tests rc=$?"; grep -E "FAILED|PASSED|Failure" $OUT/trtllm_gpu_tests.txt | tail -12
for c in gpt_oss_mxfp4 nvfp4 quark_mxfp4 stacked_mxfp8; do
  echo "== $c"
  timeout 60 build/bin/moe run --config configs/${c}_ckpt_gpu.yaml \
    --checkpoint build/fixtures/checkpoints/$c --inputs build/fixtures/checkpoints/$c/inputs.safetensors \
    --output /tmp/out_$c.safetensors 2>&1 | grep -E "backend|rel_err|error"
done | tee $OUT/ckpt.txt
pk
for s in qwen3_30b_a3b mixtral_8x7b; do
  timeout 240 python3 bench/ab.py --moe build/bin/moe --rounds 2 --timeout 100 --out $OUT/ab_$s \
    --config configs/bench/${s}_bf16.yaml --tokens 512,4096 --variant default= \
    --variant own='bf16_gemm: own' --variant narrow='bf16_gemm: own, last_block: narrow' \
    --variant n128='bf16_gemm: own, token_tile: 128, last_block: narrow' \
    --variant widefused='gemm_tiles: wide, activation_epilogue: fused' 2>&1 | tail -1
  sed -n '/^| T/,/^$/p' $OUT/ab_$s/ab.md | head -6
  pk
done
mkdir -p /tmp/wo_problems
cp configs/problems/{qwen3_30b_a3b_mxfp4,qwen3_30b_a3b_nvfp4,qwen3_30b_a3b_mxfp8,gpt_oss_120b_mxfp4}.yaml /tmp/wo_problems/
timeout 240 build/bin/moe conformance --gpu-sized --problems /tmp/wo_problems \
  --plugin build/plugins/libmoe_trtllm_style.so --report $OUT/conformance_wo.json 2>&1 | tail -8
pk
