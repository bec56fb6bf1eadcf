// launch_route: the reference's routing checks (check_routing_args) plus this kernel's limits,
// then one launch.
#include "moe_cuda/routing.hpp"

#include <fmt/format.h>
#include "launch.hpp"

#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"

namespace moe::gpu {

sdk::Verdict route_limits(const moe_problem& p) {
  if (p.sink_experts < 0 || topk_width(p) > kRouteMaxWidth)
    return sdk::Verdict::no(
        MOE_REASON_ROUTING,
        fmt::format("top_k + sink_experts = {} exceeds the {} columns the routing kernel handles",
                    topk_width(p), kRouteMaxWidth));
  if (p.experts > kRouteMaxExperts)
    return sdk::Verdict::no(
        MOE_REASON_ROUTING,
        fmt::format("experts={} exceeds the {} the routing kernel keeps in shared memory",
                    p.experts, kRouteMaxExperts));
  return sdk::Verdict::yes();
}

void fill_route_params(kernels::RouteParams& k, const moe_problem& p, int64_t tokens,
                       const float* logits, const float* bias, const uint8_t* is_padding,
                       int32_t* ids, float* weights) {
  check_routing_args(p, tokens, logits, bias, ids, weights);
  if (const sdk::Verdict v = route_limits(p); !v.ok()) throw Refusal(v.reason, v.message);
  k = kernels::RouteParams{};
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
  switch (static_cast<moe_routing>(p.routing)) {
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
    case MOE_ROUTING_SOFTMAX_TOPK:
    case MOE_ROUTING_SIGMOID_TOPK:
      k.method = kernels::kRouteTopk;
      k.softmax = p.routing == MOE_ROUTING_SOFTMAX_TOPK;
      break;
  }
}

void launch_route(const moe_problem& p, int64_t tokens, const float* logits, const float* bias,
                  const uint8_t* is_padding, int32_t* ids, float* weights, cudaStream_t stream) {
  kernels::RouteParams k{};
  fill_route_params(k, p, tokens, logits, bias, is_padding, ids, weights);
  if (tokens == 0) return;
  detail::launch_route_kernel(k, stream);
}

}  // namespace moe::gpu
