// Launcher of the weight-only grouped GEMM: the format's translation unit
// (wo_gemm_launch_<format>.cu, each instantiating wo_gemm_launch.cuh for its weights).
#include "kernels/sm90_wo_grouped_gemm.cuh"
#include "wo_gemm_launch.hpp"

namespace moe::gpu::detail {

int wo_max_groups() {
  return kernels::wo::kMaxGroups;
}

WoLaunchResult launch_wo_gemm(const moe_problem& prob, const WoGemmArgs& a, int tokens_per_tile,
                              cudaStream_t stream) noexcept {
  switch (a.weights) {
    case WoWeights::kMxfp4:
      return launch_wo_gemm_mxfp4(prob, a, tokens_per_tile, stream);
    case WoWeights::kNvfp4:
      return launch_wo_gemm_nvfp4(prob, a, tokens_per_tile, stream);
    case WoWeights::kMxfp8:
      return launch_wo_gemm_mxfp8(prob, a, tokens_per_tile, stream);
    case WoWeights::kBf16:
      return launch_wo_gemm_bf16(prob, a, tokens_per_tile, stream);
    case WoWeights::kE4m3:
      return launch_wo_gemm_e4m3(prob, a, tokens_per_tile, stream);
  }
  return {"launch", "unknown weight format"};
}

}  // namespace moe::gpu::detail
