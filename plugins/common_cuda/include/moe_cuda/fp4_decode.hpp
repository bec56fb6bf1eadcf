// The 4-bit weights of the Hopper fp4 layout (docs/design.md §13): the integer steps that turn the
// prepared codes and scale codes into bf16 operands. Plain C++, also compiled for the device, so
// the kernels and the host tests run the very same arithmetic.
//
// A 32-bit word of prepared codes holds 8 e2m1 codes, the two elements of each of four outputs k
// (a bf16 pair: the low element in bits 0-15, the high one in the same places of bits 16-31). An
// output is placed when each code's magnitude bits sit at bf16 bits 6-8 (the two low exponent bits
// and the first mantissa bit) and its sign at bit 15: the bf16 number is the e2m1 value times
// 2^-126 (e2m1's own subnormals, 0 and 0.5, land on bf16 subnormals, which the bf16 multiply
// honours). The packer puts each code's bits where its output's cut (fp4_placed_pair) moves them
// there, and the cuts are chosen for the consumer threads' integer pipe, which bounds a decode
// kernel (8 codes a word, each weight used once): 7 logic or shift instructions a word and 3
// integer multiplies, which run on the other (FMA) pipe, where nibble-aligned codes took 9 and 4.
// One bf16 multiply by the block's scale times 2^kFoldExp then gives value x scale x
// 2^(kFoldExp - 126) exactly (at most 5 significant bits), and the f32 accumulator is multiplied
// back by 2^(126 - kFoldExp) (times nvfp4's scale_2) once per item.
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

// Where output k's low element keeps its code in a word: the bits of the magnitude's m, e0 and e1
// (e2m1 bits 0-2) and of the sign (bit 3); the high element's are 16 above.
//   0: 6, 7, 8, 15     placed already: a mask
//   1: 3, 4, 5, 12     the word times 8, a mask
//   2: 0, 1, 2, 14     a mask, times 2^6 + 2^1 (magnitude up 6, sign up 1), a mask
//   3: 9, 10, 11, 13   the word shifted right by 3, a mask, times 1 + 2^5, a mask
// The two shifted copies a multiply adds never share a bit, so nothing carries (the host test
// checks every code of every output).
constexpr int kFp4CodeBits[4][4] = {{6, 7, 8, 15}, {3, 4, 5, 12}, {0, 1, 2, 14}, {9, 10, 11, 13}};
constexpr uint32_t kFp4Placed = 0x81C081C0u;  // bf16 bits 6-8 and 15 of both halves

// The bf16 pair of output k (0..3) of a prepared word, value x 2^-126 each.
MOE_FP4_HD uint32_t fp4_placed_pair(uint32_t word, int k) {
  if (k == 0) return word & kFp4Placed;
  if (k == 1) return (word * 8u) & kFp4Placed;
  if (k == 2) return ((word & 0x40074007u) * 0x42u) & kFp4Placed;
  return (((word >> 3) & 0x05C005C0u) * 0x21u) & kFp4Placed;
}

// The scale code as a bf16 pair (both halves alike), scale x 2^kFoldExp, from the code alone in
// the word's low byte: one multiply-add (the code times 2^7 + 2^23 puts it in both halves'
// exponent fields), which runs on the FMA pipe beside the integer pipe's cuts.
MOE_FP4_HD uint32_t mx_scale_pair(uint32_t code) {
  return code * 0x00800080u + 0x32003200u;  // exponent field x + 100
}
MOE_FP4_HD uint32_t nv_scale_pair(uint32_t code) {
  return code * 0x00100010u + 0x6D006D00u;  // exponent field e + 227, mantissa f
}

}  // namespace moe::gpu

#undef MOE_FP4_HD
