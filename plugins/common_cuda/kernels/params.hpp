// Kernel arguments as plain structs: filled by the host files (g++, which validate and size) and
// passed by value to the kernels (nvcc). No CUDA types, no behaviour.
#pragma once

#include <cstdint>

namespace moe::gpu::kernels {

// ---- routing ---------------------------------------------------------------------------------

enum RouteMethod : int32_t { kRouteTopk = 0, kRouteGrouped = 1, kRouteSink = 2 };

struct RouteParams {
  const float* logits;        // [T, E + S]
  const float* bias;          // [E] or null
  const uint8_t* is_padding;  // [T] or null
  int32_t* ids;               // out: [T, k + S]
  float* weights;             // out: [T, k + S]
  int64_t tokens;
  int32_t experts, top_k, sinks;
  int32_t method;       // RouteMethod
  int32_t softmax;      // scores: 1 = softmax, 0 = sigmoid
  int32_t renormalize;  // topk and grouped only
  int32_t num_groups;   // grouped: n_group (1 otherwise)
  int32_t topk_group;   // grouped: groups kept
  double scale;  // final weight multiplier: routed_scaling_factor, route_scale * global_scale, 1
  int32_t warps_per_block;
  int32_t warp_smem_bytes;  // shared memory of one warp (RouteSmem)
};

// ---- permutation -----------------------------------------------------------------------------

struct PermuteKeyParams {
  const int32_t* topk_ids;         // [T, W]
  const int32_t* local_of_global;  // [E] or null: placement arithmetic below
  int64_t tokens;
  int32_t width, top_k, experts, local_experts, sinks;
  int32_t placement, ep_size, ep_rank;  // moe_ep_placement
  int64_t local_offset;                 // linear placement
  int32_t has_shared;
  uint32_t* keys;   // out: [items] group of each slot, `groups` = skipped
  int32_t* slots;   // out: [items] slot index
  int64_t items;    // T*W (+T)
  uint32_t groups;  // G
};

struct MaskedRowsParams {
  int64_t max_m;          // rows per group
  int32_t* group_counts;  // out: [G], zero before the kernel
  int32_t* slot_row;      // out: [items]
  int32_t* row_token;     // out: [G * max_m], -1 before the kernel
  int32_t* row_group;     // out: [G * max_m]
  int32_t* row_slot;      // out: [G * max_m]
};

struct PermuteFinishParams {
  const uint32_t* keys;  // [items] sorted
  const int32_t* slots;  // [items] sorted with the keys
  int64_t items;
  int64_t routed_slots;  // T*W: slots at or past it belong to the shared expert
  int32_t width;
  int32_t groups;
  int32_t* group_counts;   // out: [G]
  int64_t* group_offsets;  // out: [G + 1]
  int32_t* row_token;      // out: [items]
  int32_t* row_slot;       // out: [items]
  int32_t* row_group;      // out: [items]
  int32_t* slot_row;       // out: [items]
};

// ---- row movement ----------------------------------------------------------------------------

struct GatherParams {
  const int64_t* num_rows;  // device: group_offsets + G
  int64_t max_rows;
  const int32_t* row_token;  // [R_max]
  const uint16_t* hidden;    // [T, H] bf16
  uint16_t* out;             // out: [R_max, H] bf16
  int64_t hidden_size;
  const int32_t* row_group;      // [R_max], or null: with it, rows of groups [skip_begin, skip_end)
  int32_t skip_begin, skip_end;  // are skipped (computed apart)
};

// Dense per-column results into their slots' permuted rows (scatter_slot_rows_kernel).
struct ScatterSlotParams {
  const int32_t* slot_row;  // [T * W] (Permutation::slot_row)
  int64_t tokens, width, first_column, columns;
  const uint16_t* src;  // [columns][T][H] bf16
  uint16_t* out;        // out: [R_max, H] bf16
  int64_t hidden_size;
};

struct FinalizeParams {
  const uint16_t* gemm2;  // [R_max, H] bf16
  const float* weights;   // [T, W]
  const float* bias;      // [bias_groups, H] or null
  int32_t bias_groups;
  const int32_t* slot_row;   // [T*W (+T)]
  const int32_t* row_group;  // [R_max]
  uint16_t* out;             // out: [T, H] bf16
  int64_t tokens, hidden;
  int64_t tile_cols;  // columns per work item: H when tokens are plentiful, less for few tokens
  int32_t width;
  int32_t has_shared;
  int32_t accumulate;  // 1: add the old out row to the sum before rounding
};

// ---- activation ------------------------------------------------------------------------------

struct ActivationParams {
  const uint16_t* gemm1;  // [R_max, N1] bf16
  uint16_t* out;          // out: [R_max, I] bf16
  int64_t gemm1_stride, out_stride, intermediate;
  const float* bias;  // [bias_groups, N1] or null
  int64_t bias_stride;
  int32_t bias_groups;
  const int32_t* row_group;  // [R_max] or null
  int32_t silu_begin, silu_end;
  int32_t activation;  // moe_activation
  int32_t gelu_tanh;
  float alpha, limit;
  int32_t layout;  // GateUpLayout
  int64_t max_rows;
  const int64_t* row_begin;      // device or null
  const int64_t* row_end;        // device or null
  int32_t skip_begin, skip_end;  // rows of groups in [begin, end) are skipped (needs row_group)
  const float* gemm1_f32;        // [R_max, N1] fp32 instead of gemm1 (activation_quantize_kernel)
  uint8_t* out_fp8;              // out (activation_quantize_kernel): [R_max, I] e4m3, out_stride
  float* out_scales;  // out: scale (r, b) at r * scale_row_stride + b * scale_block_stride
  int64_t scale_row_stride, scale_block_stride;
  const int32_t* row_list;  // rows to visit instead of [row_begin, row_end) (RowRange::list)
  int64_t row_list_count;
};

// ---- quantisation ----------------------------------------------------------------------------

struct Fp8BlockParams {
  const uint16_t* x;  // [R_max, H] bf16, or [T, H] read through source_row
  uint8_t* codes;     // out: [R_max, H] e4m3
  float* scales;      // out: scale (r, b) at r * scale_row_stride + b * scale_block_stride
  int64_t scale_row_stride, scale_block_stride;
  int64_t hidden, max_rows;
  const int64_t* row_begin;
  const int64_t* row_end;
  const int32_t* source_row;     // [R_max] row of x for output row r (< 0: skip r), or null = r
  const int32_t* row_group;      // [R_max] or null: with skip_begin < skip_end, rows of groups in
  int32_t skip_begin, skip_end;  // [begin, end) are skipped like source_row < 0
  const int32_t* row_list;       // rows to visit instead of [row_begin, row_end) (RowRange::list)
  int64_t row_list_count;
};

// Rows of an already quantised [T, H] (codes and row-major [T, ceil(H/128)] scales) copied to
// the rows of a permutation: the outputs and skips of Fp8BlockParams with source_row given.
struct Fp8GatherParams {
  const uint8_t* codes_in;  // [T, H] e4m3
  const float* scales_in;   // [T, ceil(H/128)]
  uint8_t* codes;           // out: [R_max, H] e4m3
  float* scales;            // out: as Fp8BlockParams::scales
  int64_t scale_row_stride, scale_block_stride;
  int64_t hidden, max_rows;
  const int64_t* row_begin;
  const int64_t* row_end;
  const int32_t* source_row;  // [R_max] token of output row r (< 0: skip r)
  const int32_t* row_group;
  int32_t skip_begin, skip_end;
};

struct Fp8TensorParams {
  const uint16_t* x;  // [R_max, H] bf16 (unused when x_f32 is given)
  uint8_t* codes;     // out: [R_max, H] e4m3
  int64_t hidden, max_rows;
  const int64_t* row_begin;
  const int64_t* row_end;
  uint32_t* amax_bits;    // dynamic: the amax as float bits (>= 0, so they order as integers)
  const float* scale_in;  // static: the scale; null when dynamic
  float* scale_out;       // dynamic: out, the scale used; null when static
  const float* x_f32;     // [R_max, H] f32 instead of x, or null
};

}  // namespace moe::gpu::kernels
