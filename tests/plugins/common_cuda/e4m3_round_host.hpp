// Host builds of the quantisation kernels' e4m3 rounding (kernels/e4m3_round.cuh): the code of
// the exact x / scale, by multiplication with a division near midpoints (e4m3_round) and by
// division alone (e4m3_round_exact); and the quantisation scale's division by 448
// (kernels/exact_math.cuh div448_rn).
#pragma once

#include <cstdint>
#include <cstring>

namespace moe::gpu::test {

uint8_t e4m3_round(float x, float scale);
uint8_t e4m3_round_exact(float x, float scale);
float div448(float a);

// A float's bits and back (the CPU tests' inputs are bit patterns).
inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace moe::gpu::test
