// The bf16 grouped GEMM kernels (kernels/sm90_grouped_gemm.cuh) and their launchers.
#include "grouped_gemm_launch.cuh"

namespace moe::trtllm::detail {

size_t kernel_workspace_bf16(Kernel kernel, int groups, int sm_count) {
  return Launchers<kernels::Bf16>::workspace(kernel, groups, sm_count);
}

LaunchResult launch_bf16(Kernel kernel, const GemmCall& call,
                         const kernels::FusedActivation& act) noexcept {
  return Launchers<kernels::Bf16>::launch(kernel, call, act);
}

}  // namespace moe::trtllm::detail
