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

// mxfp8's scale exponent for a block of amax `amax` >= 0: the smallest k with
// 2^k >= max(amax, 1e-10) / 448 (core/src/sdk/formats.cpp mx_scale_code), from amax's bits: with
// amax = m x 2^E (m in [1, 2)) and 448 = 1.75 x 2^8, amax <= 448 x 2^k holds from
// k = E - 8 + (m > 1.75). The floor is k = -42 (1e-10 / 448 lies in (2^-43, 2^-42]), which also
// covers zero and subnormal amax; the largest float gives 120, inside ue8m0's [-127, 127]. So
// every quantised value is a normal bf16.
__host__ __device__ __forceinline__ int mx_scale_exponent(float amax) {
  uint32_t bits;
  memcpy(&bits, &amax, sizeof bits);
  const int k = int((bits >> 23) & 0xffu) - 127 - 8 + ((bits & 0x7fffffu) > 0x600000u ? 1 : 0);
  return k < -42 ? -42 : k;
}

// mxfp8 of one value whose block's amax gave exponent k: bf16 bits of its quantised value. The
// quotient by a power of two is exact, so the code is rounded once, as the reference's.
__host__ __device__ __forceinline__ uint16_t mx_quantised_bf16(float v, int k) {
  return e4m3_value_bf16(gpu::kernels::e4m3_code(ldexpf(v, -k)), k);
}

}  // namespace moe::mega::kernels
