// cutlass_mega's combine (docs/design.md §13, step 4): an output vector from its token's
// per-slot GEMM2 results, for the combine phase of kernels/fused_moe.cuh.
#pragma once

#include <cstdint>

#include "kernels/config.cuh"

namespace moe::mega::kernels {

// The combine of output vector i (4 consecutive channels of a token, [T, H / 4]): the token's
// slots summed in slot order (each slot's K parts in part order), bf16 once. Its slots go in
// groups of kGroup: every load of a group (the slots' weights, then each K part's results) goes
// out before the first is added, so a vector costs a few L2 round trips instead of two per slot
// (~2.4 us at T = 1 before: bench/NOTES.md, session 40). Results are read from L2 (__ldcg: other
// SMs stored them).
__device__ __forceinline__ void combine_output_vector(const Params& p, const int16_t* slot_pos,
                                                      int split2, int64_t i) {
  constexpr int kGroup = 8;
  const int64_t H = p.hidden_dim, y_part_stride = int64_t(p.tokens) * p.slot_width * H;
  const int64_t t = i * 4 / H, h = i * 4 % H;
  auto result = [&](int part, int at) {
    return __ldcg(
        reinterpret_cast<const float4*>(p.y + part * y_part_stride + int64_t(at) * H + h));
  };
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int j0 = 0; j0 < p.slot_width; j0 += kGroup) {  // routed slots, then the virtual experts'
    int at[kGroup];
    float w[kGroup];
    float4 r[kGroup];
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      const int j = j0 + g;
      at[g] = j < p.slot_width ? slot_pos[t * p.slot_width + j] : -1;
      // A routed column's weight, a sink chunk's column's (its gamma), or the shared expert's 1.
      const int src = j < p.top_k ? j : p.col_src[min(j - p.top_k, kMaxVirtual - 1)];
      w[g] = at[g] >= 0 && src >= 0 ? p.weights[t * p.width + src] : 1.0f;
      r[g] = at[g] >= 0 ? result(0, at[g]) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    for (int part = 1; part < split2; ++part) {
      float4 more[kGroup];
#pragma unroll
      for (int g = 0; g < kGroup; ++g)
        more[g] = at[g] >= 0 ? result(part, at[g]) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int g = 0; g < kGroup; ++g)
        r[g] = make_float4(r[g].x + more[g].x, r[g].y + more[g].y, r[g].z + more[g].z,
                           r[g].w + more[g].w);
    }
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      if (at[g] < 0) continue;
      v.x += w[g] * r[g].x;
      v.y += w[g] * r[g].y;
      v.z += w[g] * r[g].z;
      v.w += w[g] * r[g].w;
    }
  }
  const int64_t o = i * 4;
  if (p.accumulate) {  // the caller's old values
    v.x += gpu::kernels::bf16_to_float(p.out[o]);
    v.y += gpu::kernels::bf16_to_float(p.out[o + 1]);
    v.z += gpu::kernels::bf16_to_float(p.out[o + 2]);
    v.w += gpu::kernels::bf16_to_float(p.out[o + 3]);
  }
  p.out[o] = float_to_bf16_bits(v.x);
  p.out[o + 1] = float_to_bf16_bits(v.y);
  p.out[o + 2] = float_to_bf16_bits(v.z);
  p.out[o + 3] = float_to_bf16_bits(v.w);
}

}  // namespace moe::mega::kernels
