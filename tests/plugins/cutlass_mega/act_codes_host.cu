// cutlass_mega's e4m3 activation codes (kernels/act_codes.cuh) compiled for the host, so a CPU test
// holds them against the reference's quantisers.
#include "act_codes_host.hpp"
#include "kernels/act_codes.cuh"

namespace moe::mega::test {

uint16_t e4m3_value(uint8_t code, int k) {
  return kernels::e4m3_value_bf16(code, k);
}

int mx_exponent(float amax) {
  return kernels::mx_scale_exponent(amax);
}

uint16_t mx_quantised(float v, int k) {
  return kernels::mx_quantised_bf16(v, k);
}

}  // namespace moe::mega::test
