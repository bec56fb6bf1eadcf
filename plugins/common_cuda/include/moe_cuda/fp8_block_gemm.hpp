// Grouped e4m3 GEMMs with 1x128 activation and 128x128 weight block scales on CUTLASS's sm90
// blockwise-scaling mainloop (kernels/sm90_fp8_block_grouped_gemm.cuh), shared by the plugins
// that run fp8_block layers (deepgemm_style, trtllm_style). Every pointer is device memory;
// nothing is read back to the host, so a call can be captured in a CUDA graph. Needs CUTLASS:
// the library moe_cuda_fp8_block_gemm exists only in builds that found it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace moe::gpu {

enum class Fp8BlockTiles {
  kTokens,   // 128 tokens x 128 features per tile: many tokens per expert
  kWeights,  // swap AB, 128 features x 32 tokens per tile: few tokens per expert
  // kTokens' tiles in 1x2 clusters: CTA pairs on neighbouring N tiles of one row block, the row
  // tile multicast to both (N must hold an even number of 128-wide tiles).
  kTokensPaired,
};

const char* fp8_block_tiles_name(Fp8BlockTiles t);

// Workspace for one grouped GEMM of `groups` groups (group arrays + CUTLASS's own), enough for
// either tiling and either output type.
size_t fp8_block_gemm_workspace_bytes(int groups, int sm_count);

struct Fp8BlockGemmArgs {
  int groups = 0;
  // Where each group's rows are: contiguous rows [offsets[g], offsets[g+1]) of one buffer
  // (prefill), or masked rows [g * max_m, g * max_m + counts[g]) (decode). Exactly one of the two.
  const int64_t* offsets = nullptr;
  const int32_t* counts = nullptr;
  int64_t max_m = 0;
  // Groups [skip_begin, skip_end) run no rows whatever their offsets or counts say (groups
  // computed apart, such as bf16 sink experts).
  int32_t skip_begin = 0, skip_end = 0;
  int n = 0, k = 0;                        // multiples of 128
  const uint8_t* rows = nullptr;           // [R, K] e4m3
  const float* row_scales = nullptr;       // [K/128][scale_ld], MN-major
  int64_t scale_ld = 0;                    // >= R
  const void* const* weights = nullptr;    // [groups] -> [N, K] e4m3, K contiguous
  const float* const* w_scales = nullptr;  // [groups] -> [K/128][N/128]
  void* out = nullptr;                     // [R, N] bf16, or f32 with f32_out
  bool f32_out = false;  // for an output that is quantised again (no bf16 rounding before it)
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  int sm_count = 0;
};

// The checks every kernel over these operands needs (sizes, layouts, pointers, alignment, the
// skipped range); run_fp8_block_grouped_gemm makes them and the workspace's. Throws moe::Error.
void check_fp8_block_gemm_operands(const Fp8BlockGemmArgs& args);

void run_fp8_block_grouped_gemm(Fp8BlockTiles tiles, const Fp8BlockGemmArgs& args,
                                cudaStream_t stream);

}  // namespace moe::gpu
