// cutlass_mega's sink and shared experts (docs/design.md §13) as virtual experts of the routed
// shape, appended after the routed ones: an MLP of intermediate width Is becomes ceil(Is / I)
// experts, chunk c holding its intermediate columns [c I, c I + I), zero-padded past Is. An MLP is
// a sum over its intermediate columns, so the chunks' results add up to it.
//
// Slots: a token's slot columns are the ids' k + S columns, then one per further chunk. Column
// k + s (sink s) runs sink s's first chunk when it holds id E + s, weighted by its gamma; each
// further chunk of sink s reads the same column; the shared expert's chunks read none and weigh 1.
// Virtual experts are numbered from E: sink 0's chunks, sink 1's, ..., then the shared expert's.
#pragma once

#include <cstdint>
#include <vector>

#include "moe/abi/moe_abi.h"

namespace moe::mega {

// Slot column k + c (c >= 0): which ids column it reads (-1: none, weight 1), the virtual expert it
// runs, and the id that column must hold for it to run.
struct SlotColumn {
  int32_t src, expert, match;
};

// Virtual experts of `p` (sinks' chunks, then the shared expert's), and a token's slot columns.
int64_t virtual_count(const moe_problem& p);
int64_t slots_per_token(const moe_problem& p);               // top_k + virtual_count
std::vector<SlotColumn> slot_columns(const moe_problem& p);  // the columns past top_k

// The virtual experts' tensors in the layer format, laid out like the routed stacks (w13 [V, n1,
// H], w2 [V, H, I]; element bytes of the format, fp4 packed), padding zero.
struct VirtualExperts {
  int64_t count = 0;
  std::vector<uint8_t> w13, w2;
  std::vector<uint8_t> w13_scale, w2_scale;    // mxfp4 / nvfp4: per-row scale bytes, [V, n1, H/g],
                                               // [V, H, I/g]; padding a scale of 1
  std::vector<float> w13_blocks, w2_blocks;    // fp8_block: checked block scales (K-major),
                                               // [V, n1/128, H/128], [V, H/128, I/128]; padding 1
  std::vector<float> w13_scale_2, w2_scale_2;  // nvfp4: per virtual expert
};

// Builds them from `w`'s sink and shared tensors (checked by the SDK against the problem); sinks
// are bf16 and need a bf16 layer (supports). fp8_block scales are checked like the routed ones.
VirtualExperts virtual_experts(const moe_problem& p, const moe_weights& w);

}  // namespace moe::mega
