// The Hopper mxfp8 chunks (moe_cuda/mxfp8_chunks.hpp) turned into bf16 A fragments of a 16-row
// wgmma m64nNk16 operand in registers, as kernels/fp4_fragments.cuh does for the 4-bit chunks:
// the thread's 32 code bytes of each of its two rows and their scale codes read once per chunk,
// each K step's four registers cut out of the prepared words (a mask; two shifts and two masks)
// and scaled with one bf16 multiply (moe_cuda/mxfp8_decode.hpp).
#pragma once

#include <cstdint>

#include "kernels/fp4_fragments.cuh"
#include "moe_cuda/mxfp8_chunks.hpp"
#include "moe_cuda/mxfp8_decode.hpp"

namespace moe::gpu::kernels {

struct Mx8Rows {
  uint32_t codes0[8], codes1[8];  // word j: K step j of rows r0 and r0 + 8
  uint32_t sc0, sc1;              // the rows' 4 scale codes (one per 32 K)

  __device__ __forceinline__ Mx8Rows(const uint8_t* chunk, int r0, int q) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4 a = *reinterpret_cast<const uint4*>(chunk + r0 * 128 + q * 32 + h * 16);
      const uint4 b = *reinterpret_cast<const uint4*>(chunk + (r0 + 8) * 128 + q * 32 + h * 16);
      codes0[4 * h] = a.x, codes0[4 * h + 1] = a.y, codes0[4 * h + 2] = a.z,
                 codes0[4 * h + 3] = a.w;
      codes1[4 * h] = b.x, codes1[4 * h + 1] = b.y, codes1[4 * h + 2] = b.z,
                 codes1[4 * h + 3] = b.w;
    }
    sc0 = *reinterpret_cast<const uint32_t*>(chunk + kMx8CodeBytes + r0 * kMx8ScaleBytes);
    sc1 = *reinterpret_cast<const uint32_t*>(chunk + kMx8CodeBytes + (r0 + 8) * kMx8ScaleBytes);
  }

  // Block b's scale pair.
  __device__ __forceinline__ static uint32_t scale_pair(uint32_t sc, int b) {
    return mx8_scale_pair(scale_code_byte(sc, b));
  }

  // K step j's A fragments: the two pairs of word j of each row, times block j / 2's multiplier.
  // The products are the weights x scale, exact in bf16.
  __device__ __forceinline__ void fragments(int j, uint32_t (&a)[4]) const {
    const uint32_t p0 = scale_pair(sc0, j / 2), p1 = scale_pair(sc1, j / 2);
    a[0] = bf16x2_mul(mx8_first_pair(codes0[j]), p0);   // row r0, K 2q, 2q + 1
    a[1] = bf16x2_mul(mx8_first_pair(codes1[j]), p1);   // row r0 + 8
    a[2] = bf16x2_mul(mx8_second_pair(codes0[j]), p0);  // row r0, K 2q + 8, 2q + 9
    a[3] = bf16x2_mul(mx8_second_pair(codes1[j]), p1);
  }
};

}  // namespace moe::gpu::kernels
