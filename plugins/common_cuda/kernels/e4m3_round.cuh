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
// below 2^-6 (subnormal codes, rare in real data) and within the band, the exact path decides.
#pragma once

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace moe::gpu::kernels {

__host__ __device__ __forceinline__ uint32_t e4m3_float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

// |q| exactly halfway between two adjacent e4m3 values. Normal codes keep 3 mantissa bits, so
// a midpoint has the fourth set and nothing below it; subnormal codes (below 2^-6) step by 2^-9,
// so midpoints are odd multiples of 2^-10.
__host__ __device__ __forceinline__ bool on_e4m3_midpoint(float q) {
  const float a = fabsf(q);
  if (a >= 0x1p-6f) return (e4m3_float_bits(a) & 0xfffffu) == 0x80000u;
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

// The same code by multiplication where that is safe (see the top), `inv` = fp32(1 / scale)
// correctly rounded (e4m3_inverse).
__host__ __device__ __forceinline__ uint8_t to_e4m3(float x, float scale, float inv) {
  const float q = x * inv;
  const uint32_t bits = e4m3_float_bits(q) & 0x7fffffffu;
  const int32_t from_midpoint = int32_t(bits & 0xfffffu) - 0x80000;
  // Zero (x = 0: the code of +-0), NaN and infinity (their low bits are far from 0x80000) take
  // the product as it is.
  if (bits == 0 || (bits >= 0x3c800000u /* 2^-6 */ && (from_midpoint > 3 || from_midpoint < -3)))
    return e4m3_code(q);
  return to_e4m3_exact(x, scale);
}

__host__ __device__ __forceinline__ float e4m3_inverse(float scale) {
#ifdef __CUDA_ARCH__
  return __frcp_rn(scale);
#else
  return 1.0f / scale;
#endif
}

}  // namespace moe::gpu::kernels
