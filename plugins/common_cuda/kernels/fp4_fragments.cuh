// The Hopper fp4 layout's chunks (moe_cuda/fp4_chunks.hpp) turned into bf16 A fragments of a
// 16-row m16n8k16 / wgmma m64nNk16 operand in registers: the thread's codes and scale codes read
// once per chunk, each K step's four registers cut out and scaled with integer steps and one bf16
// multiply (moe_cuda/fp4_decode.hpp). Used by cutlass_mega's fused kernel (mma.sync) and the
// weight-only grouped GEMM (wgmma with A from registers): both fragment layouts are the same.
#pragma once

#include <cstdint>

#include "moe_cuda/fp4_chunks.hpp"
#include "moe_cuda/fp4_decode.hpp"

namespace moe::gpu::kernels {

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// Byte b (0..3) of a word of scale codes alone in the low byte, as the *_scale_pair steps take it:
// one byte permute.
__device__ __forceinline__ uint32_t scale_code_byte(uint32_t codes, int b) {
  return __byte_perm(codes, 0u, 0x4440u + uint32_t(b));
}

// One thread's share of a prepared chunk (128 K, 8 bf16 k16 steps): the 16 code bytes of its
// chunk rows r0 and r0 + 8 (r0 = 16-row block + lane / 4) at column group q = lane % 4, and their
// scale codes. kMx: ue8m0 per 32 along K (4 bytes a row); else e4m3 per 16 (8 bytes a row).
template <bool kMx>
struct Fp4Rows {
  uint32_t codes0[4], codes1[4];
  uint32_t sc0[2], sc1[2];

  __device__ __forceinline__ Fp4Rows(const uint8_t* chunk, int r0, int q) {
    const uint4 c0 = *reinterpret_cast<const uint4*>(chunk + r0 * 64 + q * 16);
    const uint4 c1 = *reinterpret_cast<const uint4*>(chunk + (r0 + 8) * 64 + q * 16);
    codes0[0] = c0.x, codes0[1] = c0.y, codes0[2] = c0.z, codes0[3] = c0.w;
    codes1[0] = c1.x, codes1[1] = c1.y, codes1[2] = c1.z, codes1[3] = c1.w;
    const uint8_t* scales = chunk + kFp4CodeBytes;
    if constexpr (kMx) {
      sc0[0] = *reinterpret_cast<const uint32_t*>(scales + r0 * 4);
      sc1[0] = *reinterpret_cast<const uint32_t*>(scales + (r0 + 8) * 4);
      sc0[1] = sc1[1] = 0;
    } else {
      const uint2 s0 = *reinterpret_cast<const uint2*>(scales + r0 * 8);
      const uint2 s1 = *reinterpret_cast<const uint2*>(scales + (r0 + 8) * 8);
      sc0[0] = s0.x, sc0[1] = s0.y, sc1[0] = s1.x, sc1[1] = s1.y;
    }
  }

  // K step j's A fragments: word j / 2 of the codes, outputs 2 (j % 2) and + 1, times the
  // block's scale (mx: block j / 2 of 32 K; nv: block j of 16 K). The products are the weights x
  // scale x 2^(kFp4FoldExp - 126), exact in bf16; the accumulator takes 2^kFp4Unfold back.
  __device__ __forceinline__ void fragments(int j, uint32_t (&a)[4]) const {
    const int i = j / 2, h = j % 2;
    const int byte = kMx ? i : j;
    const uint32_t s0 = scale_code_byte(sc0[byte / 4], byte % 4);
    const uint32_t s1 = scale_code_byte(sc1[byte / 4], byte % 4);
    const uint32_t p0 = kMx ? mx_scale_pair(s0) : nv_scale_pair(s0);
    const uint32_t p1 = kMx ? mx_scale_pair(s1) : nv_scale_pair(s1);
    a[0] = bf16x2_mul(fp4_placed_pair(codes0[i], 2 * h), p0);      // row r0, K 2q, 2q + 1
    a[1] = bf16x2_mul(fp4_placed_pair(codes1[i], 2 * h), p1);      // row r0 + 8
    a[2] = bf16x2_mul(fp4_placed_pair(codes0[i], 2 * h + 1), p0);  // row r0, K 2q + 8, 2q + 9
    a[3] = bf16x2_mul(fp4_placed_pair(codes1[i], 2 * h + 1), p1);
  }
};

}  // namespace moe::gpu::kernels
