// The boundary between the nvcc-compiled GEMM launchers (grouped_gemm_launch.cu) and the host
// code that checks and reports (grouped_gemm.cpp): plain types only, no exceptions, no fmt.
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

// One grouped GEMM: out[r, :] = rows[r, :K] * weights[g][N, K]^T for the rows of each group g.
struct GemmCall {
  int groups = 0;
  const int64_t* offsets = nullptr;  // [groups + 1], device
  int n = 0, k = 0;
  const void* rows = nullptr;            // [R, K] bf16
  const void* const* weights = nullptr;  // [groups] -> [N, K] bf16
  void* out = nullptr;                   // [R, N] bf16, or [R, out_ld] with the activation
  void* workspace = nullptr;
  int sm_count = 0;
  cudaStream_t stream = nullptr;
};

enum class Kernel { kTokens, kWide, kWeights, kTokensAct, kWeightsAct };

size_t kernel_workspace(Kernel kernel, int groups, int sm_count);

// `act` is read by the two *Act kernels only.
LaunchResult launch(Kernel kernel, const GemmCall& call,
                    const kernels::FusedActivation& act) noexcept;

}  // namespace moe::trtllm::detail
