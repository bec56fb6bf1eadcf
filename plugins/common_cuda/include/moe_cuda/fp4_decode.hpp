// The 4-bit weights of the Hopper fp4 layout (docs/design.md §13): the integer steps that turn the
// prepared codes and scale codes into bf16 operands. Plain C++, also compiled for the device, so
// the kernels and the host tests run the very same arithmetic.
//
// A 32-bit word of prepared codes holds 8 e2m1 nibbles, arranged at prepare time so that each
// of four outputs k (a bf16 pair: the low element, then the high one) is cut out by one mask, one
// multiply and one mask: output k's low element sits at nibble k, its high element at nibble 4 + k
// (outputs 2 and 3 after the word is shifted right by 8). The multiply by 2^6 + 2^12 (2^2 + 2^8
// for the odd outputs) puts the nibble's magnitude bits at bf16 bits 6-8 (the two low exponent
// bits and the first mantissa bit) and its sign at bit 15: the bf16 number is the e2m1 value
// times 2^-126 (e2m1's own subnormals, 0 and 0.5, land on bf16 subnormals, which the bf16
// multiply honours). One bf16 multiply by the block's scale times 2^kFoldExp then gives
// value x scale x 2^(kFoldExp - 126) exactly (at most 5 significant bits), and the f32
// accumulator is multiplied back by 2^(126 - kFoldExp) (times nvfp4's scale_2) once per item.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define MOE_FP4_HD __host__ __device__ __forceinline__
#else
#define MOE_FP4_HD inline
#endif

namespace moe::gpu {

constexpr int kFp4FoldExp = 100;               // scales reach the bf16 multiply times 2^100
constexpr int kFp4Unfold = 126 - kFp4FoldExp;  // the accumulator's power of two back

// mxfp4: the scale code is the ue8m0 byte x (scale 2^(x - 127)). The multiplier 2^(x - 27) must
// be a finite bf16 and every product a normal one: x in [kMxMinCode, kMxMaxCode], scales 2^-99
// to 2^27 (any real checkpoint's; others are refused at prepare, naming the value).
constexpr int kMxMinCode = 28;
constexpr int kMxMaxCode = 154;
// nvfp4: an e4m3 block scale 2^e x (1 + f/8), e in [-9, 8] (subnormals normalised), is coded as
// (e + 9) x 8 + f; a zero scale zeroes its block's codes at prepare instead.
constexpr int kNvMinExp = -9;

// The bf16 pair of output k (0..3) of a prepared word, value x 2^-126 each.
MOE_FP4_HD uint32_t fp4_placed_pair(uint32_t word, int k) {
  const uint32_t w = k >= 2 ? word >> 8 : word;
  const bool odd = (k & 1) != 0;
  const uint32_t t = w & (odd ? 0x00F000F0u : 0x000F000Fu);
  return (t * (odd ? 0x104u : 0x1040u)) & 0x81C081C0u;
}

// The scale code as a bf16 pair (both halves alike), scale x 2^kFoldExp; the _of forms take the
// code already in both halves (0x00xx00xx: one byte permute in the kernels), one multiply-add.
MOE_FP4_HD uint32_t mx_scale_pair_of(uint32_t both_halves) {
  return both_halves * 0x80u + 0x32003200u;  // exponent field x + 100
}
MOE_FP4_HD uint32_t nv_scale_pair_of(uint32_t both_halves) {
  return both_halves * 0x10u + 0x6D006D00u;  // exponent field e + 227, mantissa f
}
MOE_FP4_HD uint32_t mx_scale_pair(uint32_t code) {
  return mx_scale_pair_of(code | (code << 16));
}
MOE_FP4_HD uint32_t nv_scale_pair(uint32_t code) {
  return nv_scale_pair_of(code | (code << 16));
}

}  // namespace moe::gpu

#undef MOE_FP4_HD
