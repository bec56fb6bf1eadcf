#include "moe/ep_plan.hpp"

#include <algorithm>

#include "moe/inputs.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"

namespace moe {

int32_t expert_owner(const moe_problem& g, int64_t e) {
  MOE_CHECK(e >= 0 && e < g.experts, MOE_STATUS_INVALID_ARGUMENT,
            "expert {} is outside [0, experts={})", e, g.experts);
  if (!known_ep_placement(g.ep_placement))
    MOE_REFUSE(MOE_REASON_EP, "ep_placement={} is not one this build knows", g.ep_placement);
  switch (static_cast<moe_ep_placement>(g.ep_placement)) {
    case MOE_EP_NONE:
      return 0;
    case MOE_EP_LINEAR:
      return static_cast<int32_t>(e / (g.experts / g.ep_size));
    case MOE_EP_ROUND_ROBIN:
      return static_cast<int32_t>(e % g.ep_size);
  }
  return 0;  // unreachable: every known placement returns above
}

std::vector<int32_t> expert_owners(const std::vector<std::vector<int32_t>>& maps, int64_t experts) {
  std::vector<int32_t> owner(size_t(experts), -1);
  for (size_t r = 0; r < maps.size(); ++r) {
    MOE_CHECK(int64_t(maps[r].size()) == experts, MOE_STATUS_CONFIG_ERROR,
              "rank {}'s expert map has {} entries, not the {} experts", r, maps[r].size(),
              experts);
    for (int64_t e = 0; e < experts; ++e) {
      if (maps[r][size_t(e)] < 0) continue;
      MOE_CHECK(owner[size_t(e)] < 0, MOE_STATUS_CONFIG_ERROR,
                "expert {} is held by ranks {} and {} (their ep_maps overlap): every expert "
                "must live on one rank",
                e, owner[size_t(e)], r);
      owner[size_t(e)] = int32_t(r);
    }
  }
  for (int64_t e = 0; e < experts; ++e)
    MOE_CHECK(owner[size_t(e)] >= 0, MOE_STATUS_CONFIG_ERROR,
              "expert {} is held by no rank (no rank's ep_map maps it): its tokens would be lost",
              e);
  return owner;
}

std::vector<int32_t> expert_owners(const moe_problem& g) {
  std::vector<int32_t> owner(size_t(std::max<int64_t>(g.experts, 0)));
  for (int64_t e = 0; e < g.experts; ++e) owner[size_t(e)] = expert_owner(g, e);
  return owner;
}

DispatchPlan plan_dispatch(const moe_problem& g, int32_t world, const int32_t* ids,
                           const float* weights, int64_t tokens) {
  return plan_dispatch(g, world, ids, weights, tokens, expert_owners(g));
}

DispatchPlan plan_dispatch(const moe_problem& g, int32_t world, const int32_t* ids,
                           const float* weights, int64_t tokens,
                           const std::vector<int32_t>& owners) {
  MOE_CHECK(world == g.ep_size, MOE_STATUS_INVALID_ARGUMENT,
            "world size {} differs from the problem's ep_size={}", world, g.ep_size);
  MOE_CHECK(int64_t(owners.size()) == g.experts, MOE_STATUS_INVALID_ARGUMENT,
            "{} expert owners for {} experts", owners.size(), g.experts);
  for (const int32_t r : owners)
    MOE_CHECK(r >= 0 && r < world, MOE_STATUS_INVALID_ARGUMENT,
              "an expert's owner {} is outside the {} ranks", r, world);
  DispatchPlan plan;
  plan.world = world;
  plan.width = topk_width(g);
  const int64_t w = plan.width;
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(world));  // per destination
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<bool> to(static_cast<size_t>(world), false);
    for (int64_t j = 0; j < g.top_k; ++j) {
      const int32_t id = ids[t * w + j];
      MOE_CHECK(id >= -1 && id < g.experts, MOE_STATUS_INVALID_ARGUMENT,
                "topk_ids[{}][{}]={} is outside [-1, experts={})", t, j, id, g.experts);
      if (id < 0) continue;  // -1: no expert
      to[size_t(owners[size_t(id)])] = true;
    }
    for (int32_t r = 0; r < world; ++r)
      if (to[size_t(r)]) rows[size_t(r)].push_back(static_cast<int32_t>(t));
  }
  plan.send_counts.resize(size_t(world));
  plan.send_offsets.assign(size_t(world) + 1, 0);
  for (int32_t r = 0; r < world; ++r) {
    plan.send_counts[size_t(r)] = int64_t(rows[size_t(r)].size());
    plan.send_offsets[size_t(r) + 1] = plan.send_offsets[size_t(r)] + plan.send_counts[size_t(r)];
    for (int32_t t : rows[size_t(r)]) {
      plan.send_tokens.push_back(t);
      for (int64_t j = 0; j < w; ++j) {
        const int32_t id = ids[t * w + j];
        const bool here = j < g.top_k && id >= 0 && owners[size_t(id)] == r;
        plan.send_ids.push_back(here ? id : -1);
        plan.send_weights.push_back(here ? weights[t * w + j] : 0.0f);
      }
    }
  }
  return plan;
}

bool needs_home_pass(const moe_problem& g) {
  return g.sink_experts > 0;
}

std::vector<int32_t> home_pass_ids(const moe_problem& g, const int32_t* ids, int64_t tokens) {
  const int64_t w = topk_width(g);
  std::vector<int32_t> out(ids, ids + tokens * w);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < g.top_k; ++j) out[size_t(t * w + j)] = -1;
  return out;
}

uint64_t config_digest(const moe_problem& p, const std::string& backend, uint64_t seed) {
  moe_problem c = p;
  c.ep_rank = 0;  // the one field that differs by rank
  c.local_expert_offset = 0;
  c.ep_map = nullptr;  // pointers, not values
  c.ext = nullptr;
  uint64_t h = fnv1a(&c, sizeof(c));
  h = fnv1a(backend.data(), backend.size(), h);
  return fnv1a(&seed, sizeof(seed), h);
}

}  // namespace moe
