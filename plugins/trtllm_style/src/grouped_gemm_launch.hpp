// The boundary between the nvcc-compiled GEMM launchers (grouped_gemm_launch.cu) and the host
// code that checks and reports (grouped_gemm.cpp): plain types only, no exceptions, no fmt.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace moe::trtllm::detail {

struct LaunchResult {
  const char* stage = nullptr;    // what failed ("setup", "can_implement", ...), nullptr if ok
  const char* message = nullptr;  // cudaGetErrorString / cutlassGetStatusString
};

size_t token_tiles_workspace(int groups, int sm_count);
size_t weight_tiles_workspace(int groups, int sm_count);

LaunchResult launch_token_tiles(int groups, const int64_t* offsets, int n, int k, const void* rows,
                                const void* const* weights, void* out, void* workspace,
                                int sm_count, cudaStream_t stream) noexcept;
LaunchResult launch_weight_tiles(int groups, const int64_t* offsets, int n, int k, const void* rows,
                                 const void* const* weights, void* out, void* workspace,
                                 int sm_count, cudaStream_t stream) noexcept;

}  // namespace moe::trtllm::detail
