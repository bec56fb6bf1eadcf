// deepgemm_style's own grouped fp8 block-scale GEMM with the operands swapped, for decode
// (bench/NOTES.md session 33): the same sums as kernels/sm90_fp8_grouped_gemm_ffma.cuh,
// out[r, :N] = sum over 128-wide K blocks kb of (rows[r, kb] . weights[g][:, kb]) *
// row_scale[kb][r] * w_scale[g][kb][n / 128], but each wgmma multiplies 64 weight rows (M) by 16
// token rows (N = 16), so a tile is 128 weight rows x 16 tokens.
//
// Why: with a few rows an expert the token-tile kernel's stage is a 64 x 128 x 128 product for
// one live row, and its per-stage round trip (wait, four m64n128 wgmma, wait, 64 FFMA, release)
// caps an SM at ~50 GB/s of weights (bench/NOTES.md session 32): where fewer tiles than SMs run,
// or in a last round, the SMs that stream cannot make up for those that don't. Here a stage is the
// 128x128 weight tile (16 KB) and a 16-row token box (2 KB); the consumers' work a stage is four
// m64n16 wgmma and 8 FFMA a thread, and twelve stages stay in flight.
//
// One CTA per SM, persistent, no cluster (split K: pairs, below): warpgroup 0 loads (one thread
// issues the two TMA boxes a stage, one warp copies the stage's 16 row scales and the tile's weight
// scale), warpgroups 1 and 2 each take 64 of the tile's weight rows and every stage. Tiles are
// numbered group by group, the 16-row blocks of one weight tile consecutively
// (kernels/group_tiles.cuh); rows past the group's count in a block (other groups' rows, or the
// TMA's zeros past the end) only fill columns that are never stored. The scales are applied after
// every K block (FFMA promotion into an fp32 total), as in the token-tile kernel.
//
// Early weights (p.early_weights, set where the caller knows the group rows were written before
// the previous launch began): the tile schedule and the first ring's weight boxes come before the
// dependency wait, so the weights stream while the kernel ahead (the quantisation, the activation)
// still runs; at decode 0.94-0.97x of the layer's time (bench/NOTES.md session 34).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include <cutlass/arch/barrier.h>
#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>

#include "kernels/dependent_launch.cuh"
#include "kernels/gmma_desc.cuh"
#include "kernels/group_tiles.cuh"
#include "sm90_fp8_grouped_gemm_ffma.cuh"

namespace moe::deepgemm::kernels::swapab {

using ffma::arrive_after_copies;
using ffma::copy_float_async;
using ffma::GroupRows;
using ffma::kHint;
using ffma::Params;

constexpr int kBlockN = 128;  // weight rows a tile (one scale block), 64 a consumer
constexpr int kBlockK = 128;
constexpr int kTokens = 16;  // token rows a tile: wgmma N
constexpr int kMaxGroups = ffma::kMaxGroups;
constexpr int kWeightBytes = kBlockN * kBlockK;  // 16 KB
constexpr int kTokenBytes = kTokens * kBlockK;   // 2 KB
constexpr int kThreads = 3 * 128;
constexpr int kAccum = 64 * kTokens / 128;  // fp32 values a thread (8)
constexpr int kFullArrivals = 1 + 32;       // the TMA thread's bytes, the scale warp's copies
constexpr int kScaleStride = kTokens + 4;   // floats a stage: row scales, the weight scale

// Shared memory: the weight stages, the token stages (each 1024-byte aligned for the swizzle),
// the barriers (the stages' full and empty, then split K's full and empty per consumer), the
// stages' scales, the tile prefix, and split K's per consumer 8 x 128 partial sums. kSplit: K
// split over a CTA pair (below), one stage fewer for the partial sums.
template <bool kSplit>
struct Geometry {
  static constexpr int kStages = kSplit ? 11 : 12;
  static constexpr size_t kTokenOffset = size_t(kStages) * kWeightBytes;
  static constexpr size_t kBarrierOffset = kTokenOffset + size_t(kStages) * kTokenBytes;
  static constexpr size_t kScaleOffset = kBarrierOffset + (2 * kStages + 4) * sizeof(uint64_t);
  static constexpr size_t kPrefixOffset = kScaleOffset + kStages * kScaleStride * sizeof(float);
  static constexpr size_t kPartialOffset = kPrefixOffset + (kMaxGroups + 4) * sizeof(int);
  static constexpr size_t kPartialBytes = kSplit ? 2 * kAccum * 128 * sizeof(float) : 0;
  static constexpr size_t kSmemBytes = kPartialOffset + kPartialBytes + 1024;
  // With the 1 KB of static shared memory the kernels also have (cuobjdump -res-usage).
  static_assert(kSmemBytes + 1024 <= 227 * 1024, "shared memory");
};

template <size_t... I>
__device__ __forceinline__ void wgmma_64x16x32(uint64_t a, uint64_t b, float* d, bool accumulate,
                                               std::index_sequence<I...>) {
  cute::SM90::GMMA::MMA_64x16x32_F32E4M3E4M3_SS_TN<>::fma(
      a, b, d[I]...,
      accumulate ? cute::SM90::GMMA::ScaleOut::One : cute::SM90::GMMA::ScaleOut::Zero);
}

// p.rows_map: box 16 rows x 128 K; p.weights_map: box 128 x 128 (launcher,
// fp8_gemm_swapab_launch.cu).
//
// kSplit (split K, clusters of two CTAs): both CTAs of a cluster take the same tiles, the first
// the first half of each tile's K blocks and the second the rest, each loading its own boxes, so
// a GEMM of fewer tiles than SMs keeps twice the SMs streaming. At the end of a tile the second
// CTA's consumer writes its partial sums into the first's shared memory (a consumer's slot of 8 x
// 128 floats), which adds them to its own, first half first, and stores: deterministic. Per
// consumer a full barrier in the first CTA (the peer's four warps) and an empty one in the second
// (the first's four warps, once read), as in the token-tile kernel's split K.
template <class Out, bool kSplit = false>
__global__ void __launch_bounds__(kThreads, 1) grouped_gemm(const __grid_constant__ Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // Early weights (p.early_weights): only the schedule (the group rows, settled two launches
  // back) and the weights are read before the previous kernel is awaited (PDL), by the TMA thread
  // alone, which then fills the stages' token boxes; every other thread awaits it first.
  const bool early = p.early_weights != 0;
  if (!early) gpu::kernels::enter_dependent_grid();  // launched after the previous kernel (PDL)
  using G = Geometry<kSplit>;
  constexpr int kStages = G::kStages;
  constexpr size_t kTokenOffset = G::kTokenOffset;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  auto* full = reinterpret_cast<uint64_t*>(smem + G::kBarrierOffset);
  uint64_t* empty = full + kStages;
  uint64_t* part_full = empty + kStages;  // split K, per consumer
  uint64_t* part_empty = part_full + 2;
  auto* scales = reinterpret_cast<float*>(smem + G::kScaleOffset);  // [kStages][kScaleStride]
  int* prefix = reinterpret_cast<int*>(smem + G::kPrefixOffset);
  auto* partial = reinterpret_cast<float*>(smem + G::kPartialOffset);  // [consumer][8][128]
  const int wg = threadIdx.x / 128;
  const int rank = kSplit ? int(cute::block_rank_in_cluster()) : 0;
  const int first_unit = kSplit ? int(blockIdx.x) / 2 : int(blockIdx.x);
  const int unit_step = kSplit ? int(gridDim.x) / 2 : int(gridDim.x);

  if (threadIdx.x == 0) {
    cute::prefetch_tma_descriptor(&p.rows_map);
    cute::prefetch_tma_descriptor(&p.weights_map);
    for (int s = 0; s < kStages; ++s) {
      cutlass::arch::ClusterBarrier::init(&full[s], kFullArrivals);
      cutlass::arch::ClusterBarrier::init(&empty[s], 8);  // the consumers' eight warps
    }
    if constexpr (kSplit)
      for (int c = 0; c < 2; ++c) {  // the other CTA's four warps of the same consumer
        cutlass::arch::ClusterBarrier::init(&part_full[c], 4);
        cutlass::arch::ClusterBarrier::init(&part_empty[c], 4);
      }
    cutlass::arch::fence_barrier_init();
  }
  // Ends with __syncthreads: the barriers are visible too.
  gpu::kernels::build_tile_prefix(
      p.groups, kTokens, [&](int g) { return ffma::group_rows(p, g).count; }, prefix);
  if constexpr (kSplit) cute::cluster_sync();  // the peer's barriers exist
  if (early && threadIdx.x != 0) gpu::kernels::enter_dependent_grid();

  const int n_tiles = p.n / kBlockN, k_blocks = p.k / kBlockK;
  // This CTA's K blocks of every tile (split K: the pair's halves; the launcher ensures two).
  const int kb_begin = kSplit && rank == 1 ? k_blocks / 2 : 0;
  const int kb_end = kSplit && rank == 0 ? k_blocks / 2 : k_blocks;
  const int units = prefix[p.groups] * n_tiles;
  // Unit u: its tile, the first row of its 16-row block and the group's rows from there (>= 1).
  struct Unit {
    gpu::kernels::GroupTile tile;
    int64_t row0, rows_here;
  };
  auto unit_at = [&](int u) {
    const gpu::kernels::GroupTile tile =
        gpu::kernels::group_tile_rows_first(prefix, p.groups, n_tiles, u);
    const GroupRows gr = ffma::group_rows(p, tile.group);
    const int64_t skipped = int64_t(tile.block_m) * kTokens;
    return Unit{tile, gr.first + skipped, gr.count - skipped};
  };

  if (wg == 0) {
    if (threadIdx.x / 32 == 1) {  // the scales: row scales (lanes 0-15), weight scale (lane 16)
      const int lane = threadIdx.x % 32;
      int stage = 0;
      uint32_t phase = 0;
      for (int u = first_unit; u < units; u += unit_step) {
        const auto [tile, row0, rows_here] = unit_at(u);
        const float* sw = p.w_scales + int64_t(tile.group) * k_blocks * n_tiles + tile.block_n;
        for (int kb = kb_begin; kb < kb_end; ++kb) {
          cutlass::arch::ClusterBarrier::wait(&empty[stage], phase ^ 1);
          float* dst = scales + stage * kScaleStride;
          if (lane < kTokens) {
            const bool valid = lane < rows_here;
            copy_float_async(
                dst + lane,
                valid ? p.row_scales + int64_t(kb) * p.scale_ld + row0 + lane : p.row_scales,
                valid);
          } else if (lane == kTokens) {
            copy_float_async(dst + kTokens, sw + int64_t(kb) * n_tiles, true);
          }
          arrive_after_copies(&full[stage]);
          if (++stage == kStages) stage = 0, phase ^= 1;
        }
      }
    } else if (threadIdx.x == 0) {  // the TMA boxes
      // Early: the weight boxes of the first (up to kStages) stages, each stage's barrier
      // expecting its token box too, then the wait; those stages get only their token box below.
      int ahead = 0;
      for (int u = first_unit; early && u < units && ahead < kStages; u += unit_step) {
        const gpu::kernels::GroupTile tile =
            gpu::kernels::group_tile_rows_first(prefix, p.groups, n_tiles, u);
        const int wrow0 = tile.group * p.n + tile.block_n * kBlockN;
        for (int kb = kb_begin; kb < kb_end && ahead < kStages; ++kb, ++ahead) {
          cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(
              &full[ahead], uint32_t(kWeightBytes + kTokenBytes));
          cute::SM90_TMA_LOAD_2D::copy(&p.weights_map, &full[ahead], kHint,
                                       smem + size_t(ahead) * kWeightBytes, kb * kBlockK, wrow0);
        }
      }
      if (early) gpu::kernels::enter_dependent_grid();
      int stage = 0, item = 0;
      uint32_t phase = 0;
      for (int u = first_unit; u < units; u += unit_step) {
        const auto [tile, row0, rows_here] = unit_at(u);
        (void)rows_here;  // the TMA box is whole (zeros past the buffer's end)
        const int wrow0 = tile.group * p.n + tile.block_n * kBlockN;
        for (int kb = kb_begin; kb < kb_end; ++kb, ++item) {
          if (item >= ahead) {
            cutlass::arch::ClusterBarrier::wait(&empty[stage], phase ^ 1);
            cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(
                &full[stage], uint32_t(kWeightBytes + kTokenBytes));
            cute::SM90_TMA_LOAD_2D::copy(&p.weights_map, &full[stage], kHint,
                                         smem + size_t(stage) * kWeightBytes, kb * kBlockK, wrow0);
          }
          cute::SM90_TMA_LOAD_2D::copy(&p.rows_map, &full[stage], kHint,
                                       smem + kTokenOffset + size_t(stage) * kTokenBytes,
                                       kb * kBlockK, int(row0));
          if (++stage == kStages) stage = 0, phase ^= 1;
        }
      }
    }
  } else {
    // Consumer `part` takes weight rows 64 part .. 64 part + 63 of the tile. Accumulator layout
    // (m64n16k32): value 4j + {0, 1} is weight row r_wg, tokens 8j + 2q + {0, 1}; 4j + {2, 3}
    // the same tokens of weight row r_wg + 8 (q = lane % 4).
    const int part = wg - 1, t128 = threadIdx.x % 128, warp = t128 / 32, lane = t128 % 32;
    const int r_wg = warp * 16 + lane / 4, q = lane % 4;
    const uint64_t desc_a = gpu::kernels::kmajor_sw128_desc(smem + part * (kWeightBytes / 2));
    const uint64_t desc_b = gpu::kernels::kmajor_sw128_desc(smem + kTokenOffset);
    float acc[kAccum], total[kAccum];
    int stage = 0, split_tiles = 0;
    uint32_t phase = 0;
    for (int u = first_unit; u < units; u += unit_step) {
      const auto [tile, row0, rows_here] = unit_at(u);
#pragma unroll
      for (int i = 0; i < kAccum; ++i) total[i] = 0.0f;
      for (int kb = kb_begin; kb < kb_end; ++kb) {
        // Descriptors: the stage's offset added to the start-address field.
        const uint64_t da = gpu::kernels::desc_advance(desc_a, uint32_t(stage) * kWeightBytes);
        const uint64_t db = gpu::kernels::desc_advance(desc_b, uint32_t(stage) * kTokenBytes);
        cutlass::arch::ClusterBarrier::wait(&full[stage], phase);
        const float* sc = scales + stage * kScaleStride;
        const float s_w = sc[kTokens];
        float f[4];  // the scale of tokens 2q, 2q + 1, 8 + 2q, 8 + 2q + 1
#pragma unroll
        for (int c = 0; c < 4; ++c) f[c] = sc[8 * (c / 2) + 2 * q + c % 2] * s_w;
        ffma::wgmma_batch(acc, [&] {
#pragma unroll
          for (int kk = 0; kk < kBlockK / 32; ++kk)
            wgmma_64x16x32(gpu::kernels::desc_advance(da, kk * 32),
                           gpu::kernels::desc_advance(db, kk * 32), acc, kk > 0,
                           std::make_index_sequence<kAccum>{});
        });
        __syncwarp();
        if (lane == 0) cutlass::arch::ClusterBarrier::arrive(&empty[stage]);
        if (++stage == kStages) stage = 0, phase ^= 1;
#pragma unroll
        for (int j = 0; j < kAccum / 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            total[4 * j + e] = fmaf(acc[4 * j + e], f[2 * j + e % 2], total[4 * j + e]);
      }
      if constexpr (kSplit) {
        // Value i of this thread at partial[part][i][t128]: a warp's stores and loads contiguous.
        float* slot = partial + size_t(part) * kAccum * 128;
        const uint32_t parity = uint32_t(split_tiles++) & 1u;
        if (rank == 1) {  // the second half's sums go to the first CTA
          cutlass::arch::ClusterBarrier::wait(&part_empty[part], parity ^ 1u);
#pragma unroll
          for (int i = 0; i < kAccum; ++i) ffma::store_to_peer(slot + i * 128 + t128, 0u, total[i]);
          __syncwarp();
          if (lane == 0) {
            ffma::fence_cluster();
            cutlass::arch::ClusterBarrier::arrive(&part_full[part], 0u, 1u);
          }
          continue;
        }
        cutlass::arch::ClusterBarrier::wait(&part_full[part], parity);
        ffma::fence_cluster();
#pragma unroll
        for (int i = 0; i < kAccum; ++i) total[i] += slot[i * 128 + t128];
        __syncwarp();
        if (lane == 0) {
          ffma::fence_cluster();  // the slot's reads before the peer's next stores (cluster scope)
          cutlass::arch::ClusterBarrier::arrive(&part_empty[part], 1u, 1u);
        }
      }
      // Token 8j + 2q + (e % 2) of weight row r_wg + 8 (e / 2): out[row0 + token, n].
      const int64_t n0 = int64_t(tile.block_n) * kBlockN + part * 64 + r_wg;
#pragma unroll
      for (int j = 0; j < kAccum / 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int token = 8 * j + 2 * q + e % 2;
          if (token >= rows_here) continue;
          const int64_t at = (row0 + token) * p.n + n0 + 8 * (e / 2);
          if constexpr (std::is_same_v<Out, float>)
            static_cast<float*>(p.out)[at] = total[4 * j + e];
          else
            static_cast<__nv_bfloat16*>(p.out)[at] = __float2bfloat16_rn(total[4 * j + e]);
        }
    }
  }
  // A CTA leaves only when its peer no longer arrives on its barriers or writes its memory.
  if constexpr (kSplit) cute::cluster_sync();
#endif
}

}  // namespace moe::deepgemm::kernels::swapab
