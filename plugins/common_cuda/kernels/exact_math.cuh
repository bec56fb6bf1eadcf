// Branch-free forms of two correctly rounded fp32 operations the epilogues need, each giving the
// bits of the plain C++ expression (bench/NOTES.md, session 30):
//
// - rcp_rn_fast(y): 1.0f / y. CUDA's IEEE reciprocal is an approximation refined by one Newton
//   step in FMAs, guarded by a range test on y's exponent and a call to a slow path outside it.
//   The call is a branch, and the compiler schedules nothing across it: 32 sigmoids in a
//   row run one after another (~5000 cycles in the fused GEMM1 epilogue, measured). Here the
//   same approximation and the same Newton step (CUDA's own fast path, taken for the same
//   exponents) with the range test returned as a flag, so a caller computes a batch with no
//   branch and redoes the rare flagged inputs afterwards.
// - div448_rn(a): a / 448 correctly rounded, which is also float(double(a) / 448.0), the scale
//   of an e4m3 quantisation (moe::fp8_scale_from_amax) for a >= 1e-10: the double quotient would
//   have to land exactly on a float rounding boundary to round differently in two steps, and
//   a / 7 is either exact or has a binary expansion that repeats every three bits, so it never
//   comes within 2^-53 of one. By multiplication with 1/448 and one FMA correction of the
//   residual (exact in one FMA), where the double division is a call too. The host test checks
//   it against the double expression for every mantissa of two binades (the operations scale
//   with a's exponent while everything stays normal) and the range's ends.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace moe::gpu::kernels {

__host__ __device__ __forceinline__ uint32_t float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

// 1.0f / y, bit for bit, where `slow` comes back false; where it comes back true (y zero,
// subnormal, at or above 2^126, infinite or NaN) the value is not that and the caller must
// compute 1.0f / y itself.
__device__ __forceinline__ float rcp_rn_fast(float y, bool& slow) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(y));
  const float e = -__fmaf_rn(y, r, -1.0f);
  slow = ((float_bits(y) + 0x1800000u) & 0x7f800000u) <= 0x1ffffffu;
  return __fmaf_rn(r, e, r);
}

// a / 448 correctly rounded for finite a with |a| >= 2^-100 (the residual stays normal), and
// a * (1/448) (infinity or NaN as the division gives them) for infinite or NaN a.
__host__ __device__ __forceinline__ float div448_rn(float a) {
  constexpr float kInv = 1.0f / 448.0f;
#ifdef __CUDA_ARCH__
  const float q = __fmul_rn(a, kInv);
  const float r = __fmaf_rn(-q, 448.0f, a);
  const float fixed = __fmaf_rn(r, kInv, q);
#else
  const float q = a * kInv;
  const float r = std::fmaf(-q, 448.0f, a);
  const float fixed = std::fmaf(r, kInv, q);
#endif
  return fabsf(a) <= 3.4028234663852886e38f ? fixed : q;
}

}  // namespace moe::gpu::kernels
