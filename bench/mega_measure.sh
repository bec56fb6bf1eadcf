#!/usr/bin/env bash
# One device call's cutlass_mega measurements, section by section, each packed into
# $OUT/mega_measure.tgz as it ends (a call cut at its time limit still brings what it did). Run on
# the device from the checkout's root after the bundle's unpack (bench/bundle.sh):
#
#   bench/bundle.sh build/g01 moe moe_mega_gpu_tests moe_stream_pattern moe_launch_cost   # here
#   source build/g01/unpack.sh; OUT=$OUT bench/mega_measure.sh micro tests ab timeline ncu  # there
#
# Sections (any order, any subset):
#   micro     moe_stream_pattern: TMA boxes, contiguous bulk copies, staggered K, 1/5/10 stages;
#             moe_launch_cost: a persistent cooperative launch by API, eager and in a graph
#   tests     the fused layer's GPU tests (all formats, the measurement layouts included)
#   sanitize  compute-sanitizer memcheck over a few fused-layer GPU tests (every format's graph
#             replay with new routing, many idle experts): an illegal address names its line
#             (session 52: a broken build failed every test with no more than "illegal memory access")
#   ab        (or ab_bf16, ab_fp8, ab_fp4 apart) bench/ab.py: the default against
#             MOE_MEGA_CHUNKS=1 and MOE_MEGA_LAUNCH=pdl (bf16 and fp8_block on Qwen3-30B-A3B and
#             Mixtral at T = 1, 8, 64; fp8_block also against MOE_MEGA_FP8_TOKENS=e4m3 and
#             MOE_MEGA_FP8_STAGE=128 (one e4m3 tile a stage, 64-slot items) and
#             MOE_MEGA_FP8_OWN_ROWS=1 (each CTA quantises batches up to 16384 values itself; the
#             default stops at 2048) and MOE_MEGA_FP8_PREFETCH=late (GEMM1's and GEMM2's
#             prefetch after the quantisations) and MOE_MEGA_FP8_WGMMA=1 (e4m3 codes by wgmma),
#             bf16 also
#             against MOE_MEGA_BF16_STAGE=64: one 16 KB tile a stage, by TMA) and
#             mxfp4 on Mixtral and Qwen3 against MOE_MEGA_FP4_STAGE=128 (one chunk a stage) and
#             512 (four, 2 stages, where H and I allow: Mixtral; Qwen3's I = 768 keeps two)
#   ab_nv     nvfp4 on Qwen3 and Mixtral against MOE_MEGA_FP4_STAGE=128 and 512
#   ab_stage  the stage sizes alone: bf16 (Qwen3, Mixtral; two chunks by default) against
#             MOE_MEGA_BF16_STAGE=64 by TMA and by one bulk copy; mxfp4 and nvfp4 on Mixtral (two
#             or four chunks by the batch) against MOE_MEGA_FP4_STAGE=256 and 512; nvfp4 on Qwen3
#             against MOE_MEGA_FP4_STAGE=128
#   ab_act    4-bit weights on e4m3 activations against bf16 ones (Qwen3-30B-A3B at T = 1, 8, 64:
#             mxfp4 on mxfp8, nvfp4 on e4m3 per tensor, static and from the batch's amax): what
#             the kernel's quantisation phases cost
#   grid_F    bench/run_grid.py for cutlass_mega in format F (bf16, fp8_block, mxfp4, nvfp4) on
#             Qwen3-30B-A3B, Mixtral and DeepSeek-V3 at T = 1..512 with the peers (carry .peers;
#             COMMIT=<hash> names the build in the records; GRID_SHAPES="s ..." and
#             GRID_TOKENS=t,... narrow it to fit a call)
#   timeline_fmt  MOE_MEGA_TIMELINE of bf16, fp8_block and mxfp4 at Qwen3 T = 1 and Mixtral T = 8:
#             each phase's span and per-SM rate, format beside format
#   timeline  MOE_MEGA_TIMELINE of Qwen3 bf16 T = 1 and 8 and Mixtral mxfp4 T = 8, each variant
#   ncu       Nsight Compute of Mixtral mxfp4 T = 8: stall reasons by instruction (where a 4-bit
#             stage's ~0.45 us goes); ncu_fp8 the same of fp8_block (what bounds its consumers)
#   ab_wgmma  the wgmma instances against the mma.sync ones: fp8_block Mixtral and Qwen3 at T = 1,
#             8, 64, default / MOE_MEGA_FP8_WGMMA=1 / =2 (two tiles a stage); mxfp4 Mixtral and
#             Qwen3 and nvfp4 Qwen3, default / MOE_MEGA_FP4_WGMMA=1 / MOE_MEGA_FP4_STAGE=256 (the same stage by mma.sync);
#             then the wgmma timelines of fp8_block Mixtral T = 8 and 64 and mxfp4 Mixtral T = 8
#   ab_split  MOE_MEGA_SPLIT2=waves (GEMM2 split along K past one wave) against the default: bf16
#             on Qwen3, Mixtral, DeepSeek-V3 and Inkling-like, fp8_block on Mixtral, T = 1, 8, 64
#   ab_early  MOE_MEGA_GEMM2=early (GEMM2's items wait on their chunk's GEMM1 flags, no grid barrier
#             between the GEMMs), alone and with MOE_MEGA_SPLIT2=waves, against the default and
#             waves alone: bf16 on Inkling-like, Qwen3, Mixtral, DeepSeek-V3 at T = 1, 8, 64, timed
#             as stream launches (--graph off: a captured launch keeps the barrier);
#             ab_early4 the same for mxfp4 on Qwen3 and Mixtral and nvfp4 on Mixtral
#   sinks     Inkling-like in fp8_block, mxfp4 and nvfp4 (the sinks apart: a second launch of the
#             bf16 kernel) at T = 1, 8, 64 by bench/ab.py beside the bf16 layer (sinks in its one
#             launch): what the second launch costs; then `moe run` of each against the reference
#   ncu_route the routing kernel's device time beside the fused layer's (Nsight Compute, one batch
#             each) for bf16 Qwen3-30B-A3B (softmax top-8 of 128), Mixtral (top-2 of 8), DeepSeek-V3
#             (grouped sigmoid top-8 of 256) and Inkling-like (sigmoid with sinks) at T = 1, 8, 64:
#             what fusing the routing into the layer's launch could save at most (issue 11's
#             "routing fused in where it pays"), besides one launch gap
#   route     what routing costs beside the layer: `moe bench` of bf16 Qwen3-30B-A3B and DeepSeek-V3
#             at T = 1, 8, 64 plain, with --route-in-run (ABI 1.6: the routing kernel and the layer
#             in one replayed graph) and with MOE_ROUTE_CARVEOUT=max too, two rounds; then Nsight
#             Compute source counters of the routing kernel at T = 1 (route_<shape>_stalls.txt):
#             where its ~9-15 us go
#   conf      `moe conformance --gpu-sized` of cutlass_mega alone (every problem file, the
#             route_in_run stage included: since session 51 up to 8 tokens route in the launch)
#   ab_base   this build's cutlass_mega against another build's (bench/bundle.sh --alt
#             base=DIR: restored as build/alt/base), plain layers (no routing): bf16, fp8_block
#             and mxfp4 on Qwen3-30B-A3B and Mixtral at T = 1, 8, 64: did a change move them
#   route_slots  routing in the launch by slot count: `moe bench --route-in-run` of bf16 Qwen3,
#             Mixtral and DeepSeek-V3 at T = 1, 8, this build against build/alt/s52, two rounds
#   ab_nocall this build against build/alt/nocall (no routing call in the kernel) and build/alt/base
#             (94bd241), bf16 and mxfp4 plain layers on Qwen3-30B-A3B and Mixtral at T = 1, 8, 64
#   ab_fill   the default (since session 55: GEMM2 split by the waves model, within one wave too)
#             against MOE_MEGA_SPLIT2=fit (k_split alone, the default before): Mixtral bf16 / mxfp4 /
#             fp8_block, Qwen3 bf16 / mxfp4, DeepSeek-V3 bf16 at T = 1-6, 8, 12, 16
#             (FILL_CONFIGS="config ..." narrows)
#   mixtral_small  Mixtral bf16 at T = 1, 2, 4, 8: timelines (where T = 2 and 4 lose ~0.7 TB/s
#             against T = 1 and 8, H100 s54 grid), then default against MOE_MEGA_SPLIT2=waves and
#             =fill at T = 1-6 (GEMM2's 96 / 160 items at T = 2 / 4 leave 36 CTAs idle or a
#             1.2-wave tail)
#   route64   routing in the launch past 8 tokens: `moe bench --route-in-run` of bf16 Qwen3-30B-A3B
#             and DeepSeek-V3 at T = 8, 16, 32, 64, default (route() first above 8) against
#             MOE_MEGA_ROUTE=fused64 and =apart, two rounds
#   ab_late   fp8_block Mixtral and Qwen3 at T = 1, 8, 64: default / MOE_MEGA_FP8_PREFETCH=late0 /
#             late1 / late (GEMM1's, GEMM2's, both first stages prefetched after the quantisation)
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export NCCL_NVLS_ENABLE=0
ab="python3 bench/ab.py --moe build/bin/moe --rounds 2 --timeout 150"
cfg=configs/bench/mega
pack() { tar -C "$OUT" --exclude=mega_measure.tgz -czf /tmp/mega_measure.tgz . && cp /tmp/mega_measure.tgz "$OUT/"; }
variants=(--variant default= --variant chunks= --env chunks=MOE_MEGA_CHUNKS=1
          --variant pdl= --env pdl=MOE_MEGA_LAUNCH=pdl)
# One A/B at T = 1, 8, 64 on each shape of a format, each packed as it ends, into
# $OUT/<prefix>_<shape>: ab_shapes PREFIX FORMAT "SHAPE ..." BENCH_AB_ARGS...
ab_shapes() {
  local prefix=$1 format=$2 shapes=$3
  shift 3
  for s in $shapes; do
    $ab --out "$OUT/${prefix}_$s" --config "$cfg/${s}_$format.yaml" --tokens 1,8,64 "$@" 2>&1 | tail -5
    pack
  done
}
# The timeline of one eager run into $OUT/NAME.json and its summary NAME.txt:
# timeline_run NAME CONFIG TOKENS [VAR=VALUE ...]
timeline_run() {
  local name=$1 config=$2 tokens=$3
  shift 3
  env "$@" MOE_MEGA_TIMELINE="$OUT/$name.json" timeout 120 build/bin/moe bench --config "$config" \
    --tokens "$tokens" --graph off --iterations 5 --check-max-tokens 0 > /dev/null 2>&1
  python3 bench/mega_timeline.py "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
}
# Two rounds of `moe bench` of each shape's bf16 config (graph, 30 iterations) per variant, its
# timing lines into $OUT/FILE as "<shape> <variant> round <r>: ...":
#   bench_rounds FILE "SHAPE ..." TOKENS NAME=SPEC ...
# SPEC: VAR=VALUE settings and --flags of `moe bench`, space-separated (empty: as built).
bench_rounds() {
  local file=$1 shapes=$2 tokens=$3
  shift 3
  for r in 1 2; do
    for s in $shapes; do
      for v in "$@"; do
        local name=${v%%=*} envs=() flags=()
        for w in ${v#*=}; do
          if [[ $w == --* ]]; then flags+=("$w"); else envs+=("$w"); fi
        done
        env "${envs[@]}" timeout 90 build/bin/moe bench --config "$cfg/${s}_bf16.yaml" \
          --tokens "$tokens" --iterations 30 --check-max-tokens 0 "${flags[@]}" 2>&1 |
          grep -E "^ +[0-9]+ |rror" | sed "s/^/$s $name round $r: /" | tee -a "$OUT/$file"
      done
    done
  done
}
qwen_mixtral="qwen3_30b_a3b mixtral_8x7b"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$OUT/gpu.txt"
for section in "$@"; do
  echo "== $section $(date -u +%H:%M:%S)"
  case "$section" in
    micro | micro2)  # micro2: two of the shapes (Qwen3's W13 on 96 SMs, four items an SM)
      shapes=("12288 2048 96" "16896 2048 132" "67584 2048 132" "16384 768 132")
      [ "$section" = micro2 ] && shapes=("12288 2048 96" "67584 2048 132")
      for shape in "${shapes[@]}"; do
        build/bin/moe_stream_pattern $shape
      done 2>&1 | tee "$OUT/stream_pattern.txt"
      build/bin/moe_launch_cost 2>&1 | tee "$OUT/launch_cost.txt" ;;
    tests)
      # The switches that wait on counts or launch differently first, each alone under its own
      # limit: a hang there is killed without the other tests' results.
      for t in Dependent PreparedChunks; do
        timeout 150 build/bin/moe_mega_gpu_tests --gtest_filter="*$t*" > "$OUT/gpu_tests_$t.txt" 2>&1
        echo "moe_mega_gpu_tests *$t* rc=$? (124: timed out)" | tee -a "$OUT/gpu_tests_$t.txt"
        grep -E "FAILED|PASSED" "$OUT/gpu_tests_$t.txt" | tail -4
      done
      timeout 400 build/bin/moe_mega_gpu_tests --gtest_filter="-*Dependent*:*PreparedChunks*" \
        > "$OUT/gpu_tests.txt" 2>&1
      echo "moe_mega_gpu_tests rc=$?" | tee -a "$OUT/gpu_tests.txt"
      grep -E "FAILED|PASSED" "$OUT/gpu_tests.txt" | tail -8 ;;
    sanitize)
      timeout 240 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 5 \
        build/bin/moe_mega_gpu_tests --gtest_filter="MegaLayer.ManyIdleExperts*:Formats/MegaGraph.*" \
        > "$OUT/sanitize.txt" 2>&1
      echo "compute-sanitizer rc=$? (124: timed out)" | tee -a "$OUT/sanitize.txt"
      grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitize.txt" | tail -4 ;;
    ab | ab_bf16 | ab_fp8 | ab_fp4)  # ab: all three; each A/B is packed as it ends
      if [ "$section" = ab ] || [ "$section" = ab_bf16 ]; then
        ab_shapes ab_bf16 bf16 "$qwen_mixtral" "${variants[@]}" \
          --variant one= --env one=MOE_MEGA_BF16_STAGE=64
      fi
      if [ "$section" = ab ] || [ "$section" = ab_fp8 ]; then
        ab_shapes ab_fp8 fp8_block "$qwen_mixtral" "${variants[@]}" \
          --variant e4m3= --env e4m3=MOE_MEGA_FP8_TOKENS=e4m3 \
          --variant one= --env one=MOE_MEGA_FP8_STAGE=128 \
          --variant own= --env own=MOE_MEGA_FP8_OWN_ROWS=1 \
          --variant late= --env late=MOE_MEGA_FP8_PREFETCH=late \
          --variant wgmma= --env wgmma=MOE_MEGA_FP8_WGMMA=1
      fi
      if [ "$section" = ab ] || [ "$section" = ab_fp4 ]; then
        ab_shapes ab_mxfp4 mxfp4 "$qwen_mixtral" \
          --variant x2= --variant x1= --env x1=MOE_MEGA_FP4_STAGE=128 \
          --variant x4= --env x4=MOE_MEGA_FP4_STAGE=512
      fi ;;
    ab_act)
      $ab --out "$OUT/ab_act_mxfp4" --config $cfg/qwen3_30b_a3b_mxfp4.yaml --tokens 1,8,64 \
        --variant bf16= --variant mxfp8= --config-of mxfp8=$cfg/qwen3_30b_a3b_mxfp4_mxfp8.yaml \
        2>&1 | tail -5
      pack
      $ab --out "$OUT/ab_act_nvfp4" --config $cfg/qwen3_30b_a3b_nvfp4.yaml --tokens 1,8,64 \
        --variant bf16= --variant static= --config-of static=$cfg/qwen3_30b_a3b_nvfp4_fp8_static.yaml \
        --variant dynamic= --config-of dynamic=$cfg/qwen3_30b_a3b_nvfp4_fp8_dynamic.yaml 2>&1 | tail -5 ;;
    ab_stage)  # the stage-size A/Bs alone: bf16 32 KB stages (and 16 KB bulk copies), 4-bit x2/x4
      for s in qwen3_30b_a3b mixtral_8x7b; do
        $ab --out "$OUT/ab_stage_bf16_$s" --config $cfg/${s}_bf16.yaml --tokens 1,8,64 \
          --variant x2= --variant rows= --env rows=MOE_MEGA_BF16_STAGE=64 \
          --variant chunks= --env chunks=MOE_MEGA_BF16_STAGE=64 \
          --env chunks=MOE_MEGA_CHUNKS=1 2>&1 | tail -5
        pack
      done
      for f in mxfp4 nvfp4; do
        $ab --out "$OUT/ab_stage_${f}_mixtral_8x7b" --config $cfg/mixtral_8x7b_$f.yaml \
          --tokens 1,8,32,64 --variant auto= --variant x2= --env x2=MOE_MEGA_FP4_STAGE=256 \
          --variant x4= --env x4=MOE_MEGA_FP4_STAGE=512 2>&1 | tail -6
        pack
      done
      $ab --out "$OUT/ab_stage_nvfp4_qwen3_30b_a3b" --config $cfg/qwen3_30b_a3b_nvfp4.yaml \
        --tokens 1,8,64 --variant x2= --variant x1= --env x1=MOE_MEGA_FP4_STAGE=128 2>&1 | tail -5 ;;
    ab_nv)  # nvfp4, two chunks a stage (the default) against one
      ab_shapes ab_nvfp4 nvfp4 "$qwen_mixtral" \
        --variant x2= --variant x1= --env x1=MOE_MEGA_FP4_STAGE=128 \
        --variant x4= --env x4=MOE_MEGA_FP4_STAGE=512 ;;
    ab_wgmma)
      ab_shapes ab_wgmma_fp8 fp8_block "$qwen_mixtral" \
        --variant default= --variant wgmma= --env wgmma=MOE_MEGA_FP8_WGMMA=1 \
        --variant wgmma2= --env wgmma2=MOE_MEGA_FP8_WGMMA=2
      fp4_wgmma=(--variant default= --variant wgmma= --env wgmma=MOE_MEGA_FP4_WGMMA=1
                 --variant x2= --env x2=MOE_MEGA_FP4_STAGE=256)
      ab_shapes ab_wgmma_mxfp4 mxfp4 "$qwen_mixtral" "${fp4_wgmma[@]}"
      ab_shapes ab_wgmma_nvfp4 nvfp4 qwen3_30b_a3b "${fp4_wgmma[@]}"
      for run in "fp8_block 8 MOE_MEGA_FP8_WGMMA" "fp8_block 64 MOE_MEGA_FP8_WGMMA" \
                 "mxfp4 8 MOE_MEGA_FP4_WGMMA"; do
        set -- $run
        name=tl_wgmma_mixtral_$1_t$2
        timeline_run $name $cfg/mixtral_8x7b_$1.yaml "$2" $3=1
        echo "== $name"; head -12 "$OUT/$name.txt"
      done ;;
    ab_split)  # MOE_MEGA_SPLIT2=waves: GEMM2 split past one wave, bf16 and fp8_block at T = 1, 8, 64
      ab_shapes ab_split_bf16 bf16 "$qwen_mixtral deepseek_v3 inkling_like" \
        --variant default= --variant waves= --env waves=MOE_MEGA_SPLIT2=waves
      ab_shapes ab_split_fp8 fp8_block mixtral_8x7b \
        --variant default= --variant waves= --env waves=MOE_MEGA_SPLIT2=waves ;;
    ab_early | ab_early4)
      early=(--graph off --variant default= --variant early= --env early=MOE_MEGA_GEMM2=early
             --variant waves= --env waves=MOE_MEGA_SPLIT2=waves
             --variant both= --env both=MOE_MEGA_GEMM2=early --env both=MOE_MEGA_SPLIT2=waves)
      if [ "$section" = ab_early ]; then
        ab_shapes ab_early_bf16 bf16 "inkling_like $qwen_mixtral deepseek_v3" "${early[@]}"
      else
        ab_shapes ab_early_mxfp4 mxfp4 "$qwen_mixtral" "${early[@]}"
        ab_shapes ab_early_nvfp4 nvfp4 mixtral_8x7b "${early[@]}"
      fi ;;
    ab_late)
      ab_shapes ab_late fp8_block "$qwen_mixtral" \
        --variant default= --variant late0= --env late0=MOE_MEGA_FP8_PREFETCH=late0 \
        --variant late1= --env late1=MOE_MEGA_FP8_PREFETCH=late1 \
        --variant late= --env late=MOE_MEGA_FP8_PREFETCH=late ;;
    timeline_fmt)  # one shape and batch in every format: where fp8_block's time goes beside bf16's
      for run in "qwen3_30b_a3b 1" "mixtral_8x7b 8"; do
        set -- $run
        for f in bf16 fp8_block mxfp4; do
          name=tlf_${1}_${f}_t${2}
          timeline_run $name $cfg/${1}_$f.yaml "$2"
          echo "== $name"; cat "$OUT/$name.txt"
        done
      done
      pack ;;
    timeline)
      for run in "qwen3_30b_a3b_bf16 1" "qwen3_30b_a3b_bf16 8" "mixtral_8x7b_mxfp4 8"; do
        set -- $run
        for v in "" MOE_MEGA_FP4_STAGE=128 MOE_MEGA_BF16_STAGE=64; do
          name=tl_${1}_t${2}${v:+_${v%%=*}}
          timeline_run $name $cfg/$1.yaml "$2" $v
          echo "$name"; tail -3 "$OUT/$name.txt"
        done
      done ;;
    ncu | ncu_fp8)  # Mixtral at T = 8: mxfp4 (mx8_*) or fp8_block (fp8_8_*)
      f=mxfp4 n=mx8
      [ "$section" = ncu_fp8 ] && f=fp8_block n=fp8_8
      ncu --clock-control none -k regex:fused_moe -s 3 -c 1 --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section WarpStateStats --section SourceCounters \
        --import-source no -o "$OUT/$n" build/bin/moe bench --config $cfg/mixtral_8x7b_$f.yaml \
        --tokens 8 --graph off --iterations 2 --check-max-tokens 0 > "$OUT/ncu_log_$n.txt" 2>&1
      ncu -i "$OUT/$n.ncu-rep" --page source --csv --print-source sass | gzip > "$OUT/$n.csv.gz"
      ncu -i "$OUT/$n.ncu-rep" --page details > "$OUT/${n}_details.txt" 2>&1
      rm -f "$OUT/$n.ncu-rep"
      python3 bench/ncu_stalls.py "$OUT/$n.csv.gz" --top 40 > "$OUT/${n}_stalls.txt" 2>&1
      head -30 "$OUT/${n}_stalls.txt" ;;
    sinks)
      # Every problem file with sinks, cutlass_mega against the reference.
      rm -rf /tmp/sink_problems && mkdir -p /tmp/sink_problems
      cp configs/problems/{fp8_block_sinks,bf16_decode_sinks,bf16_sink_inkling,inkling_like_bf16,inkling_like_fp8_block}.yaml \
        /tmp/sink_problems/
      timeout 280 build/bin/moe conformance --gpu-sized \
        --problems /tmp/sink_problems --plugin build/plugins/libmoe_cutlass_mega.so \
        --report "$OUT/conformance_sinks.json" 2>&1 | tail -8
      for f in bf16 fp8_block mxfp4 nvfp4; do
        $ab --out "$OUT/sinks_$f" --config $cfg/inkling_like_$f.yaml \
          --tokens 1,8,64 --variant default= 2>&1 | tail -4
        timeout 120 build/bin/moe run --config $cfg/inkling_like_$f.yaml --tokens 7 2>&1 |
          grep -E "backend|rel_err" | tee -a "$OUT/sinks_run.txt"
        pack
      done ;;
    route)
      bench_rounds route.txt "qwen3_30b_a3b deepseek_v3" 1,8,64 plain= route=--route-in-run \
        "carveout=MOE_ROUTE_CARVEOUT=max --route-in-run"
      for s in qwen3_30b_a3b deepseek_v3; do
        n=route_$s
        timeout 120 ncu --clock-control none -k regex:route_kernel -s 2 -c 1 --section SpeedOfLight \
          --section WarpStateStats --section SourceCounters --import-source no -o "$OUT/$n" \
          build/bin/moe bench --config $cfg/${s}_bf16.yaml --tokens 1 --graph off --iterations 2 \
          --check-max-tokens 0 --route-in-run > "$OUT/ncu_log_$n.txt" 2>&1
        ncu -i "$OUT/$n.ncu-rep" --page source --csv --print-source sass | gzip > "$OUT/$n.csv.gz"
        ncu -i "$OUT/$n.ncu-rep" --page details > "$OUT/${n}_details.txt" 2>&1
        rm -f "$OUT/$n.ncu-rep"
        python3 bench/ncu_stalls.py "$OUT/$n.csv.gz" --top 40 > "$OUT/${n}_stalls.txt" 2>&1
        head -25 "$OUT/${n}_stalls.txt"
      done
      pack ;;
    conf)
      timeout 500 build/bin/moe conformance --plugin build/plugins/libmoe_cutlass_mega.so \
        --gpu-sized --report "$OUT/conformance_mega.json" > "$OUT/conformance_mega.txt" 2>&1
      echo "conformance rc=$? (124: timed out)"
      grep -v "^ok\|^skip" "$OUT/conformance_mega.txt" | head -20
      grep -c "^ok" "$OUT/conformance_mega.txt" ;;
    ab_base)
      [ -d build/alt/base ] || { echo "ab_base: no build/alt/base (bench/bundle.sh --alt base=DIR)"; continue; }
      for f in bf16 fp8_block mxfp4; do
        ab_shapes ab_base_$f "$f" "$qwen_mixtral" --variant head= --variant base= \
          --plugins base=build/alt/base
      done ;;
    route_slots)  # routing in the launch by slot count (this build) against build/alt/s52 (8 slots
      # for every layer): `moe bench --route-in-run` of bf16 Qwen3, Mixtral, DeepSeek-V3 at T = 1, 8
      [ -d build/alt/s52 ] || { echo "route_slots: no build/alt/s52 (bench/bundle.sh --alt s52=DIR)"; continue; }
      bench_rounds route_slots.txt "qwen3_30b_a3b mixtral_8x7b deepseek_v3" 1,8 head=--route-in-run \
        "s52=MOE_PLUGIN_PATH=build/alt/s52 --route-in-run" ;;
    ab_nocall)  # this build against build/alt/nocall (the routing call removed from the kernel) and
      # build/alt/base (94bd241), plain layers: what the out-of-line routing costs a layer that never runs it
      [ -d build/alt/nocall ] || { echo "ab_nocall: no build/alt/nocall"; continue; }
      for f in ${NOCALL_FORMATS:-bf16 mxfp4}; do
        ab_shapes ab_nocall_$f "$f" "$qwen_mixtral" --variant head= --variant nocall= --variant base= \
          --plugins nocall=build/alt/nocall --plugins base=build/alt/base
      done ;;
    ab_fill)
      for c in ${FILL_CONFIGS:-mixtral_8x7b_bf16 mixtral_8x7b_mxfp4 mixtral_8x7b_fp8_block \
               qwen3_30b_a3b_bf16 deepseek_v3_bf16 qwen3_30b_a3b_mxfp4}; do
        $ab --out "$OUT/ab_fill_$c" --config $cfg/$c.yaml --tokens 1,2,3,4,5,6,8,12,16 \
          --variant default= --variant fit= --env fit=MOE_MEGA_SPLIT2=fit 2>&1 | tail -12
        pack
      done ;;
    mixtral_small)
      for t in 1 2 4 8; do
        timeline_run tl_mixtral_bf16_t$t $cfg/mixtral_8x7b_bf16.yaml $t
        echo "== T = $t"; tail -4 "$OUT/tl_mixtral_bf16_t$t.txt"
      done
      pack
      $ab --out "$OUT/ab_mixtral_small" --config $cfg/mixtral_8x7b_bf16.yaml --tokens 1,2,3,4,5,6 \
        --variant default= --variant waves= --env waves=MOE_MEGA_SPLIT2=waves \
        --variant fill= --env fill=MOE_MEGA_SPLIT2=fill 2>&1 | tail -9
      pack ;;
    route64)
      bench_rounds route64.txt "qwen3_30b_a3b deepseek_v3" 8,16,32,64 default=--route-in-run \
        "fused64=MOE_MEGA_ROUTE=fused64 --route-in-run" "apart=MOE_MEGA_ROUTE=apart --route-in-run" ;;
    ncu_route)
      for s in qwen3_30b_a3b mixtral_8x7b deepseek_v3 inkling_like; do
        for t in 1 8 64; do
          timeout 120 ncu --clock-control none -k regex:"route_kernel|fused_moe" -c 6 \
            --metrics gpu__time_duration.sum --print-units base --csv build/bin/moe bench --config $cfg/${s}_bf16.yaml \
            --tokens $t --graph off --iterations 2 --check-max-tokens 0 > "$OUT/ncu_route_${s}_$t.csv" 2>&1
          echo "$s T=$t: $(grep -E 'route_kernel|fused_moe' "$OUT/ncu_route_${s}_$t.csv" |
            awk -F'","' '{n=$5; sub(/\(.*/, "", n); printf "%s %s ns; ", n, $NF}' | tr -d '"')"
        done
        pack
      done ;;
    grid_*)  # grid_<format>: issue 11's grid of cutlass_mega in that format on the H200's three
      # model shapes at T = 1..512, the peers and trtllm_style bf16 in the same run (needs .peers
      # carried); each shape under its own limit, so a slow one leaves the others' records
      f=${section#grid_}
      for s in ${GRID_SHAPES:-qwen3_30b_a3b mixtral_8x7b deepseek_v3}; do
        timeout 280 python3 bench/run_grid.py --moe build/bin/moe --peers .peers --out "$OUT/grid_$f/$s" \
          --format "$f" --backend cutlass_mega --shapes $s \
          --tokens "${GRID_TOKENS:-1,2,4,8,16,32,64,128,512}" \
          --check-max-tokens deepseek_v3=1,default=8 --commit "${COMMIT:-unknown}" 2>&1 | tail -4
        echo "grid $f $s rc=$?"
        pack
      done ;;
    *) echo "bench/mega_measure.sh: unknown section '$section'" >&2 ;;
  esac
  pack
done
