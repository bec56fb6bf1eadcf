// Host side of the grouped bf16 GEMMs (kernels/sm90_bf16_grouped_gemm.cuh): sizes, checks and
// launch. Every pointer is device memory; nothing is read back to the host, so a call can be
// captured in a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace moe::trtllm {

enum class GemmTiles {
  kTokens,   // 128 tokens x 128 features per tile: many tokens per expert
  kWeights,  // swap AB, 128 features x 32 tokens per tile: few tokens per expert
};

const char* gemm_tiles_name(GemmTiles t);

// Workspace for one grouped GEMM of `groups` groups (group arrays + CUTLASS's own).
size_t grouped_gemm_workspace_bytes(GemmTiles tiles, int groups, int sm_count);

// out[r, :N] = rows[r, :K] * weights[g][N, K]^T for the rows r of each group g, the groups'
// rows given by offsets [groups + 1] (device). N and K multiples of 8.
void run_grouped_gemm(GemmTiles tiles, int groups, const int64_t* offsets, int n, int k,
                      const void* rows, const void* const* weights, void* out, void* workspace,
                      size_t workspace_bytes, int sm_count, cudaStream_t stream);

}  // namespace moe::trtllm
