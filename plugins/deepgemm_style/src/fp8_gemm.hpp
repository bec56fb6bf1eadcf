// Host side of the grouped fp8 block-scale GEMMs (kernels/sm90_fp8_block_grouped_gemm.cuh):
// sizes, checks and launch. Every pointer is device memory; nothing is read back to the host, so
// a call can be captured in a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace moe::deepgemm {

enum class Fp8Tiles {
  kTokens,      // 128 tokens x 128 features per tile: many tokens per expert
  kWeights,     // swap AB, 128 features x 32 tokens per tile: few tokens per expert
  kTokensFfma,  // own kernel: 128 tokens x 128 features, a half-empty tile costs half
};

const char* fp8_tiles_name(Fp8Tiles t);

// Workspace for one grouped GEMM of `groups` groups (group arrays + CUTLASS's own), enough for
// either tiling.
size_t fp8_gemm_workspace_bytes(int groups, int sm_count);

struct Fp8GemmArgs {
  int groups = 0;
  // Where each group's rows are (kernels/sm90_fp8_block_grouped_gemm.cuh): contiguous rows
  // [offsets[g], offsets[g+1]), or masked rows [g * max_m, g * max_m + counts[g]).
  const int64_t* offsets = nullptr;
  const int32_t* counts = nullptr;
  int64_t max_m = 0;
  // Groups [skip_begin, skip_end) run no rows whatever their offsets or counts say (the sink
  // experts' groups of the permutation: bf16, computed apart). The own kernel takes no skip.
  int32_t skip_begin = 0, skip_end = 0;
  int n = 0, k = 0;                        // multiples of 128
  const uint8_t* rows = nullptr;           // [R, K] e4m3
  const float* row_scales = nullptr;       // [K/128][scale_ld], MN-major
  int64_t scale_ld = 0;                    // >= R
  const void* const* weights = nullptr;    // [groups] -> [N, K] e4m3, K contiguous
  const float* const* w_scales = nullptr;  // [groups] -> [K/128][N/128]
  // The same weights and scales stacked, group after group (kTokensFfma reads only these).
  const uint8_t* weight_stack = nullptr;  // [groups, N, K] e4m3
  const float* w_scale_stack = nullptr;   // [groups][K/128][N/128]
  void* out = nullptr;                    // [R, N] bf16, or f32 with f32_out
  bool f32_out = false;  // for an output that is quantised again (no bf16 rounding before it)
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  int sm_count = 0;
};

void run_fp8_grouped_gemm(Fp8Tiles tiles, const Fp8GemmArgs& args, cudaStream_t stream);

}  // namespace moe::deepgemm
