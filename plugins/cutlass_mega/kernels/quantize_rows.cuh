// cutlass_mega, fp8_block: rows quantised per 128 channels inside the fused kernel, with the
// reference's rules (common_cuda's fp8_scale_from_amax and to_e4m3: scales and codes bit for bit
// those of moe::fake_quant_fp8_1x128 on the same values).
#pragma once

#include "kernels/config.cuh"
#include "kernels/quantize.cuh"

namespace moe::mega::kernels {

__device__ __forceinline__ void load4(const uint16_t* p, float (&v)[4]) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  v[0] = __uint_as_float(u.x << 16);
  v[1] = __uint_as_float(u.x & 0xffff0000u);
  v[2] = __uint_as_float(u.y << 16);
  v[3] = __uint_as_float(u.y & 0xffff0000u);
}
__device__ __forceinline__ void load4(const float* p, float (&v)[4]) {
  const float4 f = *reinterpret_cast<const float4*>(p);
  v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
}

// Rows [0, rows) of src [rows, cols] (bf16 or f32; cols % 128 == 0, 16-byte aligned rows) to
// codes [rows, cols] and scales [rows, cols / 128]: e4m3 bytes (Code uint8_t) or each code's f16
// value (uint16_t; exact, the same codes). A warp takes one (row, 128-channel block) at a time,
// four channels per lane, kBatch of them a step with every load out before the first reduction
// (one L2 round trip a step, not one a block); warps `first`, first + warps, ... of the `warps`
// that join (every warp of the grid, or of one CTA).
template <class T, class Code>
__device__ void quantize_rows_1x128(const T* src, int64_t rows, int64_t cols, Code* codes,
                                    float* scales, int64_t first, int64_t warps) {
  using namespace gpu::kernels;
  constexpr int kBatch = 4;
  const int lane = threadIdx.x % 32;
  const int64_t blocks = cols / kScaleBlock, work = rows * blocks;
  for (int64_t w0 = first; w0 < work; w0 += kBatch * warps) {  // warp-uniform: w0 is the warp's
    float v[kBatch][4];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int64_t w = w0 + j * warps, r = w / blocks, b = w % blocks;
      if (w < work) load4(src + r * cols + b * kScaleBlock + lane * 4, v[j]);
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int64_t w = w0 + j * warps, r = w / blocks, b = w % blocks;
      if (w >= work) break;
      float amax =
          fmaxf(fmaxf(fabsf(v[j][0]), fabsf(v[j][1])), fmaxf(fabsf(v[j][2]), fabsf(v[j][3])));
      const float scale = fp8_scale_from_amax(group_max<32>(amax));
      const float inv = e4m3_inverse(scale);
      uint32_t packed = 0;
#pragma unroll
      for (int e = 0; e < 4; ++e) packed |= uint32_t(to_e4m3(v[j][e], scale, inv)) << (8 * e);
      const int64_t at = r * cols + b * kScaleBlock + lane * 4;
      if constexpr (sizeof(Code) == 1)
        *reinterpret_cast<uint32_t*>(codes + at) = packed;
      else
        *reinterpret_cast<uint2*>(codes + at) =
            make_uint2(e4m3x2_to_f16x2(packed), e4m3x2_to_f16x2(packed >> 16));
      if (lane == 0) scales[r * blocks + b] = scale;
    }
  }
}

// Every warp of the grid joins.
template <class T, class Code>
__device__ void quantize_rows_1x128(const T* src, int64_t rows, int64_t cols, Code* codes,
                                    float* scales) {
  quantize_rows_1x128(src, rows, cols, codes, scales,
                      int64_t(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32,
                      int64_t(gridDim.x) * (kThreads / 32));
}

}  // namespace moe::mega::kernels
