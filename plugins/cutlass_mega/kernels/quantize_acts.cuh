// cutlass_mega, 4-bit weights with e4m3 activations (kernels/config.cuh ActQuant): the hidden
// states and the intermediate quantised inside the fused kernel by the reference's rules
// (docs/design.md §3.2: core/src/sdk/formats.cpp fake_quant_mxfp8 and fake_quant_fp8; scales and
// codes from common_cuda's e4m3 helpers), kept as bf16 values the bf16 mma reads as they are:
// mxfp8's quantised values (a code times a power of two), or per tensor each code's value (its
// scale multiplied in the GEMM's epilogue). Both are exact in bf16.
#pragma once

#include "kernels/act_codes.cuh"
#include "kernels/config.cuh"
#include "kernels/quantize.cuh"

namespace moe::mega::kernels {

// The maximum of every thread's `v` over the CTA (all kThreads threads call it), in every
// thread: common_cuda's block_amax, after a barrier so that `red` (kThreads / 32 floats of shared
// memory) may serve calls one after another.
__device__ __forceinline__ float cta_max(float v, float* red) {
  __syncthreads();  // an earlier call's readers of red are done
  return gpu::kernels::block_amax(v, red);
}

// The largest |x| of this CTA's share of n bf16 values (n % 8 == 0, 16-byte aligned): the grid
// strides over 16-byte vectors.
__device__ __forceinline__ float bf16_amax_share(const uint16_t* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n / 8;
       i += int64_t(gridDim.x) * kThreads) {
    const uint4 u = *reinterpret_cast<const uint4*>(x + 8 * i);
    const uint32_t words[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j)
      m = fmaxf(m, fmaxf(fabsf(__uint_as_float(words[j] << 16)),
                         fabsf(__uint_as_float(words[j] & 0xffff0000u))));
  }
  return m;
}

// The maximum over the grid's per-CTA maxima parts[0, gridDim.x), in every thread of the CTA.
__device__ __forceinline__ float grid_max(const float* parts, float* red) {
  float m = 0.0f;
  for (int i = threadIdx.x; i < int(gridDim.x); i += kThreads) m = fmaxf(m, __ldcg(parts + i));
  return cta_max(m, red);
}

// The hidden states [T, H] (H % 128 == 0) quantised into xa as the mode says: mxfp8 (per 32
// channels of a token: 8 lanes of 4 channels, a warp-uniform loop since a warp covers 128
// channels of one token), or e4m3 with `scale` (each code's value). Every thread of the grid
// joins.
__device__ __forceinline__ void quantize_hidden(const Params& p, int mode, float scale) {
  const int64_t vectors = int64_t(p.tokens) * p.hidden_dim / 4;
  const float inv = gpu::kernels::e4m3_inverse(scale);
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < vectors;
       i += int64_t(gridDim.x) * kThreads) {
    const uint2 u = *reinterpret_cast<const uint2*>(p.hidden + 4 * i);
    const float v[4] = {__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u),
                        __uint_as_float(u.y << 16), __uint_as_float(u.y & 0xffff0000u)};
    uint16_t q[4];
    if (mode == kActMxfp8) {
      const float amax = gpu::kernels::group_max<kMxBlock / 4>(
          fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3]))));
      const int k = mx_scale_exponent(amax);
#pragma unroll
      for (int e = 0; e < 4; ++e) q[e] = mx_quantised_bf16(v[e], k);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) q[e] = e4m3_value_bf16(gpu::kernels::to_e4m3(v[e], scale, inv));
    }
    *reinterpret_cast<uint2*>(p.xa + 4 * i) =
        make_uint2(uint32_t(q[0]) | uint32_t(q[1]) << 16, uint32_t(q[2]) | uint32_t(q[3]) << 16);
  }
}

// kActFp8Dynamic: the intermediate's rows [0, slots) (f32 in p.inter32, I % 128 == 0) as codes'
// values in p.inter, rows before `shared_first` (the routed experts') with `routed`, the rest (the
// shared expert's virtual experts) with `shared`. Every thread of the grid joins.
__device__ __forceinline__ void quantize_intermediate(const Params& p, int slots, int shared_first,
                                                      float routed, float shared) {
  const int64_t I = p.inter_dim, vectors = int64_t(slots) * I / 4;
  const float inv_routed = gpu::kernels::e4m3_inverse(routed);
  const float inv_shared = gpu::kernels::e4m3_inverse(shared);
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < vectors;
       i += int64_t(gridDim.x) * kThreads) {
    const bool is_shared = i * 4 / I >= shared_first;
    const float scale = is_shared ? shared : routed, inv = is_shared ? inv_shared : inv_routed;
    const float4 v = *reinterpret_cast<const float4*>(p.inter32 + 4 * i);
    const uint16_t q0 = e4m3_value_bf16(gpu::kernels::to_e4m3(v.x, scale, inv));
    const uint16_t q1 = e4m3_value_bf16(gpu::kernels::to_e4m3(v.y, scale, inv));
    const uint16_t q2 = e4m3_value_bf16(gpu::kernels::to_e4m3(v.z, scale, inv));
    const uint16_t q3 = e4m3_value_bf16(gpu::kernels::to_e4m3(v.w, scale, inv));
    *reinterpret_cast<uint2*>(p.inter + 4 * i) =
        make_uint2(uint32_t(q0) | uint32_t(q1) << 16, uint32_t(q2) | uint32_t(q3) << 16);
  }
}

}  // namespace moe::mega::kernels
