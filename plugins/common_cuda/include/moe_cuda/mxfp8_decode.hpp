// mxfp8 weights in the Hopper weight-only layout (moe_cuda/mxfp8_chunks.hpp): the integer steps
// that turn the prepared e4m3 codes and ue8m0 scale codes into bf16 operands. Plain C++, also
// compiled for the device, so the kernel and the host tests run the very same arithmetic.
//
// A pair of codes sits in bytes 0 and 2 of a word (the other pair of the word in bytes 1 and 3,
// after a shift by 8). Masked to 0x00ff00ff, each code's seven magnitude bits move to bf16 bits
// 4-10 (the low four exponent bits and the three high mantissa bits) and its sign to bit 15: the
// bf16 number is the e4m3 value times 2^-120 (e4m3's subnormals land on bf16 subnormals, exactly).
// One bf16 multiply by the block's scale times 2^120 then gives value x scale exactly (at most 4
// significant bits): the accumulator needs nothing taken back.
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

// The bf16 pair of the codes in bytes 0 and 2 of `v` (other bits ignored), value x 2^-120 each.
MOE_MX8_HD uint32_t mx8_placed_pair(uint32_t v) {
  v &= 0x00ff00ffu;
  return ((v << 4) & 0x07f007f0u) | ((v << 8) & 0x80008000u);
}

// The scale code as a bf16 pair (both halves alike), scale x 2^120: exponent field x + 120.
MOE_MX8_HD uint32_t mx8_scale_pair(uint32_t code) {
  return code * 0x00800080u + 0x3C003C00u;
}

}  // namespace moe::gpu

#undef MOE_MX8_HD
