// launch_route: the checks of the reference's route() plus this kernel's limits, then one launch.
#include "moe_cuda/routing.hpp"

#include "launch.hpp"
#include "moe/error.hpp"
#include "moe/problem.hpp"

namespace moe::gpu {
namespace {

constexpr auto kInvalid = MOE_STATUS_INVALID_ARGUMENT;

// The reference's check_args (same conditions, same messages), so both refuse the same problems.
void check_routing_fields(const moe_problem& p, int64_t tokens, const float* logits,
                          const float* bias, const int32_t* ids, const float* weights) {
  MOE_CHECK(p.routing >= 0 && p.routing < MOE_ROUTING_COUNT_, kInvalid,
            "routing={} is not one of {}", p.routing, routing_names());
  MOE_CHECK(p.experts >= 1 && p.top_k >= 1 && p.top_k <= p.experts, kInvalid,
            "top_k={} must be in [1, experts={}]", p.top_k, p.experts);
  MOE_CHECK(
      p.sink_experts == 0 || (p.sink_experts > 0 && p.routing == MOE_ROUTING_SIGMOID_BIAS_SINK),
      kInvalid, "sink_experts={} needs routing sigmoid_bias_sink", p.sink_experts);
  if (p.routing == MOE_ROUTING_GROUPED_TOPK) {
    MOE_CHECK(p.num_groups >= 1 && p.experts % p.num_groups == 0, kInvalid,
              "num_groups={} must divide experts={}", p.num_groups, p.experts);
    MOE_CHECK(p.topk_group >= 1 && p.topk_group <= p.num_groups, kInvalid,
              "topk_group={} must be in [1, num_groups={}]", p.topk_group, p.num_groups);
    const int64_t per_group = p.experts / p.num_groups;
    MOE_CHECK(p.top_k <= p.topk_group * per_group, kInvalid,
              "top_k={} exceeds the {} experts in topk_group={} groups", p.top_k,
              p.topk_group * per_group, p.topk_group);
    MOE_CHECK(!p.routing_bias || per_group >= 2, kInvalid,
              "grouped_topk with a routing bias needs experts/num_groups={} >= 2", per_group);
  }
  MOE_CHECK((bias != nullptr) == (p.routing_bias != 0), kInvalid, "bias is {} but routing_bias={}",
            bias != nullptr ? "given" : "null", p.routing_bias);
  MOE_CHECK(tokens >= 0, kInvalid, "tokens={} must be >= 0", tokens);
  MOE_CHECK(tokens == 0 || (logits != nullptr && ids != nullptr && weights != nullptr), kInvalid,
            "logits, ids and weights must not be null with tokens={}", tokens);
}

}  // namespace

void launch_route(const moe_problem& p, int64_t tokens, const float* logits, const float* bias,
                  const uint8_t* is_padding, int32_t* ids, float* weights, cudaStream_t stream) {
  check_routing_fields(p, tokens, logits, bias, ids, weights);
  MOE_CHECK(p.sink_experts >= 0 && topk_width(p) <= kRouteMaxWidth, MOE_STATUS_UNSUPPORTED,
            "top_k + sink_experts = {} exceeds the {} columns the routing kernel handles",
            topk_width(p), kRouteMaxWidth);
  MOE_CHECK(p.experts <= kRouteMaxExperts, MOE_STATUS_UNSUPPORTED,
            "experts={} exceeds the {} the routing kernel keeps in shared memory", p.experts,
            kRouteMaxExperts);
  if (tokens == 0) return;

  kernels::RouteParams k{};
  k.logits = logits;
  k.bias = bias;
  k.is_padding = is_padding;
  k.ids = ids;
  k.weights = weights;
  k.tokens = tokens;
  k.experts = static_cast<int32_t>(p.experts);
  k.top_k = static_cast<int32_t>(p.top_k);
  k.sinks = static_cast<int32_t>(p.sink_experts);
  k.num_groups = 1;
  k.topk_group = 1;
  k.scale = 1.0;
  k.renormalize = p.renormalize != 0;
  switch (p.routing) {
    case MOE_ROUTING_GROUPED_TOPK:
      k.method = kernels::kRouteGrouped;
      k.softmax = p.score_function == MOE_SCORE_SOFTMAX;
      k.num_groups = static_cast<int32_t>(p.num_groups);
      k.topk_group = static_cast<int32_t>(p.topk_group);
      k.scale = static_cast<double>(p.routed_scaling_factor);
      break;
    case MOE_ROUTING_SIGMOID_BIAS_SINK:
      k.method = kernels::kRouteSink;
      k.softmax = 0;
      k.renormalize = 0;  // the sink softmax already normalises
      k.scale = static_cast<double>(p.route_scale) * p.global_scale;
      break;
    default:
      k.method = kernels::kRouteTopk;
      k.softmax = p.routing == MOE_ROUTING_SOFTMAX_TOPK;
  }
  detail::launch_route_kernel(k, stream);
}

}  // namespace moe::gpu
