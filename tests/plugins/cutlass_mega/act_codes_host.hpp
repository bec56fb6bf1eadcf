// Host builds of cutlass_mega's e4m3 activation codes (kernels/act_codes.cuh), for a CPU test.
#pragma once

#include <cstdint>

namespace moe::mega::test {

uint16_t e4m3_value(uint8_t code, int k);  // bf16 bits of the code's value times 2^k
int mx_exponent(float amax);               // mxfp8's scale exponent for a block's amax
uint16_t mx_quantised(float v, int k);     // bf16 bits of v's mxfp8 value in a block of exponent k

}  // namespace moe::mega::test
