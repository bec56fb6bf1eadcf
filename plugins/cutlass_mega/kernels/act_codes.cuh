// cutlass_mega, e4m3 activations on 4-bit weights (kernels/quantize_acts.cuh): one value's code
// and the bf16 value the kernel keeps for it, on the host and the device alike, so a CPU test
// holds them against the reference's quantisers (tests/plugins/cutlass_mega/act_codes_test.cpp).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/e4m3_round.cuh"

namespace moe::mega::kernels {

// The bf16 bits of e4m3 code `code` times 2^k (mxfp8; k = 0: the code's value): exact, as a
// code has 4 significant bits and bf16 the exponent range of f32.
__host__ __device__ __forceinline__ uint16_t e4m3_value_bf16(uint8_t code, int k = 0) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(code), __NV_E4M3);
  const __nv_bfloat16 b = __float2bfloat16_rn(ldexpf(__half2float(__half(h)), k));
  uint16_t bits;
  memcpy(&bits, &b, sizeof bits);
  return bits;
}

// mxfp8's scale exponent for a block of amax `amax`: the smallest k with 2^k >= max(amax, 1e-10)
// / 448, clamped to ue8m0's [-127, 127] (core/src/sdk/formats.cpp mx_scale_code, in double as
// it is). The floor keeps k >= -42, so every quantised value is a normal bf16.
__host__ __device__ __forceinline__ int mx_scale_exponent(float amax) {
  const double x = fmax(double(amax), 1e-10) / 448.0;
  int e = 0;
  const double fraction = frexp(x, &e);  // x = fraction x 2^e, fraction in [0.5, 1)
  const int k = fraction == 0.5 ? e - 1 : e;
  return k < -127 ? -127 : k > 127 ? 127 : k;
}

// mxfp8 of one value whose block's amax gave exponent k: bf16 bits of its quantised value. The
// quotient by a power of two is exact, so the code is rounded once, as the reference's.
__host__ __device__ __forceinline__ uint16_t mx_quantised_bf16(float v, int k) {
  return e4m3_value_bf16(gpu::kernels::e4m3_code(ldexpf(v, -k)), k);
}

}  // namespace moe::mega::kernels
