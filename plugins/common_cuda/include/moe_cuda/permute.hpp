// Token permutation: each (token, slot) that does work on this rank becomes one row of a
// permuted buffer, rows grouped by expert into contiguous segments (the layout grouped GEMMs
// take), then gathered back and combined. Deterministic and on the device; no host sync.
//
// Groups, in order (G of them):
//   [0, L)        the problem's local experts (global id -> local id as moe::local_expert_id)
//   [L, L + S)    the S sink experts (column k + s of topk_ids holds E + s, or -1)
//   L + S         the weight-1 shared expert, when p.shared_intermediate > 0: every token
// Slots: slot t*W + j is column j of token t (W = k + S); the shared expert's virtual column of
// token t is slot T*W + t (T = this call's token count). Inside a group rows follow slot order.
//
// Call order: permutation_workspace_bytes -> carve_permutation (once per workspace) ->
// launch_permute -> launch_gather_rows -> (GEMM1, launch_activation, GEMM2) -> launch_finalize.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "moe/abi/moe_abi.h"

namespace moe::gpu {

struct Permutation {
  // Geometry, fixed by carve_permutation.
  int64_t max_tokens = 0;
  int64_t width = 0;     // W = k + S
  int64_t groups = 0;    // G
  int64_t max_rows = 0;  // R_max = max_tokens * W (+ max_tokens with a shared expert);
                         // masked: G * max_m
  int64_t max_m = 0;     // masked layout: rows per group (= max_tokens); 0 = contiguous
  bool has_shared = false;

  // Written by launch_permute (device memory inside the caller's workspace). Row arrays are valid
  // for r < group_offsets[G]; entries past it are -1 up to T*W (+T) and untouched beyond.
  int32_t* group_counts = nullptr;   // [G] rows of each group
  int64_t* group_offsets = nullptr;  // [G + 1] exclusive prefix sum; group_offsets[G] = rows
                                     // (contiguous only; null when masked)
  int32_t* row_token = nullptr;      // [R_max] source token of row r
  int32_t* row_slot = nullptr;       // [R_max] slot of row r (t*W + j; shared rows T*W + t)
  int32_t* row_group = nullptr;      // [R_max] group of row r
  int32_t* slot_row = nullptr;       // [R_max] row of slot s, -1 when not computed here

  // Global -> local expert map, device [E] i32 (-1 = another rank). Caller-owned and persistent
  // (fill it at prepare with upload_expert_map); carve_permutation leaves it null, and null means
  // "compute it from p.ep_placement on the device", which covers none, linear and round_robin.
  const int32_t* local_of_global = nullptr;

  // Sort scratch (inside the workspace).
  uint32_t* sort_keys[2] = {nullptr, nullptr};  // [R_max] group of each slot, G = skipped
  int32_t* sort_slots[2] = {nullptr, nullptr};  // [R_max]
  void* sort_temp = nullptr;                    // CUB temporary storage
  size_t sort_temp_bytes = 0;
  int32_t sort_end_bit = 0;  // keys hold [0, G]: only the low bit_width(G) bits are sorted

  // Permutations of up to this many slots (at most 1024, with at most 2047 groups) run as one
  // kernel of one block instead of keys, sort and finish: the same outputs, two launches fewer
  // (measured on the H200, bench/NOTES.md session 20: 4-12% off a decode layer at T = 1-8,
  // nothing lost at T = 64). 0 sends every permutation through the sort.
  int64_t one_launch_max_items = 1024;
};

// Group indices of a problem.
int64_t permutation_groups(const moe_problem& p);  // G
inline int64_t first_sink_group(const moe_problem& p) {
  return p.local_experts;
}
inline int64_t shared_group(const moe_problem& p) {  // -1 without a shared expert
  return p.shared_intermediate > 0 ? p.local_experts + p.sink_experts : -1;
}
int64_t permutation_max_rows(const moe_problem& p, int64_t max_tokens);  // R_max

// Workspace for up to max_tokens tokens; 256-byte aligned pieces. Queries CUB for the device
// current on the calling thread (host only, no device work).
size_t permutation_workspace_bytes(const moe_problem& p, int64_t max_tokens);
// Pointers into `workspace` (>= permutation_workspace_bytes bytes, 256-byte aligned).
Permutation carve_permutation(const moe_problem& p, int64_t max_tokens, void* workspace);

// Copies the EP map of `p` (moe::local_expert_id of every global expert) into device_map [E].
// For prepare time: it synchronises `stream` (the host vector must outlive the copy).
void upload_expert_map(const moe_problem& p, int32_t* device_map, cudaStream_t stream);

// The masked layout (decode; DeepGEMM's name): group g owns rows [g * max_m, (g + 1) * max_m)
// of a [G * max_m, ...] buffer, filled from its first row; group_counts[g] of them are live, and
// row_token is -1 on the others. max_m = max_tokens, so no group can overflow (a token sends at
// most one slot to a group). No sort: each slot takes its row with an atomic, so rows inside a
// group come in no fixed order; up to 16384 rows one block clears and assigns (its counts in
// shared memory), past that two memsets clear and a grid of blocks assigns. A row's GEMM results
// depend on that row alone and the combine reads slots in column order, so outputs do not
// depend on that order. slot_row covers T*W (+T) slots as in the contiguous layout.
size_t masked_permutation_workspace_bytes(const moe_problem& p, int64_t max_tokens);
Permutation carve_masked_permutation(const moe_problem& p, int64_t max_tokens, void* workspace);
void launch_permute_masked(const moe_problem& p, int64_t tokens, const int32_t* topk_ids,
                           const Permutation& perm, cudaStream_t stream);

// Sorts the slots of topk_ids [T, W] (device, i32) into perm. T <= perm.max_tokens.
// NOTES: the device cannot throw, so an invalid id (outside [-1, E) in a routed column, anything
// but E + s or -1 in sink column s) is treated as -1: that slot gets no row. The reference layer
// refuses such ids with INVALID_ARGUMENT; route() never produces them.
void launch_permute(const moe_problem& p, int64_t tokens, const int32_t* topk_ids,
                    const Permutation& perm, cudaStream_t stream);

// out[r, :] = hidden[row_token[r], :] for r < group_offsets[G]. hidden [T, H] bf16, out
// [R_max, H] bf16 (rows past group_offsets[G] untouched). Rows of groups [skip_begin, skip_end)
// are left untouched too (groups computed apart, e.g. bf16 sinks next to quantised GEMMs).
void launch_gather_rows(const Permutation& perm, int64_t hidden_size, const uint16_t* hidden,
                        uint16_t* out, cudaStream_t stream, int32_t skip_begin = 0,
                        int32_t skip_end = 0);

// Rows computed apart, in token order (e.g. sink experts run densely on every token), put where
// the permutation placed their slots: for c < columns and t < tokens, the row of slot
// (t, first_column + c), if it has one, gets src[c][t][:H]; slots without a row are skipped.
// src [columns][tokens][H] bf16, out [R_max, H] bf16. Contiguous or masked layouts alike.
void launch_scatter_slot_rows(const Permutation& perm, int64_t tokens, int64_t first_column,
                              int64_t columns, int64_t hidden_size, const uint16_t* src,
                              uint16_t* out, cudaStream_t stream);

struct FinalizeArgs {
  const uint16_t* gemm2 = nullptr;      // [R_max, H] bf16, GEMM2's output in permuted order
  const float* topk_weights = nullptr;  // [T, W] f32 (routed weights, then sink gammas)
  const float* bias = nullptr;          // b2 [L, H] f32 of the local experts, or null
  uint16_t* out = nullptr;              // out: [T, H] bf16, every row written
  bool accumulate = false;              // out[t, :] = old out[t, :] + the sum (ABI 1.4)
};

// The most routing columns (top_k + sink_experts) a token launch_finalize combines: the
// finalize kernel keeps a token's rows in shared memory (kernels/finalize.cuh's kFinalizeMaxWidth,
// asserted equal where the kernel is launched). Plugins' supports() refuse a wider problem.
inline constexpr int64_t kCombineMaxColumns = 32;

// out[t, :] = sum over j in column order of w[t, j] * (gemm2[slot_row[t*W + j], :] + b2[group])
// (+ gemm2[shared row of t, :] with weight 1, last), accumulated in fp32 in that fixed order
// (fmaf per term) and rounded once to bf16. Slots without a row are skipped; a token with no
// rows gets a zero row. Sink and shared rows take no bias. With `accumulate` the old bf16 row is
// added to the fp32 sum last (one more fadd), still rounded once; a token with no rows keeps its
// old row.
void launch_finalize(const moe_problem& p, int64_t tokens, const Permutation& perm,
                     const FinalizeArgs& args, cudaStream_t stream);

}  // namespace moe::gpu
