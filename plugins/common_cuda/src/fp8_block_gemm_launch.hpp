// The boundary between the nvcc-compiled launchers of the fp8 block GEMMs
// (fp8_block_gemm_launch.cu) and the host code that checks and reports (fp8_block_gemm.cpp):
// plain types only, no exceptions, no fmt.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "moe_cuda/fp8_block_gemm.hpp"

namespace moe::gpu::detail {

struct BlockGemmResult {
  const char* stage = nullptr;    // what failed ("setup", "can_implement", ...), nullptr if ok
  const char* message = nullptr;  // cudaGetErrorString / cutlassGetStatusString
};

size_t fp8_block_kernel_workspace(Fp8BlockTiles tiles, bool f32_out, int groups, int sm_count);

BlockGemmResult launch_fp8_block_gemm(Fp8BlockTiles tiles, const Fp8BlockGemmArgs& args,
                                      cudaStream_t stream) noexcept;

}  // namespace moe::gpu::detail
