// The quantisation kernels' e4m3 rounding (kernels/e4m3_round.cuh), compiled for the host so a
// CPU test can hold it against the reference for every input it cares to try.
#include "e4m3_round_host.hpp"
#include "kernels/e4m3_round.cuh"
#include "kernels/exact_math.cuh"

namespace moe::gpu::test {

uint8_t e4m3_round(float x, float scale) {
  return kernels::to_e4m3(x, scale, kernels::e4m3_inverse(scale));
}

uint8_t e4m3_round_exact(float x, float scale) {
  return kernels::to_e4m3_exact(x, scale);
}

float div448(float a) {
  return kernels::div448_rn(a);
}

}  // namespace moe::gpu::test
