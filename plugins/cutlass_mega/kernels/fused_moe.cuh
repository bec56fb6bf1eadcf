// cutlass_mega's layer in one cooperative launch (docs/design.md §13): bf16, fp8_block, mxfp4 or
// nvfp4 weights, every activation of §5, routing given as top-k ids and weights.
//
// Every CTA (one per SM) first builds the same schedule in shared memory from the ids
// (kernels/schedule.cuh). Then the phases, separated by grid-wide barriers (fp8_block batches of
// at most kOwnRowsDefaultElems values: a CTA barrier after phase 0, each CTA quantising them all):
//   0. fp8_block: the hidden states quantised per token per 128 channels; 4-bit weights on e4m3
//      activations (mxfp8, or e4m3 per tensor: kernels/quantize_acts.cuh), by their rule.
//   1. GEMM1 and the activation: work items (expert, chunk of kTok<W> of its slots: 64, fp4 32;
//      64 intermediate columns), each streaming its 64 gate and 64 up rows of W13 (128 rows of
//      relu2's W13) once for its tokens, gathered straight from the hidden states (or their codes).
//      The activation runs on the accumulators; the intermediate goes to the workspace, one row
//      per slot: bf16; f32 for fp8_block and e4m3 per tensor from the batch's amax; the
//      quantised values (bf16, exact) for mxfp8 and static e4m3 activations.
//   1b. fp8_block: the intermediate quantised per slot per 128 channels; e4m3 per tensor from the
//      batch's amax: the intermediate's codes once every GEMM1 item is done (mxfp8 and static
//      scales quantise it in GEMM1's epilogue).
//   2. GEMM2: work items (expert, chunk of kTok<W> of its slots, 128 rows of H), each streaming
//      its W2 rows once for its slots' intermediate rows; each slot's f32 result goes to the
//      workspace.
//   3. The combine: each output element sums its token's slots in slot order (weight x
//      result), rounded to bf16 once; every row is written (a token without experts gets 0).
//
// Both GEMMs are swap-AB mma.sync (bf16 m16n8k16 or e4m3 m16n8k32, f32 accumulate): weight rows
// fill the M side and tokens the N side, so a decode batch of a few tokens per expert wastes
// nothing of the weight stream (kernels/ring.cuh). A stage holds 128 bytes of K: for fp8_block
// exactly one scale block, so each stage's products go to fresh accumulators that are then added
// to the item's with both block scales (weight block x token block) in f32, as DeepGEMM
// promotes. An item's scales sit in shared memory for its main loop. mxfp4 and nvfp4 (bf16
// activations): a stage is a prepared chunk of 128 K with its block scales
// (moe_cuda/fp4_chunks.hpp), dequantised to bf16 in registers right before the bf16 mma
// (moe_cuda/fp4_decode.hpp), so the stream is half of bf16's.
#pragma once

#include <cooperative_groups.h>

#include <type_traits>

#include "kernels/combine.cuh"
#include "kernels/config.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/gemm2_ready.cuh"
#include "kernels/quantize_acts.cuh"
#include "kernels/quantize_rows.cuh"
#include "kernels/ring.cuh"
#include "kernels/route_batch.cuh"
#include "kernels/routing.cuh"
#include "kernels/schedule.cuh"
#include "kernels/timeline.hpp"

namespace moe::mega::kernels {

// The dynamic shared memory, the scan's storage and the static words beside it (the kernel's
// __shared__ declarations: under 128 bytes; ptxas -v reports them all) fit an SM.
template <int W>
constexpr bool kFitsSharedMemory = kSmemBytes<W> + sizeof(Scan::TempStorage) + 128 <= kSmemLimit;
static_assert(kFitsSharedMemory<kBf16W> && kFitsSharedMemory<kFp8W> && kFitsSharedMemory<kMxfp4W> &&
              kFitsSharedMemory<kNvfp4W> && kFitsSharedMemory<kFp8F16W> &&
              kFitsSharedMemory<kMxfp4x2W> && kFitsSharedMemory<kNvfp4x2W> &&
              kFitsSharedMemory<kMxfp4x4W> && kFitsSharedMemory<kNvfp4x4W> &&
              kFitsSharedMemory<kBf16x2W> && kFitsSharedMemory<kFp8F16x2W> &&
              kFitsSharedMemory<kFp8WgW> && kFitsSharedMemory<kMxfp4WgW> &&
              kFitsSharedMemory<kNvfp4WgW> && kFitsSharedMemory<kFp8Wg2W>);

template <int W>
__global__ void __launch_bounds__(kThreads, 1) fused_moe(const __grid_constant__ Params p) {
  // Launched as a programmatic dependent (MOE_MEGA_LAUNCH=pdl, a measurement), the kernel may
  // start before the previous one on the stream ends: nothing here reads or writes global memory
  // before this wait (a no-op in an ordinary launch).
  gpu::kernels::enter_dependent_grid();
  constexpr bool kFp8 = kIsFp8<W>, kFp4 = kIsFp4<W>;
  // fp8_block's activation codes in the workspace: e4m3 bytes, or their f16 values (kF16Tokens).
  using Code = std::conditional_t<kF16Tokens<W>, uint16_t, uint8_t>;
  Code* const xq = reinterpret_cast<Code*>(p.xq);
  Code* const iq = reinterpret_cast<Code*>(p.iq);
  extern __shared__ uint8_t smem_raw[];
  // Aligned to 1024 by pointer arithmetic on smem_raw itself, so the compiler keeps knowing every
  // pointer below is shared memory (LDS/STS with 32-bit addresses, not generic loads).
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* ring = smem;
  auto* tile = reinterpret_cast<float*>(smem + kRingBytes<W>);  // [kRows][kTileLd<W>]
  uint8_t* sched = smem + kRingBytes<W> + kTileBytes<W>;
  auto* full = reinterpret_cast<uint64_t*>(sched + kScheduleBytes);
  uint64_t* empty = full + kStages<W>;
  __shared__ Scan::TempStorage scan;
  __shared__ int32_t num_active;

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const bool producer = warp == kWarps;
  // The timeline (a measurement: p.timeline null, the default, records nothing): thread 0, a
  // consumer, stamps the phase boundaries and the end of each item it computed. Nothing of it is
  // held in registers across the main loops (its count sits in shared memory).
  __shared__ int timed_items;
  // e4m3 activations on 4-bit weights: the scales of the hidden states, of the routed experts'
  // intermediate and of the shared expert's (each GEMM's epilogue multiplies by its own), and a
  // CTA reduction's scratch.
  __shared__ float act_scale[3];
  __shared__ float red[kThreads / 32];
  auto stamp_phase = [&](int phase) {
    if (p.timeline != nullptr && threadIdx.x == 0)
      timeline_stamp(p.timeline + timeline_phase_word(blockIdx.x, p.timeline_items, phase));
  };
  auto stamp_item = [&](int phase, int u) {
    if (p.timeline == nullptr || threadIdx.x != 0 || timed_items >= p.timeline_items) return;
    unsigned long long* at =
        p.timeline + timeline_item_word(blockIdx.x, p.timeline_items, timed_items++);
    at[0] = (static_cast<unsigned long long>(phase) << 32) | static_cast<unsigned>(u);
    timeline_stamp(at + 1);
  };
  if (threadIdx.x == 0) timed_items = 0;
  stamp_phase(kAtEntry);
  if (threadIdx.x == 0) {
    for (int st = 0; st < kStages<W>; ++st) {
      cutlass::arch::ClusterBarrier::init(&full[st], 1);
      cutlass::arch::ClusterBarrier::init(&empty[st], kWarps);
    }
    cutlass::arch::fence_barrier_init();
  }
  if (producer && lane == 0) {
    cute::prefetch_tma_descriptor(&p.w13_map);
    cute::prefetch_tma_descriptor(&p.w2_map);
  }
  Schedule s;
  s.slot_token = reinterpret_cast<int16_t*>(sched);
  s.slot_pos = reinterpret_cast<int16_t*>(sched + kMaxSlots * 2);
  s.warp_counts = reinterpret_cast<int32_t*>(sched + kMaxSlots * 4);
  s.expert_first = s.warp_counts + kWarps * kMaxExperts;
  s.expert_count = s.expert_first + kMaxExperts;
  s.active = s.expert_count + kMaxExperts;
  s.item_prefix = s.active + kMaxExperts;  // kMaxExperts + 1 entries: the 16 spare bytes
  // Routing in the launch (Params::route): each CTA routes the batch itself into the ring's
  // shared memory (nothing streams into the ring before the schedule exists), so no CTA waits on
  // another; CTA 0 writes the ids and weights out.
  const bool routes = p.route.logits != nullptr;
  const int32_t* ids = p.ids;
  if (routes) {
    route_batch(p.route, p.tokens, p.width, reinterpret_cast<int32_t*>(ring),
                ring + kRouteScratchAt(p.tokens, p.width));
    __syncthreads();
    ids = reinterpret_cast<const int32_t*>(ring);
  }
  build_schedule<W>(p, ids, s, scan);  // its __syncthreads also publish the barriers
  if (threadIdx.x == 0) num_active = s.num_active;
  // The ring's bytes held the routing (generic stores and loads); the copies into it from here on
  // are the async proxy's.
  if (routes) cutlass::arch::fence_view_async_shared();
  __syncthreads();
  s.num_active = num_active;
  stamp_phase(kScheduled);

  const int g = lane / 4, q = lane % 4;  // accumulator row g (+8), columns 2q (+1)
  const int64_t H = p.hidden_dim, I = p.inter_dim;
  const bool gated = p.activation != gpu::kernels::kRelu2;
  // w13's rows per expert, read once: lambdas below take it by value (see rows1).
  const int n1 = p.n1;
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  // After a grid barrier, what ordinary stores wrote may be read by any copy (the token rows go by
  // cp.async, the generic proxy; the fence keeps a bulk copy of them correct too).
  auto publish_to_async_proxy = [&] {
    grid.sync();
    if (producer) asm volatile("fence.proxy.async.global;" ::: "memory");
  };
  int stage = 0;  // the ring's position, the same in producer and consumers throughout
  uint32_t phase = 0;
  auto advance = [&] {
    if (++stage == kStages<W>) stage = 0, phase ^= 1;
  };

  float acc[kTok<W> / 8][4];
  auto zero = [](float(&a)[kTok<W> / 8][4]) {
#pragma unroll
    for (int nt = 0; nt < kTok<W> / 8; ++nt) a[nt][0] = a[nt][1] = a[nt][2] = a[nt][3] = 0;
  };
  auto fp4_mul = [&](const float* scale_2, int expert) {
    float mul = float(1 << gpu::kFp4Unfold);
    if constexpr (kIsNv<W>) mul *= scale_2[expert];
    return mul;
  };
  // Consumers: the accumulators to the tile ([weight row][token]), for all consumers to read.
  // fp4: the accumulators times `mul` first (2^kFp4Unfold back, nvfp4's scale_2).
  auto acc_to_tile = [&](float mul) {
    if constexpr (kFp8) consumers_sync();  // every warp is done with the scales in the tile
    if constexpr (kFp4) {
#pragma unroll
      for (int nt = 0; nt < kTok<W> / 8; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nt][i] *= mul;
    }
#pragma unroll
    for (int nt = 0; nt < kTok<W> / 8; ++nt) {
      const int r = warp * 16 + g, n = nt * 8 + 2 * q;
      tile[r * kTileLd<W> + n] = acc[nt][0];
      tile[r * kTileLd<W> + n + 1] = acc[nt][1];
      tile[(r + 8) * kTileLd<W> + n] = acc[nt][2];
      tile[(r + 8) * kTileLd<W> + n + 1] = acc[nt][3];
    }
    consumers_sync();
  };
  // fp8_block: an item's scales in the tile's space: the token scales [kb][kTok<W>] (columns past m
  // are never read into a result) and the two weight row blocks' [2][k_blocks] (warps 0-3 read
  // the first, 4-7 the second). Loads go out kBatch at a time per thread, consecutive threads on
  // consecutive K blocks of one row (coalesced; the first stage's DRAM latency hides them). Token
  // scales come from L2 (__ldcg): other CTAs wrote them in this run (or, with own_rows, this one).
  float* token_scales = tile;
  float* weight_scales = tile + kMaxKBlocks * kTok<W>;
  auto load_scales = [&](int m, int k_blocks, auto token_scale, const float* w0, const float* w1) {
    constexpr int kBatch = 4;
    const int count = m * k_blocks;
    for (int base = threadIdx.x; base < count; base += kBatch * kConsumers) {
      float v[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int idx = base + j * kConsumers;
        v[j] = idx < count ? token_scale(idx / k_blocks, idx % k_blocks) : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int idx = base + j * kConsumers;
        if (idx < count) token_scales[(idx % k_blocks) * kTok<W> + idx / k_blocks] = v[j];
      }
    }
    for (int idx = threadIdx.x; idx < 2 * k_blocks; idx += kConsumers)
      weight_scales[idx] = idx < k_blocks ? w0[idx] : w1[idx - k_blocks];
    consumers_sync();
  };
  // Consumers: wait for stage ks of the item, multiply, release it (fp8_block: promote each of
  // the stage's chunks' products, one 128-deep scale block each, with the weight block's and each
  // token's scale; k_blocks: the item's scale blocks along K, kChunksPerStage a stage).
  auto consume = [&](int m, int ks, int k_blocks) {
    cutlass::arch::ClusterBarrier::wait(&full[stage], phase);
    // wgmma reads the token rows through the async proxy, where cp.async wrote them through the
    // generic one (TMA's weights are the async proxy's already): the fence orders the two.
    if constexpr (kWgmmaTokens<W>) cutlass::arch::fence_view_async_shared();
    if constexpr (kFp8) {
      // NT n-tiles hold the item's m slots: the two-tile instance fixes it per stage
      // (with_each_n_tile_count: 1 to 4), the wgmma one too (1, 2 or 4: wgmma's N); the 64-slot
      // ones keep every tile with a branch per n-tile or pair (fixed, ptxas spilled).
      auto fp8_stage = [&](auto tiles) {
        constexpr int NT = decltype(tiles)::value;
#pragma unroll
        for (int c = 0; c < kChunksPerStage<W>; ++c) {
          float part[NT][4] = {};
          const uint8_t* w = weight_tile<W>(ring, stage) + c * kRows * kRowBytes;
          // Tile c's token bytes: the next 128 of each row, or wgmma's next 128-byte atom.
          const uint8_t* x = token_tile<W>(ring, stage) +
                             (kWgmmaTokens<W> ? wgmma_token_step(kTok<W>, 4 * c)
                                              : c * (kTokRowBytes<W> / kChunksPerStage<W>));
          if constexpr (kWgmmaTokens<W>)
            mma_stage_wgmma<W, NT>(w, x, part);
          else if constexpr (kF16Tokens<W>)
            mma_stage_f16_tokens<W, NT, W != kFp8F16x2W>(w, x, m, part);
          else
            mma_stage_pairs<W>(w, x, m, part);
          if (c == kChunksPerStage<W> - 1) {
            __syncwarp();
            if (lane == 0) cutlass::arch::ClusterBarrier::arrive(&empty[stage]);
          }
          const int kb = ks * kChunksPerStage<W> + c;
          const float ws = weight_scales[(warp / 4) * k_blocks + kb];
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            if (nt * 8 >= m) break;
            const float t0 = ws * token_scales[kb * kTok<W> + nt * 8 + 2 * q];
            const float t1 = ws * token_scales[kb * kTok<W> + nt * 8 + 2 * q + 1];
            acc[nt][0] = fmaf(part[nt][0], t0, acc[nt][0]);
            acc[nt][1] = fmaf(part[nt][1], t1, acc[nt][1]);
            acc[nt][2] = fmaf(part[nt][2], t0, acc[nt][2]);
            acc[nt][3] = fmaf(part[nt][3], t1, acc[nt][3]);
          }
        }
      };
      if constexpr (W == kFp8F16x2W)
        with_each_n_tile_count(m, fp8_stage);
      else if constexpr (kWgmmaTokens<W>)
        with_n_tiles<kTok<W> / 8>(m, fp8_stage);  // N = 8, 16 or 32
      else
        fp8_stage(std::integral_constant<int, kTok<W> / 8>{});
    } else {
      with_n_tiles<kTok<W> / 8>(m, [&](auto nt) {
        if constexpr (kFp4 && kWgmmaTokens<W>)
          mma_stage_fp4_wgmma<W, decltype(nt)::value>(weight_tile<W>(ring, stage),
                                                      token_tile<W>(ring, stage), acc);
        else if constexpr (kFp4)
          mma_stage_fp4<W, decltype(nt)::value>(weight_tile<W>(ring, stage),
                                                token_tile<W>(ring, stage), acc);
        else
          mma_stage<W, decltype(nt)::value>(weight_tile<W>(ring, stage), token_tile<W>(ring, stage),
                                            acc);
      });
      __syncwarp();
      if (lane == 0) cutlass::arch::ClusterBarrier::arrive(&empty[stage]);
    }
    advance();
  };

  // Item u of a phase with `slices` column slices: active expert, kTok<W>-slot chunk, slice.
  struct Item {
    int expert, first, m, slice;
  };
  auto item_of = [&](int u, int slices) {
    const int chunk_global = u / slices, slice = u % slices;
    int lo = 0, hi = s.num_active;  // last a with item_prefix[a] <= chunk_global
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (s.item_prefix[mid] <= chunk_global)
        lo = mid;
      else
        hi = mid;
    }
    const int e = s.active[lo], chunk = chunk_global - s.item_prefix[lo];
    const int first = s.expert_first[e] + chunk * kTok<W>;
    return Item{e, first, min(kTok<W>, s.expert_count[e] - chunk * kTok<W>), slice};
  };
  // The phases' items: weight rows of W13 (gate rows slice*64.. and up rows I + slice*64..;
  // relu2: rows slice*128.., two boxes) and of W2 (rows slice*128.. of the expert's H).
  const int cols1 = gated ? kRows / 2 : kRows;  // intermediate columns per GEMM1 item
  const int slices1 = int(I / cols1), steps1 = int(H / kStageK<W>);
  const int slices2 = int(H / kRows), steps2 = int(I / kStageK<W>);
  // fp8_block: scale blocks along each GEMM's K (kChunksPerStage<W> a stage).
  [[maybe_unused]] const int k_blocks1 = int(H / kScaleBlock), k_blocks2 = int(I / kScaleBlock);
  // By value, not [&]: weights_of's producers hold a copy of this closure, and a reference to the
  // kernel's parameters inside it made the compiler, under the tail split's GEMM1 loop (session
  // 51, since removed), read p.n1 through a generic pointer lowered to an out-of-bounds local load
  // (an illegal address, H100 session 52; tests/sass checks every plugin for such loads).
  auto rows1 = [n1, gated, I](const Item& it, int& row0, int& row1) {
    const int base = it.expert * n1;
    row0 = gated ? base + it.slice * 64 : base + it.slice * kRows;
    row1 = gated ? base + int(I) + it.slice * 64 : row0 + kBoxRows;
  };
  auto rows2 = [H](const Item& it, int& row0, int& row1) {  // by value, as rows1
    row0 = it.expert * int(H) + it.slice * kRows;
    row1 = row0 + kBoxRows;
  };
  // Producer: the weights of stage ks of item `it` into ring stage st (phase ph): a prepared
  // chunk (fp4 always; bf16 and e4m3 where the layer prepared them: kernels/chunk_layout.hpp), or
  // two TMA boxes of the phase's map (tile = the item's slice).
  auto weights_of = [&](const CUtensorMap* map, const uint8_t* chunks, int slices, int steps,
                        auto rows) {
    return [=, &ring, &full, &empty](const Item& it, int ks, int st, uint32_t ph) {
      if (kChunksOnly<W> || chunks != nullptr) {
        const int64_t c = (int64_t(it.expert) * slices + it.slice) * steps + ks;
        produce_chunk<W>(chunks + c * kChunkBytesOf<W>, ring, full, empty, st, ph);
      } else if constexpr (!kChunksOnly<W>) {
        int row0 = 0, row1 = 0;
        rows(it, row0, row1);
        produce_weights<W>(map, row0, row1, ks, ring, full, empty, st, ph);
      }
    };
  };
  const auto weights1 = weights_of(&p.w13_map, p.w13_chunks, slices1, steps1, rows1);
  const auto weights2 = weights_of(&p.w2_map, p.w2_chunks, slices2, steps2, rows2);
  // Producer, before a grid barrier: the weights of the first stages of this CTA's first item of
  // the next phase (items of `split` K parts), as many as the ring holds, which do not depend on
  // what the barrier publishes, so their DRAM latency overlaps the barrier. Returns how many
  // stages it filled (the ring's position does not move: the phase's loop adds the tokens).
  // Producer: the weights of stages [ks0, ks1) of item `it` into the ring's next stages, as many
  // as it holds, without moving the ring's position; returns how many.
  auto prefetch_stages = [&](auto weights, const Item& it, int ks0, int ks1) {
    const int count = min(ks1 - ks0, kStages<W>);
    int st = stage;
    uint32_t ph = phase;
    for (int i = 0; i < count; ++i) {
      weights(it, ks0 + i, st, ph);
      if (++st == kStages<W>) st = 0, ph ^= 1;
    }
    return count;
  };
  auto prefetch = [&](auto weights, int slices, int steps, int split) {
    const int u = int(blockIdx.x);
    if (u >= s.item_prefix[s.num_active] * slices * split) return 0;
    const Item it = item_of(u / split, slices);
    const int part = u % split;
    return prefetch_stages(weights, it, part * steps / split, (part + 1) * steps / split);
  };
  // Producer: stages [ks0, ks1) of item `it` of a phase, in order; the first `ready` already
  // hold their weights. Its token rows: row n at base + stride x row_of(n) bytes.
  auto produce_item = [&](auto weights, const Item& it, int ks0, int ks1, const void* base,
                          int64_t stride, auto row_of, int ready) {
    for (int i = 0; i < ks1 - ks0; ++i) {
      const int ks = ks0 + i;
      if (i >= ready) weights(it, ks, stage, phase);
      produce_tokens<W>(ks, static_cast<const uint8_t*>(base), uint32_t(stride), row_of, it.m, ring,
                        full, stage);
      advance();
    }
  };

  int ready1 = 0, ready2 = 0;  // stages prefetched for the CTA's first item of phase 1, 2
  // 4-bit weights: how the activations are quantised (kernels/config.cuh ActQuant).
  const int aq = kFp4 ? p.act_quant : int(kActBf16);
  // fp8_block: the hidden states' codes and scales GEMM1 reads: the grid's, or this CTA's own
  // copy (own_rows).
  const int64_t own = p.own_rows ? int64_t(blockIdx.x) * p.tokens * H : 0;
  Code* const xq_rows = xq + own;
  float* const xs_rows = p.xs + own / kScaleBlock;
  if constexpr (kFp8) {  // phase 0: the hidden states' codes and scales
    if (producer && !(p.prefetch_late & kLatePhase0))
      ready1 = prefetch(weights1, slices1, steps1, 1);
    if (p.own_rows) {  // every token by this CTA alone: no grid barrier
      quantize_rows_1x128(p.hidden, p.tokens, H, xq_rows, xs_rows, threadIdx.x / 32, kThreads / 32);
      if (producer && (p.prefetch_late & kLatePhase0))
        ready1 = prefetch(weights1, slices1, steps1, 1);
      __syncthreads();
      if (producer) asm volatile("fence.proxy.async.global;" ::: "memory");
    } else {
      quantize_rows_1x128(p.hidden, p.tokens, H, xq, p.xs);
      if (producer && (p.prefetch_late & kLatePhase0))
        ready1 = prefetch(weights1, slices1, steps1, 1);
      publish_to_async_proxy();
    }
  }
  if (aq != kActBf16) {  // phase 0 of e4m3 activations on 4-bit weights: the hidden states
    if (producer) ready1 = prefetch(weights1, slices1, steps1, 1);
    float scale = p.a13_scale;
    if (aq == kActFp8Dynamic) {  // the batch's amax: each CTA's share, then all of them
      const float m = cta_max(bf16_amax_share(p.hidden, int64_t(p.tokens) * H), red);
      if (threadIdx.x == 0) p.amax[blockIdx.x] = m;
      grid.sync();
      scale = gpu::kernels::fp8_scale_from_amax(grid_max(p.amax, red));
    }
    if (threadIdx.x == 0) act_scale[0] = scale;
    quantize_hidden(p, aq, scale);
    publish_to_async_proxy();
  }
  // GEMM1's and GEMM2's epilogue factor for e4m3 per tensor: the scale of the activations they
  // multiplied (GEMM2: the routed experts' or the shared expert's intermediate).
  auto act_mul1 = [&] { return aq == kActFp8Static || aq == kActFp8Dynamic ? act_scale[0] : 1.0f; };
  auto act_mul2 = [&](int expert) {
    return aq == kActFp8Static    ? p.a2_scale
           : aq == kActFp8Dynamic ? act_scale[expert < p.routed ? 1 : 2]
                                  : 1.0f;
  };
  // kActFp8Dynamic: each thread's amax of the intermediate it computed, the routed experts' and
  // the shared expert's.
  float amax_routed = 0.0f, amax_shared = 0.0f;
  // One value of the intermediate, at element `at`, from `y` computed by a GEMM1 item of
  // `expert`: bf16, or quantised as aq says (mxfp8: every lane of the warp calls it for the 32
  // columns of one block; per tensor, static: the code's value; dynamic: f32, quantised once the
  // batch's amax is known).
  auto store_intermediate = [&](int64_t at, float y, int expert) {
    if constexpr (kFp8) {
      p.inter32[at] = y;
    } else if (aq == kActBf16) {
      p.inter[at] = float_to_bf16_bits(y);
    } else if (aq == kActMxfp8) {
      const int k = mx_scale_exponent(gpu::kernels::group_max<kMxBlock>(fabsf(y)));
      p.inter[at] = mx_quantised_bf16(y, k);
    } else if (aq == kActFp8Static) {
      const float inv = gpu::kernels::e4m3_inverse(p.a2_scale);
      p.inter[at] = e4m3_value_bf16(gpu::kernels::to_e4m3(y, p.a2_scale, inv));
    } else {
      p.inter32[at] = y;
      if (expert < p.routed)
        amax_routed = fmaxf(amax_routed, fabsf(y));
      else
        amax_shared = fmaxf(amax_shared, fabsf(y));
    }
  };

  // MOE_MEGA_GEMM2=early (Params::gemm2_ready): GEMM2's items wait on their chunk's GEMM1 flags,
  // not on a grid barrier. The flags hold this run's tag once written (kernels/gemm2_ready.cuh):
  // nothing to zero, so no barrier before GEMM1 either.
  const bool early2 = !kFp8 && aq == kActBf16 && p.gemm2_ready != nullptr;
  const int items1 = s.item_prefix[s.num_active] * slices1;
  const unsigned long long tag = early2 ? launch_tag(p.run_salt) : 0;

  // ---- phase 1: GEMM1 and the activation ----
  stamp_phase(kGemm1Start);
  {
    const int cols = cols1, slices = slices1, steps = steps1;
    const int items = items1;
    for (int u = int(blockIdx.x); u < items; u += int(gridDim.x)) {
      const Item it = item_of(u, slices);
      int row0 = 0, row1 = 0;
      rows1(it, row0, row1);
      if (producer) {
        // The slots' tokens: rows of the hidden states (fp8_block: of their codes).
        auto token_of = [&](int n) { return uint16_t(s.slot_token[it.first + n]); };
        const int ready = u == int(blockIdx.x) ? ready1 : 0;
        if constexpr (kFp8)
          produce_item(weights1, it, 0, steps, xq_rows, H * int64_t(sizeof(Code)), token_of, ready);
        else  // the hidden states, or their quantised values
          produce_item(weights1, it, 0, steps, aq != kActBf16 ? p.xa : p.hidden, H * 2, token_of,
                       ready);
        continue;
      }
      if constexpr (kFp8) {
        // w13's rows are [E * n1] with n1 % 128 == 0, so row r's scale row is r / 128.
        const float* s0 = p.s13 + (int64_t(row0) / kScaleBlock) * k_blocks1;
        const float* s1 = p.s13 + (int64_t(row1) / kScaleBlock) * k_blocks1;
        load_scales(
            it.m, k_blocks1,
            [&](int n, int kb) {
              return __ldcg(xs_rows + int64_t(s.slot_token[it.first + n]) * k_blocks1 + kb);
            },
            s0, s1);
      }
      zero(acc);
      for (int ks = 0; ks < steps; ++ks) consume(it.m, ks, k_blocks1);
      // Rows to the tile, then the activation per (column, token) into the intermediate.
      acc_to_tile(fp4_mul(p.g13, it.expert) * act_mul1());
      // The expert's bias rows (b13 [E, n1]): gate or relu2 row slice * cols + c, up row I + that.
      const float* bias = p.b13 != nullptr ? p.b13 + int64_t(it.expert) * n1 : nullptr;
      for (int idx = threadIdx.x; idx < cols * it.m; idx += kConsumers) {
        const int c = idx % cols, n = idx / cols;
        float gv = tile[c * kTileLd<W> + n];
        float uv = gated ? tile[(c + 64) * kTileLd<W> + n] : 0.0f;
        if (bias != nullptr) {
          gv += bias[it.slice * cols + c];
          if (gated) uv += bias[I + it.slice * cols + c];
        }
        const float y = gpu::kernels::activate(p.act, p.activation, gv, uv);
        store_intermediate(int64_t(it.first + n) * I + int64_t(it.slice) * cols + c, y, it.expert);
      }
      consumers_sync();  // the tile is free for the next item, and the item's rows are written
      if (early2 && threadIdx.x == 0) flag_release(p.gemm2_ready + u, tag);
      stamp_item(1, u);
    }
  }
  stamp_phase(kGemm1Done);
  // GEMM2's items split along K by the waves model (kernels/split.hpp): where too few fill the SMs
  // (Mixtral at T = 1 has 64), where one wave leaves many idle and no two-part split fits (T = 2:
  // 96), and where the last of several waves would (MOE_MEGA_SPLIT2=waves: only past one wave,
  // =fit: k_split alone); each part's results go to their own copy of y, summed in part order by
  // the combine.
  const int items2 = s.item_prefix[s.num_active] * slices2;
  const int split2 = p.split2_waves ? k_split_waves(items2, steps2, int(gridDim.x), p.max_split2,
                                                    kSplitMinSteps, p.split2_waves == 2)
                                    : k_split(items2, steps2, int(gridDim.x), p.max_split2);
  const bool late2 = kFp8 && (p.prefetch_late & kLatePhase1b);
  if (producer && !late2 && !early2) ready2 = prefetch(weights2, slices2, steps2, split2);
  if constexpr (kFp8) {  // phase 1b: the intermediate's codes and scales, every slot
    grid.sync();
    int slots = 0;
    if (s.num_active > 0) {
      const int last = s.active[s.num_active - 1];
      slots = s.expert_first[last] + s.expert_count[last];
    }
    quantize_rows_1x128(p.inter32, slots, I, iq, p.is);
    if (producer && late2) ready2 = prefetch(weights2, slices2, steps2, split2);
  }
  if (aq == kActFp8Dynamic) {  // the intermediate's scales from the batch's amax, then its codes
    const float routed = cta_max(amax_routed, red), shared = cta_max(amax_shared, red);
    if (threadIdx.x == 0) {
      p.amax[gridDim.x + blockIdx.x] = routed;
      p.amax[2 * gridDim.x + blockIdx.x] = shared;
    }
    grid.sync();
    const float s_routed = gpu::kernels::fp8_scale_from_amax(grid_max(p.amax + gridDim.x, red));
    const float s_shared = gpu::kernels::fp8_scale_from_amax(grid_max(p.amax + 2 * gridDim.x, red));
    if (threadIdx.x == 0) act_scale[1] = s_routed, act_scale[2] = s_shared;
    int slots = 0;
    if (s.num_active > 0) {
      const int last = s.active[s.num_active - 1];
      slots = s.expert_first[last] + s.expert_count[last];
    }
    // The shared expert's virtual experts come after the routed ones, and so do their slots.
    const int shared_first = p.routed < p.experts ? s.expert_first[p.routed] : slots;
    quantize_intermediate(p, slots, shared_first, s_routed, s_shared);
  }
  if (!early2) publish_to_async_proxy();

  // ---- phase 2: GEMM2, a row of f32 results per slot and K part ----
  stamp_phase(kGemm2Start);
  {
    const int slices = slices2, steps = steps2, split = split2;
    const int items = s.item_prefix[s.num_active] * slices * split;
    const int64_t part_stride = int64_t(p.tokens) * p.slot_width * H;
    // early2: item v on the CTA GEMM1's round robin would have given item items1 + v.
    const int ctas = int(gridDim.x);
    const int u0 = early2 ? (int(blockIdx.x) + ctas - items1 % ctas) % ctas : int(blockIdx.x);
    for (int u = u0; u < items; u += ctas) {
      const Item it = item_of(u / split, slices);
      const int part = u % split, ks0 = part * steps / split, ks1 = (part + 1) * steps / split;
      int row0 = 0, row1 = 0;
      rows2(it, row0, row1);
      if (producer) {
        // The slots' intermediate rows (fp8_block: their codes), consecutive from the first.
        auto slot_of = [&](int n) { return it.first + n; };
        int ready = u == u0 ? ready2 : 0;
        if (early2) {  // the weights need nothing: the first stages' go out before the wait
          // The chunk's GEMM1 items: its slices1 flags (GEMM1 item = chunk x slices1 + slice).
          const unsigned long long* flags = p.gemm2_ready + int64_t((u / split) / slices) * slices1;
          if (!flags_hold(flags, slices1, tag))  // one answer for the warp
            ready = prefetch_stages(weights2, it, ks0, ks1);
          wait_flags(flags, slices1, tag);
          flags_acquired();
        }
        if constexpr (kFp8)
          produce_item(weights2, it, ks0, ks1, iq, I * int64_t(sizeof(Code)), slot_of, ready);
        else
          produce_item(weights2, it, ks0, ks1, p.inter, I * 2, slot_of, ready);
        continue;
      }
      if constexpr (kFp8) {
        const float* s0 = p.s2 + (int64_t(row0) / kScaleBlock) * k_blocks2;
        load_scales(
            it.m, k_blocks2,
            [&](int n, int kb) { return __ldcg(p.is + int64_t(it.first + n) * k_blocks2 + kb); },
            s0, s0);
      }
      zero(acc);
      for (int ks = ks0; ks < ks1; ++ks) consume(it.m, ks, k_blocks2);
      // Through the tile so that each slot's 128 results go out as contiguous rows.
      acc_to_tile(fp4_mul(p.g2, it.expert) * act_mul2(it.expert));
      float* y = p.y + part * part_stride;
      // b2 [E, H] once per slot: in the first K part only.
      const float* bias =
          p.b2 != nullptr && part == 0 ? p.b2 + int64_t(it.expert) * H + it.slice * kRows : nullptr;
      for (int idx = threadIdx.x; idx < kRows * it.m; idx += kConsumers) {
        const int r = idx % kRows, n = idx / kRows;
        const float v = tile[r * kTileLd<W> + n];
        y[int64_t(it.first + n) * H + int64_t(it.slice) * kRows + r] =
            bias != nullptr ? v + bias[r] : v;
      }
      consumers_sync();  // the tile is free for the next item
      stamp_item(2, u);
    }
  }
  stamp_phase(kGemm2Done);

  // ---- phase 3: the combine of every output vector, after a last barrier ----
  grid.sync();
  stamp_phase(kCombineStart);
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < int64_t(p.tokens) * H / 4;
       i += int64_t(gridDim.x) * kThreads)
    combine_output_vector(p, s.slot_pos, split2, i);
  stamp_phase(kAtExit);
  if (p.timeline != nullptr && threadIdx.x == 0)
    p.timeline[timeline_count_word(blockIdx.x, p.timeline_items)] =
        (static_cast<unsigned long long>(split2) << 32) | static_cast<unsigned>(timed_items);
}

}  // namespace moe::mega::kernels
