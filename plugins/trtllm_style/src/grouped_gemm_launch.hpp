// The boundary between the nvcc-compiled GEMM launchers (grouped_gemm_launch_{bf16,fp8}.cu) and
// the host code that checks and reports (grouped_gemm.cpp): plain types only, no exceptions, no
// fmt.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/fused_activation.hpp"

namespace moe::trtllm::detail {

struct LaunchResult {
  const char* stage = nullptr;    // what failed ("setup", "can_implement", ...), nullptr if ok
  const char* message = nullptr;  // cudaGetErrorString / cutlassGetStatusString
};

// e4m3 only: alpha_g = (*act_shared for group shared_group, else *act) * weight[g].
struct Scales {
  const float* act = nullptr;         // device f32 [1]
  const float* act_shared = nullptr;  // device f32 [1], or null
  const float* weight = nullptr;      // device f32 [groups]
  int32_t shared_group = -1;
};

// One grouped GEMM: out[r, :] = alpha_g * rows[r, :K] * weights[g][N, K]^T for the rows of each
// group g (alpha_g = 1 for bf16).
struct GemmCall {
  int groups = 0;
  const int64_t* offsets = nullptr;  // [groups + 1], device
  int n = 0, k = 0;
  const void* rows = nullptr;            // [R, K] bf16 or e4m3
  const void* const* weights = nullptr;  // [groups] -> [N, K], the rows' type
  void* out = nullptr;  // [R, N] bf16, or [R, out_ld] with the activation (f32 for e4m3)
  void* workspace = nullptr;
  int sm_count = 0;
  cudaStream_t stream = nullptr;
  Scales scales;  // e4m3
};

enum class Kernel { kTokens, kWide, kWeights, kTokensAct, kWideAct, kWeightsAct };

// The kernels of each operand type, in separate translation units (compiled in parallel).
size_t kernel_workspace_bf16(Kernel kernel, int groups, int sm_count);
size_t kernel_workspace_fp8(Kernel kernel, int groups, int sm_count);

// `act` is read by the two *Act kernels only.
LaunchResult launch_bf16(Kernel kernel, const GemmCall& call,
                         const kernels::FusedActivation& act) noexcept;
LaunchResult launch_fp8(Kernel kernel, const GemmCall& call,
                        const kernels::FusedActivation& act) noexcept;

}  // namespace moe::trtllm::detail
