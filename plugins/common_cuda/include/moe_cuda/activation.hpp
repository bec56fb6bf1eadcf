// The activations of docs/design.md §5 between the two grouped GEMMs, on permuted rows.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "moe/abi/moe_abi.h"
#include "moe_cuda/rows.hpp"

namespace moe::gpu {

// Where gate and up sit in a gated GEMM1 output row of N1 = 2I columns.
enum class GateUpLayout : int32_t {
  kConcatenated = 0,       // [gate (I) | up (I)]: canonical w13
  kInterleavedUpGate = 1,  // column 2i = up_i, 2i+1 = gate_i: w31 swap, then row interleave
                           // (docs/design.md §6; TensorRT-LLM's prepared weights)
  kInterleavedGateUp = 2,  // column 2i = gate_i, 2i+1 = up_i
};

struct ActivationArgs {
  const uint16_t* gemm1 = nullptr;  // [R_max, N1] bf16; N1 = 2I gated, I for relu2
  int64_t gemm1_stride = 0;         // elements between rows; 0 = N1
  uint16_t* out = nullptr;          // out: [R_max, I] bf16 (rows outside `rows` untouched)
  int64_t out_stride = 0;           // 0 = I
  int64_t intermediate = 0;         // I of these rows (routed, shared and sinks differ)
  GateUpLayout layout = GateUpLayout::kConcatenated;  // ignored by relu2

  const float* bias = nullptr;  // b13 [bias_groups, N1] f32 in gemm1's column layout, or null
  int64_t bias_stride = 0;      // 0 = N1
  int32_t bias_groups = 0;      // rows of groups >= bias_groups take no bias (sinks, shared)
  const int32_t* row_group = nullptr;  // [R_max] (Permutation::row_group); needed with a bias or
                                       // silu groups
  int32_t silu_group_begin = 0;        // groups in [begin, end) use silu_mul whatever p.activation
  int32_t silu_group_end = 0;          //   says: the sink experts (§5)
  RowRange rows;                       // e.g. {R_max, &offsets[g0], &offsets[g1]}
};

// out[r, i] = act(g, u) in fp32 from bf16 inputs (+ fp32 bias), rounded once to bf16, with the
// activation, alpha, limit and gelu form of `p` and the reference's formulas (and its NaN
// behaviour for min/clamp). Rows of silu groups are read as gated rows of the same N1, so a relu2
// layer runs its sink rows in a call of their own (INVALID_ARGUMENT otherwise).
void launch_activation(const moe_problem& p, const ActivationArgs& args, cudaStream_t stream);

}  // namespace moe::gpu
