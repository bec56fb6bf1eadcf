// Host side of the grouped GEMMs (kernels/sm90_grouped_gemm.cuh), bf16 or e4m3 operands: sizes,
// checks and launch. Every pointer is device memory; nothing is read back to the host, so a call
// can be captured in a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "moe/abi/moe_abi.h"

namespace moe::trtllm {

enum class GemmTiles {
  kTokens,   // 128 tokens x 128 features per tile: many tokens per expert
  kWeights,  // swap AB, 128 features x 32 tokens per tile: few tokens per expert
  kWide,     // 128 tokens x 256 features per tile
};

const char* gemm_tiles_name(GemmTiles t);

// Workspace for one grouped GEMM of `groups` groups (group arrays + CUTLASS's own), enough for
// every kernel of any tiles and either operand type.
size_t grouped_gemm_workspace_bytes(int groups, int sm_count);

// e4m3 operands: D_g = alpha_g * A_g W_g^T with alpha_g = act * weight[g] (act_shared instead for
// the shared expert's group), all device pointers, so a scale computed on the device (dynamic
// activation quantisation) is read there.
struct Fp8Scales {
  const float* act = nullptr;         // f32 [1]
  const float* act_shared = nullptr;  // f32 [1], or null (= act)
  const float* weight = nullptr;      // f32 [groups]
  int32_t shared_group = -1;          // -1: no shared expert
};

struct GroupedGemmArgs {
  int groups = 0;
  const int64_t* offsets = nullptr;  // [groups + 1]: group g owns rows [offsets[g], offsets[g+1])
  int n = 0, k = 0;                  // multiples of 8 (bf16) or 16 (e4m3)
  const void* rows = nullptr;        // [R, K] bf16, or e4m3 when fp8 is set
  const void* const* weights = nullptr;  // [groups] -> [N, K] like the rows, K contiguous
  void* out = nullptr;  // [R, N] bf16; with the activation [R, I] (I = N/2 gated, N relu2),
                        // f32 for e4m3 operands (quantised next, from unrounded values)
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  int sm_count = 0;
  const Fp8Scales* fp8 = nullptr;  // set: e4m3 operands with these scales; null: bf16
};

// out[r, :N] = alpha_g * rows[r, :K] * weights[g][N, K]^T for the rows r of each group g.
void run_grouped_gemm(GemmTiles tiles, const GroupedGemmArgs& args, cudaStream_t stream);

// GEMM1 with the activation in its epilogue. The weights' rows are TensorRT-LLM's interleave
// (row 2i = up_i, 2i+1 = gate_i) when gated; out[r, i] = act(gate + b, up + b) rounded once to
// bf16. Groups [silu_begin, silu_end) (sinks) use silu_mul; groups below bias_groups add
// bias[g * N + column] (b13 in the weights' row order) when bias is given.
struct ActivationEpilogueArgs {
  const float* bias = nullptr;
  int32_t bias_groups = 0;
  int32_t silu_begin = 0, silu_end = 0;
};
void run_grouped_gemm_activation(GemmTiles tiles, const moe_problem& p, const GroupedGemmArgs& args,
                                 const ActivationEpilogueArgs& epilogue, cudaStream_t stream);

}  // namespace moe::trtllm
