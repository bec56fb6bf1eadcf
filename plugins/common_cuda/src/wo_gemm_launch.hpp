// The boundary between the nvcc-compiled launchers of the weight-only grouped GEMM
// (wo_gemm_launch*.cu) and the host code that checks and reports (wo_gemm.cpp): plain types only,
// no exceptions, no fmt.
#pragma once

#include <cuda_runtime_api.h>

#include "moe_cuda/wo_gemm.hpp"

namespace moe::gpu::detail {

struct WoLaunchResult {
  const char* stage = nullptr;    // what failed, nullptr if ok
  const char* message = nullptr;  // cudaGetErrorString or a description
};

int wo_max_groups();

// Whether a launch of `tokens_per_tile`-token tiles (not tall ones) pairs its CTAs: token tiles of
// 64 to 256 rows do where the weight tiles come in pairs; decode's 16- and 32-row tiles stream
// weights, which no pair shares.
inline bool wo_pairs_ctas(int tokens_per_tile, int n_tiles) {
  return tokens_per_tile >= 64 && n_tiles % 2 == 0;
}

WoLaunchResult launch_wo_gemm(const moe_problem& p, const WoGemmArgs& a, int tokens_per_tile,
                              cudaStream_t stream) noexcept;

// One per weight format, each in its own translation unit (wo_gemm_launch_<format>.cu).
WoLaunchResult launch_wo_gemm_mxfp4(const moe_problem& p, const WoGemmArgs& a, int tokens_per_tile,
                                    cudaStream_t stream) noexcept;
WoLaunchResult launch_wo_gemm_nvfp4(const moe_problem& p, const WoGemmArgs& a, int tokens_per_tile,
                                    cudaStream_t stream) noexcept;
WoLaunchResult launch_wo_gemm_mxfp8(const moe_problem& p, const WoGemmArgs& a, int tokens_per_tile,
                                    cudaStream_t stream) noexcept;
WoLaunchResult launch_wo_gemm_bf16(const moe_problem& p, const WoGemmArgs& a, int tokens_per_tile,
                                   cudaStream_t stream) noexcept;
WoLaunchResult launch_wo_gemm_e4m3(const moe_problem& p, const WoGemmArgs& a, int tokens_per_tile,
                                   cudaStream_t stream) noexcept;

}  // namespace moe::gpu::detail
