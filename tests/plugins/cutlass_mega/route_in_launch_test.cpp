// cutlass_mega's routing inside its launch (the default; MOE_MEGA_ROUTE=apart turns it off,
// docs/design.md §13): a run given
// router logits (ABI 1.6) routes the batch in the fused kernel up to kRouteInLaunchTokens tokens,
// the SDK's route() before the launch above that. The ids are the reference's; the ids and
// weights are the route kernel's bits (the same device code) and the output the bits of the
// layer run after it; the timeline says which runs routed in the launch. Skips without an sm_90
// GPU.
#include <cstring>
#include <string>

#include "mega_layer_fixture.hpp"
#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/formats.hpp"

namespace moe::test {
namespace {

struct RouteCase {
  moe_format format;
  moe_routing routing;
  bool bias;
  int experts;  // 32 and 33, 128 and 129: a lane holds one more candidate past each (32 lanes a
                // warp)
};

Problem with_routing(Problem q, const RouteCase& rc) {
  q.raw().experts = rc.experts;
  q.raw().routing = rc.routing;
  q.raw().routing_bias = rc.bias ? 1 : 0;
  if (rc.routing == MOE_ROUTING_GROUPED_TOPK) {  // 4 groups, 2 kept: E / 2 >= 8 candidates
    q.raw().score_function = MOE_SCORE_SIGMOID;
    q.raw().num_groups = 4;
    q.raw().topk_group = 2;
    q.raw().routed_scaling_factor = 2.5f;
  }
  q.finalize();
  return in_format(q, rc.format);
}

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

TEST_F(MegaLayer, RoutingInTheLaunchGivesTheRouteKernelsIdsWeightsAndBits) {
  for (const RouteCase& rc : {RouteCase{MOE_FORMAT_BF16, MOE_ROUTING_SOFTMAX_TOPK, false, 32},
                              RouteCase{MOE_FORMAT_BF16, MOE_ROUTING_SOFTMAX_TOPK, false, 33},
                              RouteCase{kFp8, MOE_ROUTING_GROUPED_TOPK, true, 16},
                              RouteCase{kFp8, MOE_ROUTING_GROUPED_TOPK, true, 200},
                              RouteCase{kMx, MOE_ROUTING_SIGMOID_TOPK, true, 128},
                              RouteCase{kMx, MOE_ROUTING_SIGMOID_TOPK, true, 129}}) {
    const moe_problem p = with_routing(problem_, rc).c();
    const std::string what =
        fmt::format("{} {}{}, {} experts", format_name(rc.format), routing_name(rc.routing),
                    rc.bias ? " with a bias" : "", rc.experts);
    const LayerWeights w = random_weights(p, 87);
    const Layer apart = prepared_with(p, w, {{"MOE_MEGA_ROUTE", "apart"}});  // route(), launch
    const Layer fused = plugin_->prepare(p, w.view(), {});
    const Layer fused64 = prepared_with(p, w, {{"MOE_MEGA_ROUTE", "fused64"}});
    for (int64_t tokens : {1, 3, 8, 9, 33})
      for (Scenario sc : {Scenario::kRandom, Scenario::kPadding, Scenario::kTies}) {
        const Batch batch = random_batch(p, tokens, 300 + uint64_t(tokens), sc);
        const std::string at = fmt::format("{}, {} tokens, {}", what, tokens, scenario_name(sc));
        const Routing want = route_batch(*reference_, p, batch);
        Routing a;
        const RunResult ra = run_layer_routing(apart, p, batch, &a);
        for (const auto& [name, layer] :
             {std::pair<const char*, const Layer*>{"fused", &fused}, {"fused64", &fused64}}) {
          Routing b;
          const RunResult rb = run_layer_routing(*layer, p, batch, &b);
          const std::string in = at + ", " + name;
          EXPECT_TRUE(same_bytes(want.ids, b.ids)) << in << ": ids differ from the reference's";
          EXPECT_TRUE(same_bytes(a.ids, b.ids)) << in << ": ids differ from route()'s";
          EXPECT_TRUE(same_bytes(a.weights, b.weights)) << in << ": weights differ from route()'s";
          EXPECT_TRUE(same_bytes(ra.output, rb.output)) << in << ": outputs differ";
        }
      }
    // Which runs routed in the launch: up to kRouteInLaunchTokens tokens (64 with fused64), none
    // apart.
    for (const auto& [tokens, vars, in_launch] :
         {std::tuple{int64_t{8}, EnvVars{}, true}, std::tuple{int64_t{9}, EnvVars{}, false},
          std::tuple{int64_t{33}, EnvVars{{"MOE_MEGA_ROUTE", "fused64"}}, true},
          std::tuple{int64_t{8}, EnvVars{{"MOE_MEGA_ROUTE", "apart"}}, false}}) {
      const Batch batch = random_batch(p, tokens, 400 + uint64_t(tokens), Scenario::kRandom);
      const nlohmann::json j =
          timeline_of(p, w, vars, [&](const Layer& layer) { run_layer_routing(layer, p, batch); });
      ASSERT_FALSE(j.is_null()) << what;
      EXPECT_EQ(j["routes_in_launch"], in_launch)
          << what << ", " << tokens << " tokens, " << (vars.empty() ? "default" : vars[0].second);
      EXPECT_EQ(j["tokens"], tokens) << what;
    }
  }
}

}  // namespace
}  // namespace moe::test
