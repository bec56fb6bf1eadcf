// Expert-parallel dispatch plans: which tokens of this rank go to which rank, with which ids and
// weights, and how their results come back. Pure host code (tested on the CPU); the EP layer
// (core/ep) moves the bytes with NCCL as the plan says.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moe/abi/moe_abi.h"

namespace moe {

// Rank that owns global expert `e` under the problem's placement (ep_size ranks).
int32_t expert_owner(const moe_problem& global, int64_t e);

// The owning rank of every global expert [E] from every rank's map (maps[r][e] >= 0: rank r holds
// expert e; the maps of the problem's ranks, each of E entries). Throws CONFIG_ERROR naming the
// expert that no rank or two ranks hold (their tokens would be lost or counted twice).
std::vector<int32_t> expert_owners(const std::vector<std::vector<int32_t>>& maps, int64_t experts);
// The same from the problem's placement alone.
std::vector<int32_t> expert_owners(const moe_problem& global);

// Tokens of this rank bound for each rank. A token travels to a rank once, however many of its
// experts live there; padding tokens and -1 ids never travel. Routed ids of experts on other
// ranks become -1 in the copy sent, so the receiver computes only its own experts; sink columns
// travel as -1 (sinks run on the token's home rank).
struct DispatchPlan {
  int32_t world = 1;
  int64_t width = 0;                  // k + S columns of ids and weights
  std::vector<int64_t> send_counts;   // [world] tokens to each rank
  std::vector<int64_t> send_offsets;  // [world + 1] prefix sum over send_counts
  std::vector<int32_t> send_tokens;   // [sum] local token of each sent row, rank by rank
  std::vector<int32_t> send_ids;      // [sum, width] ids as the receiver sees them
  std::vector<float> send_weights;    // [sum, width]
};

// ids / weights: this rank's routing [tokens, k + S] (global ids, host memory); owners: the rank
// of every global expert (expert_owners), the placement's where not given.
DispatchPlan plan_dispatch(const moe_problem& global, int32_t world, const int32_t* ids,
                           const float* weights, int64_t tokens,
                           const std::vector<int32_t>& owners);
DispatchPlan plan_dispatch(const moe_problem& global, int32_t world, const int32_t* ids,
                           const float* weights, int64_t tokens);

// The ids of this rank's own tokens for the home pass (sink experts only: every routed id -1).
std::vector<int32_t> home_pass_ids(const moe_problem& global, const int32_t* ids, int64_t tokens);
bool needs_home_pass(const moe_problem& global);

// A stable digest of what every rank must agree on (the problem, the backend, the seed), to
// refuse mismatched configs at start.
uint64_t config_digest(const moe_problem& global, const std::string& backend, uint64_t seed);

}  // namespace moe
