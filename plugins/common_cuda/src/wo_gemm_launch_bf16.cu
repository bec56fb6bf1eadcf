// The weight-only grouped GEMM's bf16 instances (wo_gemm_launch.cuh).
#include "wo_gemm_launch.cuh"

namespace moe::gpu::detail {

WoLaunchResult launch_wo_gemm_bf16(const moe_problem& prob, const WoGemmArgs& a,
                                   int tokens_per_tile, cudaStream_t stream) noexcept {
  return wo_launch::launch_width<kernels::wo::kBf16>(prob, a, tokens_per_tile, stream);
}

}  // namespace moe::gpu::detail
