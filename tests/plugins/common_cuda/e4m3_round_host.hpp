// Host builds of the quantisation kernels' e4m3 rounding (kernels/e4m3_round.cuh): the code of
// the exact x / scale, by multiplication with a division near midpoints (e4m3_round) and by
// division alone (e4m3_round_exact).
#pragma once

#include <cstdint>

namespace moe::gpu::test {

uint8_t e4m3_round(float x, float scale);
uint8_t e4m3_round_exact(float x, float scale);

}  // namespace moe::gpu::test
