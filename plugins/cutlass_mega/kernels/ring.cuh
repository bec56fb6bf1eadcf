// cutlass_mega's shared-memory ring (docs/design.md §13): a producer warp fills stages (a weight
// tile by TMA, token rows by bulk copies, both completing on the stage's mbarrier) and eight
// consumer warps multiply them (bf16: mma.sync; e4m3: wgmma, two warpgroups) and release them.
#pragma once

#include <cutlass/arch/barrier.h>
#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>

#include <type_traits>
#include <utility>

#include "kernels/config.cuh"
#include "kernels/gmma_desc.cuh"

namespace moe::mega::kernels {

// Stage s: the weight tile [kRows][kRowBytes] (two 64-row TMA boxes, 128-byte swizzle: the
// 16-byte chunk c of row r sits at chunk c ^ (r % 8)), then the token rows [kTok][kLdBytes].
__device__ __forceinline__ uint8_t* weight_tile(uint8_t* ring, int s) {
  return ring + size_t(s) * kStageBytes;
}
__device__ __forceinline__ uint8_t* token_tile(uint8_t* ring, int s) {
  return ring + size_t(s) * kStageBytes + kWeightBytes;
}

// Producer, a stage in two halves. The weights: once the consumers released stage `stage`, weight
// rows [row0, row0 + 64) and [row1, row1 + 64) of `map` at K step `ks` (kStageK elements), their
// bytes expected on the stage's barrier without arriving. The tokens: bytes
// [ks * 128, ks * 128 + 128) of the token rows x_row(n) for n < m, and the arrival. The stage
// completes only after both, so the weights may go out early (before a grid barrier, while the
// rows they meet are still being written) and the tokens later.
template <bool kFp8>
__device__ __forceinline__ void produce_weights(const CUtensorMap* map, int row0, int row1, int ks,
                                                uint8_t* ring, uint64_t* full, uint64_t* empty,
                                                int stage, uint32_t phase) {
  cutlass::arch::ClusterBarrier::wait(&empty[stage], phase ^ 1);
  if (threadIdx.x % 32 == 0) {
    cutlass::arch::ClusterTransactionBarrier::expect_transaction(&full[stage],
                                                                 uint32_t(kWeightBytes));
    constexpr uint64_t hint = uint64_t(cute::TMA::CacheHintSm90::EVICT_FIRST);  // read once
    uint8_t* w = weight_tile(ring, stage);
    const int k0 = ks * kStageK<kFp8>;
    cute::SM90_TMA_LOAD_2D::copy(map, &full[stage], hint, w, k0, row0);
    cute::SM90_TMA_LOAD_2D::copy(map, &full[stage], hint, w + kWeightBytes / 2, k0, row1);
  }
  __syncwarp();
}

// bf16 rows go to padded rows (kLdBytes apart, for ldmatrix); e4m3 rows, which wgmma reads, to
// 128-byte rows in the weight tile's 128-byte swizzle, 16 bytes at a time.
template <bool kFp8, class XRow>
__device__ __forceinline__ void produce_tokens(int ks, XRow x_row, int m, uint8_t* ring,
                                               uint64_t* full, int stage) {
  const int lane = threadIdx.x % 32;
  if (lane == 0)
    cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&full[stage],
                                                                   uint32_t(m * kRowBytes));
  __syncwarp();
  uint8_t* x = token_tile(ring, stage);
  if constexpr (kFp8) {
    for (int i = lane; i < m * 8; i += 32) {
      const int n = i / 8, c = i % 8;
      cute::SM90_BULK_COPY_G2S::copy(x_row(n) + size_t(ks) * kRowBytes + c * 16, &full[stage],
                                     x + n * kRowBytes + ((c ^ (n % 8)) << 4), 16);
    }
  } else {
    for (int n = lane; n < m; n += 32)
      cute::SM90_BULK_COPY_G2S::copy(x_row(n) + size_t(ks) * kRowBytes, &full[stage],
                                     x + n * kLdBytes, kRowBytes);
  }
}

// bf16 consumers: acc[nt] += W[16 rows of this warp] x X[8 tokens of n-tile nt]^T over the
// stage's 64 elements of K, for the n-tiles that hold tokens (m of them).
__device__ __forceinline__ void mma_stage(const uint8_t* w, const uint8_t* x, int m,
                                          float (&acc)[kTok / 8][4]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int row = warp * 16 + lane % 16;  // this lane's ldmatrix row of the weight tile
#pragma unroll
  for (int kb = 0; kb < kRowBytes; kb += 32) {
    uint32_t a[4];
    const int chunk = kb / 16 + lane / 16;
    ldmatrix_x4(a, w + row * kRowBytes + ((chunk ^ (row % 8)) << 4));
#pragma unroll
    for (int pair = 0; pair < kTok / 16; ++pair) {
      if (pair * 16 >= m) break;
      // Matrices: tokens 0-7 at kb, tokens 0-7 at kb + 16, tokens 8-15 at kb, at kb + 16.
      uint32_t b[4];
      const int tok = pair * 16 + (lane / 16) * 8 + lane % 8, koff = ((lane / 8) % 2) * 16;
      ldmatrix_x4(b, x + tok * kLdBytes + kb + koff);
      mma_bf16(acc[2 * pair], a, b[0], b[1]);
      mma_bf16(acc[2 * pair + 1], a, b[2], b[3]);
    }
  }
}

// e4m3 on the tensor cores' own path (mma.sync e4m3 is emulated on sm_90: each operand converted
// to f16 per warp, which held the fp8 layer to ~3 TB/s, bench/NOTES.md). One warpgroup's 64 weight
// rows of the stage (A: its 64-row box) times the first kN token rows (B: the swizzled token tile),
// the stage's four k32 steps into fresh accumulators d[kN / 2] (value 4j + {0, 1}: row r, tokens
// 8j + 2q + {0, 1}; 4j + {2, 3}: row r + 8; the layout mma_stage's acc[j] has), waited for.
template <int kN, size_t... I>
__device__ __forceinline__ void wgmma_e4m3(uint64_t a, uint64_t b, float* d,
                                           std::index_sequence<I...>) {
  using Atom = std::conditional_t<
      kN == 8, cute::SM90::GMMA::MMA_64x8x32_F32E4M3E4M3_SS_TN<>,
      std::conditional_t<
          kN == 16, cute::SM90::GMMA::MMA_64x16x32_F32E4M3E4M3_SS_TN<>,
          std::conditional_t<kN == 32, cute::SM90::GMMA::MMA_64x32x32_F32E4M3E4M3_SS_TN<>,
                             cute::SM90::GMMA::MMA_64x64x32_F32E4M3E4M3_SS_TN<>>>>;
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) cute::warpgroup_fence_operand(d[i]);
  cute::warpgroup_arrive();
#pragma unroll
  for (int kk = 0; kk < kRowBytes / 32; ++kk)
    Atom::fma(a + kk * 2, b + kk * 2, d[I]...,
              kk > 0 ? cute::SM90::GMMA::ScaleOut::One : cute::SM90::GMMA::ScaleOut::Zero);
  cute::warpgroup_commit_batch();
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) cute::warpgroup_fence_operand(d[i]);
  cute::warpgroup_wait<0>();
}

// The narrowest of n = 8, 16, 32, 64 token columns that covers the item's m tokens.
__device__ __forceinline__ void wgmma_e4m3_stage(const uint8_t* w, const uint8_t* x, int m,
                                                 float (&d)[kTok / 2]) {
  const int wg = threadIdx.x / 128;
  const uint64_t a = gpu::kernels::kmajor_sw128_desc(w + wg * (kWeightBytes / 2));
  const uint64_t b = gpu::kernels::kmajor_sw128_desc(x);
  if (m <= 8)
    wgmma_e4m3<8>(a, b, d, std::make_index_sequence<4>{});
  else if (m <= 16)
    wgmma_e4m3<16>(a, b, d, std::make_index_sequence<8>{});
  else if (m <= 32)
    wgmma_e4m3<32>(a, b, d, std::make_index_sequence<16>{});
  else
    wgmma_e4m3<64>(a, b, d, std::make_index_sequence<32>{});
}

// The 256 consumer threads only (named barrier 1): the producer warp runs ahead.
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
}

}  // namespace moe::mega::kernels
