// The weight-only grouped GEMM's e4m3 instances, fp8_tensor weights on e4m3 rows
// (wo_gemm_launch.cuh).
#include "wo_gemm_launch.cuh"

namespace moe::gpu::detail {

WoLaunchResult launch_wo_gemm_e4m3(const moe_problem& prob, const WoGemmArgs& a,
                                   int tokens_per_tile, cudaStream_t stream) noexcept {
  return wo_launch::launch_width<kernels::wo::kE4m3>(prob, a, tokens_per_tile, stream);
}

}  // namespace moe::gpu::detail
