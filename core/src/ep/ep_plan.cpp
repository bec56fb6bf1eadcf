#include "moe/ep_plan.hpp"

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

DispatchPlan plan_dispatch(const moe_problem& g, int32_t world, const int32_t* ids,
                           const float* weights, int64_t tokens) {
  MOE_CHECK(world == g.ep_size, MOE_STATUS_INVALID_ARGUMENT,
            "world size {} differs from the problem's ep_size={}", world, g.ep_size);
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
      to[size_t(expert_owner(g, id))] = true;
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
        const bool here = j < g.top_k && id >= 0 && expert_owner(g, id) == r;
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
  c.ep_map = nullptr;  // a pointer, not a value
  uint64_t h = fnv1a(&c, sizeof(c));
  h = fnv1a(backend.data(), backend.size(), h);
  return fnv1a(&seed, sizeof(seed), h);
}

}  // namespace moe
