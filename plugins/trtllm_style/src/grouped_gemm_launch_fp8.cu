// The fp8 grouped GEMM kernels (kernels/sm90_grouped_gemm.cuh) and their launchers.
#include "grouped_gemm_launch.cuh"

namespace moe::trtllm::detail {

size_t kernel_workspace_fp8(Kernel kernel, int groups, int sm_count) {
  return Launchers<kernels::Fp8>::workspace(kernel, groups, sm_count);
}

LaunchResult launch_fp8(Kernel kernel, const GemmCall& call,
                        const kernels::FusedActivation& act) noexcept {
  return Launchers<kernels::Fp8>::launch(kernel, call, act);
}

}  // namespace moe::trtllm::detail
