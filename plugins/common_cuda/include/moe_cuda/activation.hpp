// The activations of docs/design.md §5 between the two grouped GEMMs, on permuted rows.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "moe/abi/moe_abi.h"
#include "moe_cuda/quantize.hpp"
#include "moe_cuda/rows.hpp"

namespace moe::gpu {

// Where gate and up sit in a gated GEMM1 output row of N1 = 2I columns.
enum class GateUpLayout : int32_t {
  kConcatenated = 0,        // [gate (I) | up (I)]: canonical w13
  kInterleavedUpGate = 1,   // column 2i = up_i, 2i+1 = gate_i: w31 swap, then row interleave
                            // (docs/design.md §6; TensorRT-LLM's prepared weights)
  kInterleavedGateUp = 2,   // column 2i = gate_i, 2i+1 = up_i
  kConcatenatedUpGate = 3,  // [up (I) | gate (I)]: the w31 swap alone (trtllm_style's fp8_block,
                            // whose 128-row scale blocks cannot follow a row interleave)
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
  RowRange rows;  // e.g. {R_max, &offsets[g0], &offsets[g1]}, or a masked layout's live rows
                  // as a list (Permutation::slot_row)
  int32_t skip_group_begin = 0;  // rows of groups in [begin, end) are skipped (computed
  int32_t skip_group_end = 0;    //   apart, e.g. bf16 sinks next to e4m3 experts)

  // Quantised output (input_format fp8_1x128 between the GEMMs): when out_fp8 is given, `out`
  // is unused and each row's outputs become e4m3 codes with one scale per 128 of them, quantised
  // from the fp32 values. Needs I % 128 == 0, gated or relu2 rows in vector form (I, strides
  // multiples of 8, 16-byte aligned gemm1, 8-byte aligned out_fp8).
  uint8_t* out_fp8 = nullptr;  // [R_max, out_stride] e4m3
  Fp8BlockScales out_scales;   // where scale (r, b) goes; row_stride 0 = I / 128
  // GEMM1's output in fp32 instead of `gemm1` (quantised output only): the values then reach
  // the quantisation without a bf16 rounding, as the reference's do.
  const float* gemm1_f32 = nullptr;  // [R_max, gemm1_stride] f32, 16-byte aligned
};

// out[r, i] = act(g, u) in fp32 from bf16 inputs (+ fp32 bias), rounded once to bf16, with the
// activation, alpha, limit and gelu form of `p` and the reference's formulas (and its NaN
// behaviour for min/clamp). Rows of silu groups are read as gated rows of the same N1, so a relu2
// layer runs its sink rows in a call of their own (INVALID_ARGUMENT otherwise).
void launch_activation(const moe_problem& p, const ActivationArgs& args, cudaStream_t stream);

}  // namespace moe::gpu
