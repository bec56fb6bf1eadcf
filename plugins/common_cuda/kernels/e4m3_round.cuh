// e4m3 of the exact quotient x / scale, rounded once (nearest, ties to even, saturating to
// +-448, NaN -> 0x7f): the rule of core/src/sdk/formats.cpp's activation quantisation, on the
// host and the device alike (tests/plugins/common_cuda/e4m3_round_test.cpp checks it on the CPU
// against the reference for every bf16 input).
//
// to_e4m3_exact divides: q = fp32(x / scale) is correctly rounded, and only when q sits exactly on
// an e4m3 midpoint does the exact residual x - q * scale (one fma) say on which side the exact
// quotient lies. The IEEE division bounds the quantisation kernels (~2-2.8 TB/s on an H200,
// bench/NOTES.md), so to_e4m3 multiplies by inv = fp32(1 / scale) instead: q' = fp32(x * inv) is
// within 2 ulps of the exact quotient (two roundings of 2^-24 each), so wherever q' lies more than
// 3 ulps from every e4m3 midpoint the exact quotient rounds to q''s code. Midpoints of normal
// codes are the floats whose 20 low bits are 0x80000 (three mantissa bits kept, the fourth set);
// below 2^-6 (subnormal codes) they are the odd multiples of 2^-10, and q' decides where it lies
// more than |q'| 2^-20 (at least 8 ulps) from the nearest. Within the bands the exact path
// decides. (Subnormal codes are not rare: a gated activation's products put about one value in
// 800 below 2^-6 of its block's scale, so most warps of a GEMM epilogue meet one; bench/NOTES.md
// session 30.)
#pragma once

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "exact_math.cuh"

namespace moe::gpu::kernels {

// |q| exactly halfway between two adjacent e4m3 values. Normal codes keep 3 mantissa bits, so
// a midpoint has the fourth set and nothing below it; subnormal codes (below 2^-6) step by 2^-9,
// so midpoints are odd multiples of 2^-10.
__host__ __device__ __forceinline__ bool on_e4m3_midpoint(float q) {
  const float a = fabsf(q);
  if (a >= 0x1p-6f) return (float_bits(a) & 0xfffffu) == 0x80000u;
  const float t = a * 1024.0f;  // exact: a power-of-two scaling
  return t == truncf(t) && fmodf(t, 2.0f) == 1.0f;
}

__host__ __device__ __forceinline__ uint8_t e4m3_code(float q) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
}

// By division (scale > 0): a one-ulp step off a midpoint toward the exact quotient lets the
// conversion's round-to-nearest-even pick the code the exact quotient rounds to.
__host__ __device__ __forceinline__ uint8_t to_e4m3_exact(float x, float scale) {
  float q = x / scale;
  if (on_e4m3_midpoint(q)) {
    const float residual = fmaf(-q, scale, x);
    if (residual != 0.0f) q = nextafterf(q, residual > 0.0f ? INFINITY : -INFINITY);
  }
  return e4m3_code(q);
}

// Whether the product q = x * inv is safe to round as it is (see the top). Zero (x = 0: the
// code of +-0), NaN and infinity (their low bits are far from 0x80000) are.
__host__ __device__ __forceinline__ bool e4m3_product_decides(float q) {
  const uint32_t bits = float_bits(q) & 0x7fffffffu;
  const int32_t from_midpoint = int32_t(bits & 0xfffffu) - 0x80000;
  // Below 2^-6: |q| in units of 2^-10 (exact), and its nearest integer n (at most 16); only an
  // odd n is a midpoint. (n is clamped before the conversion: for a large, infinite or NaN q,
  // which the normal rule decides, a float-to-int conversion out of range is undefined.)
  const float t = fabsf(q) * 1024.0f, n = rintf(t);
  const bool subnormal_decides =
      ((int32_t(fminf(n, 16.0f)) & 1) == 0) | (fabsf(t - n) > t * 0x1p-20f);
  const bool normal_decides = (from_midpoint > 3) | (from_midpoint < -3);
  return (bits == 0) | (bits >= 0x3c800000u /* 2^-6 */ ? normal_decides : subnormal_decides);
}

// The same code by multiplication where that is safe, `inv` = fp32(1 / scale) correctly rounded
// (e4m3_inverse).
__host__ __device__ __forceinline__ uint8_t to_e4m3(float x, float scale, float inv) {
  const float q = x * inv;
  if (e4m3_product_decides(q)) return e4m3_code(q);
  return to_e4m3_exact(x, scale);
}

// to_e4m3 of x0 (low byte) and x1 (high byte) without a branch, for a batch: the products'
// codes in one conversion, and `redo` set where either product does not decide its code (then
// the caller takes to_e4m3 for the pair instead).
__device__ __forceinline__ uint16_t to_e4m3x2_product(float x0, float x1, float inv, bool& redo) {
  const float q0 = __fmul_rn(x0, inv), q1 = __fmul_rn(x1, inv);
  // Bitwise, not ||: a short circuit is a branch, and a branch splits the batch.
  redo |= !e4m3_product_decides(q0) | !e4m3_product_decides(q1);
  return __nv_cvt_float2_to_fp8x2(make_float2(q0, q1), __NV_SATFINITE, __NV_E4M3);
}

__host__ __device__ __forceinline__ float e4m3_inverse(float scale) {
#ifdef __CUDA_ARCH__
  return __frcp_rn(scale);
#else
  return 1.0f / scale;
#endif
}

}  // namespace moe::gpu::kernels
