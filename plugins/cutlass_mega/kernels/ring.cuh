// cutlass_mega's shared-memory ring (docs/design.md §13): a producer warp fills stages (a weight
// tile by TMA, token rows by bulk copies, both completing on the stage's mbarrier) and eight
// consumer warps multiply them with mma.sync and release them.
#pragma once

#include <cutlass/arch/barrier.h>
#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>

#include "kernels/config.cuh"

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

template <class XRow>
__device__ __forceinline__ void produce_tokens(int ks, XRow x_row, int m, uint8_t* ring,
                                               uint64_t* full, int stage) {
  const int lane = threadIdx.x % 32;
  if (lane == 0)
    cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&full[stage],
                                                                   uint32_t(m * kRowBytes));
  __syncwarp();
  uint8_t* x = token_tile(ring, stage);
  for (int n = lane; n < m; n += 32)
    cute::SM90_BULK_COPY_G2S::copy(x_row(n) + size_t(ks) * kRowBytes, &full[stage],
                                   x + n * kLdBytes, kRowBytes);
}

// Consumers: acc[nt] += W[16 rows of this warp] x X[8 tokens of n-tile nt]^T over the stage's
// 128 bytes of K, for the n-tiles that hold tokens (m of them). The fragments are the same bytes
// for bf16 (k16) and e4m3 (k32): 32 bytes of K per mma. sm_90 runs e4m3 mma.sync as f16 HMMA on
// operands each warp converts (F2FP); wgmma m64nNk32 measured slower here (bench/NOTES.md).
template <bool kFp8>
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
      mma<kFp8>(acc[2 * pair], a, b[0], b[1]);
      mma<kFp8>(acc[2 * pair + 1], a, b[2], b[3]);
    }
  }
}

// The 256 consumer threads only (named barrier 1): the producer warp runs ahead.
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
}

}  // namespace moe::mega::kernels
