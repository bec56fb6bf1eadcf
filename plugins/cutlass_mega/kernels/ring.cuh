// cutlass_mega's shared-memory ring (docs/design.md §13): a producer warp fills stages (a weight
// tile by TMA or a prepared fp4 chunk by one bulk copy, token rows by cp.async, all completing
// on the stage's mbarrier) and eight consumer warps multiply them with mma.sync (the wgmma
// instances, fp8_block's and 4-bit's: two warpgroups, wgmma with B from shared memory) and release
// them.
#pragma once

#include <cutlass/arch/barrier.h>
#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>

#include <type_traits>
#include <utility>

#include "kernels/config.cuh"
#include "kernels/fp4_fragments.cuh"
#include "kernels/fragments.hpp"
#include "kernels/gmma_desc.cuh"

namespace moe::mega::kernels {

// Stage s: the weight tile (bf16, e4m3: [kRows][kRowBytes], two 64-row TMA boxes, 128-byte
// swizzle: the 16-byte chunk c of row r sits at chunk c ^ (r % 8); fp4: a prepared chunk), then
// the token rows [kTok<W>][kTokLd<W>].
template <int W>
__device__ __forceinline__ uint8_t* weight_tile(uint8_t* ring, int s) {
  return ring + size_t(s) * kStageBytes<W>;
}
template <int W>
__device__ __forceinline__ uint8_t* token_tile(uint8_t* ring, int s) {
  return ring + size_t(s) * kStageBytes<W> + kWeightBytes<W>;
}

// Producer, a stage in two halves. The weights: once the consumers released stage `stage`, weight
// rows [row0, row0 + 64) and [row1, row1 + 64) of `map` at K step `ks` (kStageK elements), or a
// prepared chunk at `chunk` (fp4's; bf16 or e4m3 ones: kernels/chunk_layout.hpp), their bytes
// expected on the stage's barrier without arriving. The
// tokens: bytes [ks, ks + 1) x kTokRowBytes of the item's token rows n < m, and the
// arrival. The stage completes only after both, so the weights may go out early (before a grid
// barrier, while the rows they meet are still being written) and the tokens later.
template <int W>
__device__ __forceinline__ void produce_weights(const CUtensorMap* map, int row0, int row1, int ks,
                                                uint8_t* ring, uint64_t* full, uint64_t* empty,
                                                int stage, uint32_t phase) {
  cutlass::arch::ClusterBarrier::wait(&empty[stage], phase ^ 1);
  if (threadIdx.x % 32 == 0) {
    cutlass::arch::ClusterTransactionBarrier::expect_transaction(&full[stage],
                                                                 uint32_t(kWeightBytes<W>));
    constexpr uint64_t hint = uint64_t(cute::TMA::CacheHintSm90::EVICT_FIRST);  // read once
    // A tile of kRows x kRowBytes per chunk of the stage (two boxes each), the K of one after the
    // other's: the smem image a stage of prepared chunks would bring.
    constexpr int kChunkTile = kRows * kRowBytes, kChunkK = kStageK<W> / kChunksPerStage<W>;
#pragma unroll
    for (int c = 0; c < kChunksPerStage<W>; ++c) {
      uint8_t* w = weight_tile<W>(ring, stage) + c * kChunkTile;
      const int k0 = ks * kStageK<W> + c * kChunkK;
      cute::SM90_TMA_LOAD_2D::copy(map, &full[stage], hint, w, k0, row0);
      cute::SM90_TMA_LOAD_2D::copy(map, &full[stage], hint, w + kChunkTile / 2, k0, row1);
    }
  }
  __syncwarp();
}

template <int W>
__device__ __forceinline__ void produce_chunk(const uint8_t* chunk, uint8_t* ring, uint64_t* full,
                                              uint64_t* empty, int stage, uint32_t phase) {
  cutlass::arch::ClusterBarrier::wait(&empty[stage], phase ^ 1);
  if (threadIdx.x % 32 == 0) {
    cutlass::arch::ClusterTransactionBarrier::expect_transaction(&full[stage],
                                                                 uint32_t(kChunkBytesOf<W>));
    cute::SM90_BULK_COPY_G2S::copy(chunk, &full[stage], weight_tile<W>(ring, stage),
                                   kChunkBytesOf<W>);
  }
  __syncwarp();
}

// The token rows go by cp.async, 16 bytes per lane and instruction, not by a bulk copy per row:
// bulk copies take uniform registers, so a warp issues them one lane at a time, and at 16-64 rows
// per stage that serial issue kept the producer from refilling the ring (ncu, Mixtral bf16 T=64:
// consumers waiting on full stages, DRAM at 48%; bench/NOTES.md). Each lane's copies arrive on
// the stage's barrier when they land (cp.async.mbarrier.arrive without .noinc: the barrier's
// pending count rises now and falls then, so the count it was initialised with is unchanged);
// lane 0 then makes the stage's one counted arrival. Row n of the item sits at base + stride x
// row_of(n) bytes; a lane copies the same 16 bytes of every (32 / chunks)-th row, one 32 x 32-bit
// multiply-add a row for its source (the per-chunk division and 64-bit index arithmetic before
// cost ~18 instructions a copy, on the scheduler the producer shares with two consumer warps).
template <int W, class RowOf>
__device__ __forceinline__ void produce_tokens(int ks, const uint8_t* base, uint32_t stride,
                                               RowOf row_of, int m, uint8_t* ring, uint64_t* full,
                                               int stage) {
  // A row of 16-byte pieces: 32 / kChunks rows a pass of the warp, or, for rows wider than its
  // 512 bytes (four 4-bit chunks a stage), kPieces pieces a lane, 512 bytes apart. (One loop over
  // the rows with the pieces inside: a loop of passes around it cost the fp8 instances a spill.)
  constexpr int kChunks = kTokRowBytes<W> / 16, kPieces = kChunks > 32 ? kChunks / 32 : 1;
  constexpr int kLaneChunks = kChunks / kPieces, kRowStep = 32 / kLaneChunks;
  static_assert(32 % kLaneChunks == 0 && kChunks % kPieces == 0, "a warp covers whole rows");
  const int lane = threadIdx.x % 32, j = lane % kLaneChunks;
  const uint8_t* src0 = base + size_t(ks) * kTokRowBytes<W> + 16 * j;
  const uint32_t tile = smem_u32(token_tile<W>(ring, stage));
  uint32_t dst = tile + 16 * j + (lane / kLaneChunks) * kTokLd<W>;
  for (int n = lane / kLaneChunks; n < m; n += kRowStep, dst += kRowStep * kTokLd<W>) {
    const uint8_t* src = src0 + uint64_t(uint32_t(row_of(n))) * stride;
    if constexpr (kWgmmaTokens<W>) {
      // wgmma's B: 128-byte K atoms of kTok rows x 128 bytes one after the other (e4m3: one a
      // tile; bf16: two a 4-bit chunk), row n of an atom at n x 128 bytes, its 16-byte chunk c at
      // chunk c ^ (n % 8).
      static_assert(kPieces == 1 && kTokLd<W> == kTokRowBytes<W>, "whole unpadded rows");
      const uint32_t at = tile + wgmma_token_piece(kTok<W>, n, j);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(at), "l"(src) : "memory");
    } else {
#pragma unroll
      for (int piece = 0; piece < kPieces; ++piece)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst + 512 * piece),
                     "l"(src + 512 * piece)
                     : "memory");
    }
  }
  const uint32_t bar = uint32_t(__cvta_generic_to_shared(&full[stage]));
  asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
  __syncwarp();
  if (lane == 0) cutlass::arch::ClusterBarrier::arrive(&full[stage]);
}

// Consumers: acc[nt] += A (this warp's 16 weight rows) x the tokens of n-tiles nt < NT over a
// stage's K steps of 32 bytes (a bf16 k16 or e4m3 k32 mma each: both take their fragments in the
// same byte layout), for an item of at most 8 NT slots (columns past its m hold stale rows; their
// results are never read). a_of(j, a) gives K step j's A fragments. NT is the item's, fixed over
// its main loop, so the stage has no branch on m and each token fragment is loaded kAhead steps
// before its mma (all of them up front up to 32 slots): a branch per 16-slot pair
// kept every K step waiting on its own shared-memory load (the SASS: LDSM, then its two HMMAs, once
// a step and pair). The loads' addresses and registers: kernels/fragments.hpp. With one or two
// n-tiles, odd steps accumulate in a second chain (summed at the end), so no mma waits on the one
// before it.
// kSteps: K steps of 32 bytes of token row from x: a stage's (4 in a 128-byte row), or one of its
// 4-bit chunks' (8: 256 bytes).
template <int W, int NT, int kSteps = kTokRowBytes<W> / 32, class AOf>
__device__ __forceinline__ void mma_token_tiles(const uint8_t* x, float (&acc)[kTok<W> / 8][4],
                                                AOf a_of) {
  static_assert(NT == 1 || (NT % 2 == 0 && NT <= kTok<W> / 8), "one n-tile or whole pairs");
  constexpr int kLoads = token_loads(NT, kSteps), kPairs = token_load_pairs(NT);
  constexpr int kAhead = NT <= 4 ? kLoads : 2;
  constexpr bool kTwoChains = NT <= 2;
  const int lane = threadIdx.x % 32;
  uint32_t b[kLoads][kPairs][4];
  auto load = [&](int i) {
#pragma unroll
    for (int pp = 0; pp < kPairs; ++pp) {
      const TokenAddress at = token_load_address(NT, i, pp, lane);
      ldmatrix_x4(b[i][pp], x + at.row * kTokLd<W> + at.byte);
    }
  };
#pragma unroll
  for (int i = 0; i < kAhead; ++i) load(i);
  float odd[NT][4] = {};
#pragma unroll
  for (int j = 0; j < kSteps; ++j) {
    if (NT != 1 && j + kAhead < kLoads) load(j + kAhead);
    uint32_t a[4];
    a_of(j, a);
    auto product = [&](int nt, uint32_t b0, uint32_t b1) {
      if (kTwoChains && j % 2 == 1)
        mma<W == kFp8W>(odd[nt], a, b0, b1);
      else
        mma<W == kFp8W>(acc[nt], a, b0, b1);
    };
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const TokenRegs r = token_regs(NT, j, t);
      product(t, b[r.load][r.pair][r.reg], b[r.load][r.pair][r.reg + 1]);
    }
  }
  if constexpr (kTwoChains) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[nt][k] += odd[nt][k];
  }
}

// bf16: A from the stage's weight tile (128 rows x 128 bytes, 128-byte swizzle), one ldmatrix x4
// a K step (kernels/fragments.hpp). Two chunks a stage (kBf16x2W): each such tile against its 128
// bytes of the token rows, one after the other: the same products in the same order as two
// one-chunk stages.
template <int W, int NT>
__device__ __forceinline__ void mma_stage(const uint8_t* w, const uint8_t* x,
                                          float (&acc)[kTok<W> / 8][4]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  constexpr int kChunkSteps = kRowBytes / 32;
#pragma unroll
  for (int c = 0; c < kChunksPerStage<W>; ++c) {
    const uint8_t* tile = w + c * kRows * kRowBytes;
    mma_token_tiles<W, NT, kChunkSteps>(x + c * kRowBytes, acc, [&](int j, uint32_t(&a)[4]) {
      ldmatrix_x4(a, tile + weight_load_offset(warp, lane, j, kRowBytes));
    });
  }
}

// fp8_block: the same products with a branch per 16-slot pair (the stage above, specialised per
// tile count, needs more registers than the emulated e4m3 mma leaves: ptxas spilled). sm_90 runs
// e4m3 mma.sync as f16 HMMA on operands each warp converts (F2FP); wgmma m64nNk32 measured
// slower here (bench/NOTES.md).
template <int W>
__device__ __forceinline__ void mma_stage_pairs(const uint8_t* w, const uint8_t* x, int m,
                                                float (&acc)[kTok<W> / 8][4]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int kb = 0; kb < kRowBytes; kb += 32) {
    uint32_t a[4];
    ldmatrix_x4(a, w + weight_load_offset(warp, lane, kb / 32, kRowBytes));
#pragma unroll
    for (int pair = 0; pair < kTok<W> / 16; ++pair) {
      if (pair * 16 >= m) break;
      uint32_t b[4];  // the pair's token load at this K step, as the specialised stage's
      const TokenAddress at = token_load_address(kTok<W> / 8, kb / 32, pair, lane);
      ldmatrix_x4(b, x + at.row * kTokLd<W> + at.byte);
      mma<W == kFp8W>(acc[2 * pair], a, b[0], b[1]);
      mma<W == kFp8W>(acc[2 * pair + 1], a, b[2], b[3]);
    }
  }
}

// fp8_block with f16 tokens (kFp8F16W, kFp8F16x2W): each 32 K of e4m3 weights (one ldmatrix x4,
// the e4m3 mma's A fragment) converted to f16 in this warp only and multiplied as two f16
// m16n8k16 mmas over a K order both operands share: lane q's A registers hold K 4q..4q+3 (then
// 16 + those) of its rows, so the first mma's logical K pairs (2q, 2q + 1) and (2q + 8, 2q + 9)
// are physical (4q, 4q + 1) and (4q + 2, 4q + 3), the second's the same 16 further; a token's four
// f16 at K 4q..4q+3 are one 8-byte load, its B pair. NT n-tiles: with kBranch, the n-tiles that
// hold any of the item's m slots (a branch per n-tile in every K step); without, exactly NT, fixed
// by the caller for the item (with_each_n_tile_count), so the K steps hold no branch: the branches
// made the compiler keep each step's token loads behind them and re-converge the warp before every
// mma (the SASS: 41 WARPSYNC and 26 BRA a two-tile stage, session 44). kBranch stays for the
// 64-slot one-tile instance, whose fixed-NT variants need more registers than its 168 (ptxas
// spilled). With one or two n-tiles the second mma of each step accumulates in a second chain,
// summed at the end, as mma_token_tiles does.
template <int W, int NT, bool kBranch>
__device__ __forceinline__ void mma_stage_f16_tokens(const uint8_t* w, const uint8_t* x, int m,
                                                     float (&acc)[NT][4]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
  constexpr bool kTwoChains = NT <= 2;
  float odd[NT][4] = {};
#pragma unroll
  for (int kb = 0; kb < kRowBytes; kb += 32) {
    uint32_t a8[4];  // rows g, g + 8 at K kb + 4q.., then at kb + 16 + 4q..
    ldmatrix_x4(a8, w + weight_load_offset(warp, lane, kb / 32, kRowBytes));
    uint32_t a[2][4];  // the two f16 mmas' A (kernels/fragments.hpp f16_a_reg)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        a[h][r] = e4m3x2_to_f16x2(a8[f16_a_reg(h, r)] >> (16 * f16_a_half(r)));
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      if (kBranch && nt * 8 >= m) break;
      const uint8_t* row = x + (nt * 8 + g) * kTokLd<W>;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint2 b = *reinterpret_cast<const uint2*>(row + f16_token_byte(kb, h, q));
        if (kTwoChains && h == 1)
          mma_f16(odd[nt], a[h], b.x, b.y);
        else
          mma_f16(acc[nt], a[h], b.x, b.y);
      }
    }
  }
  if constexpr (kTwoChains) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[nt][k] += odd[nt][k];
  }
}

// fp8_block by wgmma (kFp8WgW, kFp8Wg2W): part[nt] = this warpgroup's 64 weight rows of one 16 KB
// e4m3 tile (rows 64 wg.., one TMA box: K-major, 128-byte swizzle) times the token rows' matching
// 128-byte atom (the same layout, kernels/ring.cuh produce_tokens) over the tile's 128 K (one
// scale block), as four m64n(8 NT)k32 wgmma from shared
// memory in one commit group, awaited before the caller promotes part. The accumulator layout is
// mma.sync's per warp: value 4 nt + e of warp w's thread (g, q) is row 16 w + g (+ 8 for e >= 2),
// token 8 nt + 2 q + e % 2, so part[nt][e] lands where the mma.sync stages put it. Token columns
// past the item's m multiply stale rows; those columns are never read.
template <int N, size_t... I>
__device__ __forceinline__ void wgmma_e4m3_k32(uint64_t a, uint64_t b, float* d, bool accumulate,
                                               std::index_sequence<I...>) {
  using namespace cute::SM90::GMMA;
  const ScaleOut scale = accumulate ? ScaleOut::One : ScaleOut::Zero;
  if constexpr (N == 8)
    MMA_64x8x32_F32E4M3E4M3_SS_TN<>::fma(a, b, d[I]..., scale);
  else if constexpr (N == 16)
    MMA_64x16x32_F32E4M3E4M3_SS_TN<>::fma(a, b, d[I]..., scale);
  else
    MMA_64x32x32_F32E4M3E4M3_SS_TN<>::fma(a, b, d[I]..., scale);
}

template <int W, int NT>
__device__ __forceinline__ void mma_stage_wgmma(const uint8_t* w, const uint8_t* x,
                                                float (&part)[NT][4]) {
  static_assert(kWgmmaTokens<W> && (NT == 1 || NT == 2 || NT == 4), "N = 8, 16 or 32");
  const int wg = threadIdx.x / 128;
  const uint64_t da = gpu::kernels::kmajor_sw128_desc(w + wg * (kRows / 2) * kRowBytes);
  const uint64_t db = gpu::kernels::kmajor_sw128_desc(x);
  float* d = &part[0][0];
#pragma unroll
  for (int i = 0; i < 4 * NT; ++i) cute::warpgroup_fence_operand(d[i]);
  cute::warpgroup_arrive();
#pragma unroll
  for (int kk = 0; kk < kRowBytes / 32; ++kk)
    wgmma_e4m3_k32<8 * NT>(gpu::kernels::desc_advance(da, kk * 32),
                           gpu::kernels::desc_advance(db, wgmma_token_step(kTok<W>, kk)), d, kk > 0,
                           std::make_index_sequence<4 * NT>{});
  cute::warpgroup_commit_batch();
#pragma unroll
  for (int i = 0; i < 4 * NT; ++i) cute::warpgroup_fence_operand(d[i]);
  cute::warpgroup_wait<0>();
}

// fp4: this consumer thread's share of a prepared chunk (kernels/fp4_fragments.cuh): rows
// warp * 16 + lane / 4 (and + 8) of the chunk.
template <int W>
__device__ __forceinline__ gpu::kernels::Fp4Rows<kIsMx<W>> fp4_rows(const uint8_t* w) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  return gpu::kernels::Fp4Rows<kIsMx<W>>(w, warp * 16 + lane / 4, lane % 4);
}

// fp4: A built in registers from the stage's prepared chunk (read once a stage); the item's
// epilogue multiplies 2^kFp4Unfold back.
// Two or four chunks a stage (kChunksPerStage): one after the other, each against its 256 bytes of
// the token rows: the same products in the same order as two one-chunk stages.
template <int W, int NT>
__device__ __forceinline__ void mma_stage_fp4(const uint8_t* w, const uint8_t* x,
                                              float (&acc)[kTok<W> / 8][4]) {
  constexpr int kChunkSteps = kTokRowBytes<W> / 32 / kChunksPerStage<W>;
#pragma unroll
  for (int c = 0; c < kChunksPerStage<W>; ++c) {
    const auto rows = fp4_rows<W>(w + c * kFp4ChunkBytes<W>);
    mma_token_tiles<W, NT, kChunkSteps>(x + c * kChunkSteps * 32, acc,
                                        [&](int j, uint32_t(&a)[4]) { rows.fragments(j, a); });
  }
}

// 4-bit weights by wgmma (kMxfp4WgW, kNvfp4WgW): acc (the item's running sums, NT n-tiles) +=
// this warpgroup's 64 rows of the stage's two chunks times its token rows, as 16 m64n(8 NT)k16
// bf16 wgmma with A from registers: each warp dequantises its 16 rows' fragments of both chunks
// first (Fp4Rows, mma.sync's A layout, which is wgmma's for the warp's rows), one wgmma fence,
// then the 16 wgmma in one commit group, awaited before the stage is released. B for K step j of
// chunk c: 64-K atom 2c + j / 4 of the token tile, 32 bytes in (j % 4) (ring.cuh produce_tokens).
template <int N, size_t... I>
__device__ __forceinline__ void wgmma_bf16_rs_k16(const uint32_t (&a)[4], uint64_t b, float* d,
                                                  std::index_sequence<I...>) {
  using namespace cute::SM90::GMMA;
  if constexpr (N == 8)
    MMA_64x8x16_F32BF16BF16_RS<Major::K, Major::K>::fma(a[0], a[1], a[2], a[3], b, d[I]...);
  else if constexpr (N == 16)
    MMA_64x16x16_F32BF16BF16_RS<Major::K, Major::K>::fma(a[0], a[1], a[2], a[3], b, d[I]...);
  else
    MMA_64x32x16_F32BF16BF16_RS<Major::K, Major::K>::fma(a[0], a[1], a[2], a[3], b, d[I]...);
}

template <int W, int NT>
__device__ __forceinline__ void mma_stage_fp4_wgmma(const uint8_t* w, const uint8_t* x,
                                                    float (&acc)[kTok<W> / 8][4]) {
  static_assert(kWgmmaTokens<W> && kIsFp4<W> && (NT == 1 || NT == 2 || NT == 4), "N = 8, 16, 32");
  constexpr int kChunks = kChunksPerStage<W>, kSteps = kStageK<W> / kChunks / 16;  // 8 a chunk
  uint32_t a[kChunks][kSteps][4];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const auto rows = fp4_rows<W>(w + c * kFp4ChunkBytes<W>);
#pragma unroll
    for (int j = 0; j < kSteps; ++j) rows.fragments(j, a[c][j]);
  }
  float* d = &acc[0][0];
  // The A fragments stay in their registers until the wgmma that read them are done.
  auto fence_a = [&] {
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
#pragma unroll
      for (int j = 0; j < kSteps; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) cute::warpgroup_fence_operand(a[c][j][r]);
  };
#pragma unroll
  for (int i = 0; i < 4 * NT; ++i) cute::warpgroup_fence_operand(d[i]);
  fence_a();
  cute::warpgroup_arrive();
  const uint64_t db = gpu::kernels::kmajor_sw128_desc(x);
#pragma unroll
  for (int c = 0; c < kChunks; ++c)
#pragma unroll
    for (int j = 0; j < kSteps; ++j)
      wgmma_bf16_rs_k16<8 * NT>(
          a[c][j], gpu::kernels::desc_advance(db, wgmma_token_step(kTok<W>, c * kSteps + j)), d,
          std::make_index_sequence<4 * NT>{});
  cute::warpgroup_commit_batch();
#pragma unroll
  for (int i = 0; i < 4 * NT; ++i) cute::warpgroup_fence_operand(d[i]);
  cute::warpgroup_wait<0>();
  fence_a();
}

// Calls f(std::integral_constant<int, NT>{}) with the fewest n-tiles (1, or whole pairs up to
// kMaxTiles) that hold m slots: the consumers' branch is taken once a stage, outside its products.
template <int kMaxTiles, class F>
__device__ __forceinline__ void with_n_tiles(int m, F&& f) {
  static_assert(kMaxTiles == 4 || kMaxTiles == 8, "tiles of 32 or 64 slots");
  if (m <= 8) {
    f(std::integral_constant<int, 1>{});
  } else if (m <= 16) {
    f(std::integral_constant<int, 2>{});
  } else if constexpr (kMaxTiles == 4) {
    f(std::integral_constant<int, 4>{});
  } else {
    if (m <= 32)
      f(std::integral_constant<int, 4>{});
    else
      f(std::integral_constant<int, 8>{});
  }
}

// Calls f(std::integral_constant<int, NT>{}) with exactly the n-tiles that hold m <= 32 slots (1 to
// 4: the f16-token fp8 stage takes any count, not only whole pairs).
template <class F>
__device__ __forceinline__ void with_each_n_tile_count(int m, F&& f) {
  if (m <= 8)
    f(std::integral_constant<int, 1>{});
  else if (m <= 16)
    f(std::integral_constant<int, 2>{});
  else if (m <= 24)
    f(std::integral_constant<int, 3>{});
  else
    f(std::integral_constant<int, 4>{});
}

// The 256 consumer threads only (named barrier 1): the producer warp runs ahead.
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
}

}  // namespace moe::mega::kernels
