// Routing of docs/design.md §4, the oracle every backend's routing is compared with (ids exactly,
// ties included). Plain loops, all arithmetic in double, weights rounded to float at the end.
//
// Conventions every method shares:
//  - The k selected experts are written best first; equal scores go to the lowest index, in every
//    top-k (the group top-k of grouped_topk and the top-2 inside a group included).
//  - A selection bias (p.routing_bias) only changes which experts are chosen: weights are always
//    gathered from the unbiased score.
//  - NaN ranks below every number (-inf included): a NaN score is chosen only when fewer than k
//    numbers are left. A NaN logit under softmax makes the whole row NaN (the sum is NaN), so such
//    a row selects the lowest indices with NaN weights. Nothing crashes.
#pragma once

#include <cstdint>

#include "moe/abi/moe_abi.h"

namespace moe::reference {

// Routes `tokens` tokens per docs/design.md §4. logits [tokens, E + S] f32 row-major (E = p.experts
// routed columns, then S = p.sink_experts sink columns); bias [E] f32 or nullptr (must be given iff
// p.routing_bias); is_padding [tokens] or nullptr.
// Writes ids [tokens, k + S] and weights [tokens, k + S]; padding tokens get ids -1 and weights 0
// in all k + S columns. Throws moe::Error (INVALID_ARGUMENT) when the routing fields of `p` or the
// pointers are inconsistent.
void route(const moe_problem& p, int64_t tokens, const float* logits, const float* bias,
           const uint8_t* is_padding, int32_t* ids, float* weights);

}  // namespace moe::reference
