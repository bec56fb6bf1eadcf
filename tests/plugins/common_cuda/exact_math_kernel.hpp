// Test launchers for the branch-free exact forms of the GEMM epilogues (kernels/exact_math.cuh,
// activate_batch in kernels/activation.cuh) on a GPU, against the plain expressions they stand
// for.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace moe::gpu::test {

// Over every fp32 bit pattern: counts[0] the inputs rcp_rn_fast takes (no slow flag), counts[1]
// those of them whose value is not 1.0f / y's bits, counts[2] the inputs fp8_scale_from_amax
// (device) maps to other bits than float(max(amax, 1e-10) / 448.0) computed in double.
// `counts` is three device words, zeroed by the call.
cudaError_t count_exact_math_mismatches(unsigned long long* counts, cudaStream_t stream);

// out[i] = activate_batch<act, 16>'s value for (g[i], u[i]) and out[n + i] = activate()'s, for
// n inputs (a multiple of 16) under the activation `act` with `alpha` and `limit`.
cudaError_t activate_both_ways(int32_t act, float alpha, float limit, const float* g,
                               const float* u, float* out, int64_t n, cudaStream_t stream);

}  // namespace moe::gpu::test
