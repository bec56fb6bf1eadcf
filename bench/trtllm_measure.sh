#!/usr/bin/env bash
# One device call's trtllm_style measurements (issue 12), section by section, each packed into
# $OUT/trtllm_measure.tgz as it ends (a call cut at its time limit still brings what it did). Run
# on the device from the checkout's root after the bundle's unpack (bench/bundle.sh):
#
#   bench/bundle.sh build/g07 moe moe_trtllm_gpu_tests                       # here, then
#   tar -C build/fixtures/checkpoints -czf build/g07/ckpt.tgz gpt_oss_mxfp4 nvfp4 quark_mxfp4 \
#     stacked_mxfp8                                                          # (checkpoints)
#   source build/g07/unpack.sh; OUT=$OUT bench/trtllm_measure.sh tests checkpoints ab_narrow  # there
#
# Timings compare only within one call: say which card gave them. Sections (any order, subset):
#   tests        moe_trtllm_gpu_tests (every format, last_block: narrow, graphs, refusals)
#   checkpoints  the four weight-only checkpoint fixtures (gpt-oss mxfp4 with biases, modelopt
#                nvfp4, Quark mxfp4, stacked mxfp8) end to end through `moe run --inputs/--output`
#                against the reference (needs ckpt.tgz beside the bundle: CKPT=<file>)
#   ab_narrow    bf16 on Qwen3-30B-A3B and Mixtral at T = 512 and 4096: default (CUTLASS 128x256
#                and the separate activation) / bf16_gemm: own (auto tile) / own + last_block:
#                narrow / own 128 + narrow (the fused 128x256: 1.44-1.55x, session 46)
#   conformance_wo  conformance --gpu-sized of trtllm_style on the weight-only model problems
#                (Qwen3 mxfp4, nvfp4, mxfp8; gpt-oss-120b mxfp4)
#   grid_F       bench/run_grid.py for trtllm_style in format F (bf16, fp8_tensor, fp8_block, mxfp4,
#                nvfp4, mxfp8) at T = 1, 8, 64, 512, 4096 with the format's peers, shape by shape
#                (carry .peers; COMMIT=<hash> names the build in the records; GRID_SHAPES="s ..."
#                and GRID_TOKENS=t,... narrow it to fit a call)
#   ncu_bf16     Nsight Compute of Qwen3 bf16 at T = 4096 on the default path: every kernel of one
#                layer run (permutation, gather, GEMM1, activation, GEMM2, finalize) with speed of
#                light and the memory tables (the L2's reads from the SMs beside its DRAM fills:
#                what session 19 asked before any byte-saving bf16 variant); ncu_fp8 the same of
#                fp8_tensor (dynamic scales)
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export NCCL_NVLS_ENABLE=0
ab="python3 bench/ab.py --moe build/bin/moe --rounds 2 --timeout 120"
cfg=configs/bench
pack() {
  tar -C "$OUT" --exclude=trtllm_measure.tgz -czf /tmp/trtllm_measure.tgz . &&
    cp /tmp/trtllm_measure.tgz "$OUT/"
}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
for section in "$@"; do
  echo "== $section"
  case "$section" in
    tests)
      timeout 300 build/bin/moe_trtllm_gpu_tests > "$OUT/trtllm_gpu_tests.txt" 2>&1
      echo "rc=$?"
      grep -E "FAILED|PASSED|Failure" "$OUT/trtllm_gpu_tests.txt" | tail -12 ;;
    checkpoints)
      mkdir -p build/fixtures/checkpoints
      tar -C build/fixtures/checkpoints -xzf "${CKPT:-build/g07/ckpt.tgz}"
      for c in gpt_oss_mxfp4 nvfp4 quark_mxfp4 stacked_mxfp8; do
        echo "-- $c"
        timeout 60 build/bin/moe run --config configs/${c}_ckpt_gpu.yaml \
          --checkpoint build/fixtures/checkpoints/$c \
          --inputs build/fixtures/checkpoints/$c/inputs.safetensors \
          --output /tmp/out_$c.safetensors 2>&1 | grep -E "backend|rel_err|error"
      done | tee "$OUT/checkpoints.txt" ;;
    ab_narrow)
      for s in qwen3_30b_a3b mixtral_8x7b; do
        timeout 260 $ab --out "$OUT/ab_narrow_$s" --config "$cfg/${s}_bf16.yaml" \
          --tokens 512,4096 --variant default= --variant own='bf16_gemm: own' \
          --variant narrow='bf16_gemm: own, last_block: narrow' \
          --variant n128='bf16_gemm: own, token_tile: 128, last_block: narrow' 2>&1 | tail -1
        sed -n '/^| T/,/^$/p' "$OUT/ab_narrow_$s/ab.md" | head -6
        pack
      done ;;
    conformance_wo)
      rm -rf /tmp/wo_problems && mkdir -p /tmp/wo_problems
      cp configs/problems/{qwen3_30b_a3b_mxfp4,qwen3_30b_a3b_nvfp4,qwen3_30b_a3b_mxfp8,gpt_oss_120b_mxfp4}.yaml \
        /tmp/wo_problems/
      timeout 280 build/bin/moe conformance --gpu-sized --problems /tmp/wo_problems \
        --plugin build/plugins/libmoe_trtllm_style.so --report "$OUT/conformance_wo.json" 2>&1 |
        tail -8 ;;
    grid_*)  # one shape at a time under its own limit, so a slow one leaves the others' records
      f=${section#grid_}
      shapes="qwen3_30b_a3b mixtral_8x7b deepseek_v3"
      [ "$f" = bf16 ] && shapes="$shapes inkling_like"
      for s in ${GRID_SHAPES:-$shapes}; do
        timeout 280 python3 bench/run_grid.py --moe build/bin/moe --peers .peers \
          --out "$OUT/grid_$f/$s" --format "$f" --backend trtllm_style --shapes $s \
          --tokens "${GRID_TOKENS:-1,8,64,512,4096}" --commit "${COMMIT:-unknown}" 2>&1 |
          grep -E "^\| (shape|qwen|mix|deep|ink)"
        pack
      done ;;
    ncu_bf16 | ncu_fp8)
      f=bf16 n=ncu_qwen3_bf16_4096
      [ "$section" = ncu_fp8 ] && f=fp8_tensor n=ncu_qwen3_fp8_tensor_4096
      # The last of a few layer runs: skip what the first runs launched, capture one run's kernels.
      ncu --clock-control none -s 40 -c 20 --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
        --section LaunchStats --section Occupancy -o "$OUT/$n" build/bin/moe bench \
        --config $cfg/qwen3_30b_a3b_$f.yaml --tokens 4096 --graph off --warmup 4 --iterations 4 \
        --check-max-tokens 0 > "$OUT/${n}_log.txt" 2>&1
      ncu -i "$OUT/$n.ncu-rep" --page details > "$OUT/${n}_details.txt" 2>&1
      ncu -i "$OUT/$n.ncu-rep" --page raw --csv --metrics gpu__time_duration.sum 2>/dev/null |
        gzip > "$OUT/${n}_times.csv.gz"
      rm -f "$OUT/$n.ncu-rep"
      grep -E "^  [a-zA-Z_].*\(|Duration|Memory Throughput|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)" \
        "$OUT/${n}_details.txt" | head -80 ;;
    *)
      echo "unknown section '$section'" >&2 ;;
  esac
  pack
done
