// mxfp8 weights in the Hopper weight-only layout (moe_cuda/mxfp8_chunks.hpp): the integer steps
// that turn e4m3 codes into bf16 operands, split between the packer (once, at prepare) and the
// kernel (every K step). Plain C++, also compiled for the device, so the kernel and the host tests
// run the very same arithmetic.
//
// Placed, a code's seven magnitude bits sit at bf16 bits 4-10 (the low four exponent bits and the
// three high mantissa bits) and its sign at bit 15 (mask 0x87f0): the bf16 number is the e4m3
// value times 2^-120 (e4m3's subnormals land on bf16 subnormals, exactly). A prepared word holds
// the two bf16 pairs of a K step's A fragment that share a thread and a row: the first pair placed
// as it is used (one mask away), the second in the other 16 bits of each half with the nibbles of
// each byte swapped (a shift each way and a mask away). One bf16 multiply by the block's scale
// times 2^120 then gives value x scale exactly (at most 4 significant bits): the accumulator
// needs nothing taken back.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define MOE_MX8_HD __host__ __device__ __forceinline__
#else
#define MOE_MX8_HD inline
#endif

namespace moe::gpu {

// The scale code is the ue8m0 byte x (scale 2^(x - 127)); the multiplier 2^(x - 7) must be a
// normal bf16 and every product exact: x in [kMx8MinCode, kMx8MaxCode], scales 2^-124 to 2^7 (any
// real checkpoint's; others are refused at prepare, naming the value).
constexpr int kMx8MinCode = 3;
constexpr int kMx8MaxCode = 134;

// One code placed: value x 2^-120 as bf16 bits.
MOE_MX8_HD uint32_t mx8_placed(uint32_t code) {
  return ((code & 0x7fu) << 4) | ((code & 0x80u) << 8);
}
// The nibbles of each byte of a 16-bit pattern swapped: 0x87f0's bits go to 0x780f.
MOE_MX8_HD uint32_t mx8_nibble_swap16(uint32_t x) {
  return ((x << 4) & 0xf0f0u) | ((x >> 4) & 0x0f0fu);
}
// The prepared word of the codes of K 2q, 2q + 1 (the first pair of a thread's row in a K step:
// low, high half) and K 2q + 8, 2q + 9 (the second pair).
MOE_MX8_HD uint32_t mx8_word(uint32_t k0, uint32_t k1, uint32_t k8, uint32_t k9) {
  return mx8_placed(k0) | (mx8_placed(k1) << 16) | mx8_nibble_swap16(mx8_placed(k8)) |
         (mx8_nibble_swap16(mx8_placed(k9)) << 16);
}
// The word's first and second bf16 pairs, as the kernel cuts them out.
MOE_MX8_HD uint32_t mx8_first_pair(uint32_t w) {
  return w & 0x87f087f0u;
}
MOE_MX8_HD uint32_t mx8_second_pair(uint32_t w) {
  return ((w << 4) & 0x80f080f0u) | ((w >> 4) & 0x07000700u);
}
// The scale code as a bf16 pair (both halves alike), scale x 2^120: exponent field x + 120; from
// the code alone in the low byte (one byte permute in the kernel), one multiply-add, which runs on
// the FMA pipe beside the integer pipe's cuts (as moe_cuda/fp4_decode.hpp's).
MOE_MX8_HD uint32_t mx8_scale_pair(uint32_t code) {
  return code * 0x00800080u + 0x3C003C00u;
}
}  // namespace moe::gpu

#undef MOE_MX8_HD
