// Expert-parallel plans, proved on the CPU: R ranks simulated in one process, each token sent by
// the plan to the ranks owning its experts, computed there by a reference layer holding only
// that rank's experts, and summed back: the sum equals the whole layer on every rank's tokens.
#include <cmath>
#include <limits>

#include "../support/test_env.hpp"

namespace moe::test {
namespace {

Problem ep_problem(int32_t world, moe_ep_placement placement, int32_t rank, bool sinks) {
  Problem p;
  moe_problem& r = p.raw();
  r.experts = 12;
  r.top_k = 3;
  r.hidden = 48;
  r.intermediate = 32;
  if (sinks) {
    r.routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
    r.sink_experts = 2;
    r.sink_intermediate = 16;
  }
  r.ep_placement = placement;
  r.ep_size = world;
  r.ep_rank = rank;
  p.finalize();
  validate_problem(p.c());
  return p;
}

struct EpCase {
  int32_t world;
  moe_ep_placement placement;
  bool sinks;
};

class EpSimulation : public testing::TestWithParam<EpCase> {};

// Every rank's tokens (5, 8, 11, ... of them; rank 1's with padding) sent as the plan says
// (`owners`: every expert's rank; empty: the placement's) to the ranks' reference layers, which
// hold only their experts, summed back in f64 with the home pass: the largest gap to the whole
// layer `g` over every rank's tokens.
double largest_gap(const Registry& r, const moe_problem& g, const std::vector<Problem>& problems,
                   const std::vector<int32_t>& owners) {
  const auto ref = r.find("reference");
  const auto world = int32_t(problems.size());
  const LayerWeights global = random_weights(g, 3);
  const Layer full = ref->prepare(g, global.view(), {});
  std::vector<Layer> layers;
  for (int32_t d = 0; d < world; ++d)
    layers.push_back(
        ref->prepare(problems[d].c(), slice_local_experts(global, problems[d].c()).view(), {}));
  const int64_t h = g.hidden, w = topk_width(g);
  double gap = 0;
  for (int32_t src = 0; src < world; ++src) {
    const int64_t tokens = 5 + 3 * src;
    const Batch batch =
        random_batch(g, tokens, 10 + src, src == 1 ? Scenario::kPadding : Scenario::kRandom);
    const Routing routing = route_batch(*ref, g, batch);
    const moe_problem q = problems[src].c();
    const DispatchPlan plan = owners.empty()
                                  ? plan_dispatch(q, world, routing.ids.data<int32_t>(),
                                                  routing.weights.data<float>(), tokens)
                                  : plan_dispatch(q, world, routing.ids.data<int32_t>(),
                                                  routing.weights.data<float>(), tokens, owners);
    std::vector<double> acc(size_t(tokens * h), 0.0);
    for (int32_t d = 0; d < world; ++d) {
      const int64_t n = plan.send_counts[d], at = plan.send_offsets[d];
      if (n == 0) continue;
      HostTensor x(MOE_DTYPE_BF16, {n, h});
      Routing sent{HostTensor(MOE_DTYPE_I32, {n, w}), HostTensor(MOE_DTYPE_F32, {n, w})};
      for (int64_t i = 0; i < n; ++i) {
        const int32_t t = plan.send_tokens[at + i];
        std::memcpy(x.data<uint16_t>() + i * h, batch.hidden.data<uint16_t>() + t * h, h * 2);
        std::memcpy(sent.ids.data<int32_t>() + i * w, plan.send_ids.data() + (at + i) * w, w * 4);
        std::memcpy(sent.weights.data<float>() + i * w, plan.send_weights.data() + (at + i) * w,
                    w * 4);
      }
      const RunResult y = run_layer(layers[d], problems[d].c(), x, sent, MOE_DTYPE_F64);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < h; ++c)
          acc[size_t(plan.send_tokens[at + i] * h + c)] += y.output.data<double>()[i * h + c];
    }
    if (needs_home_pass(g)) {
      HostTensor ids(MOE_DTYPE_I32, {tokens, w});
      const auto home = home_pass_ids(g, routing.ids.data<int32_t>(), tokens);
      std::memcpy(ids.raw(), home.data(), ids.bytes());
      const RunResult y =
          run_layer(layers[src], q, batch.hidden, Routing{ids, routing.weights}, MOE_DTYPE_F64);
      for (int64_t i = 0; i < tokens * h; ++i) acc[size_t(i)] += y.output.data<double>()[i];
    }
    const RunResult want = run_layer(full, g, batch.hidden, routing, MOE_DTYPE_F64);
    for (int64_t i = 0; i < tokens * h; ++i)
      gap = std::max(gap, std::abs(acc[size_t(i)] - want.output.data<double>()[i]));
  }
  return gap;
}

Problem whole_layer(const Problem& ep) {
  Problem whole = ep;
  whole.raw().ep_placement = MOE_EP_NONE;
  whole.raw().ep_size = 1;
  whole.raw().ep_rank = 0;
  whole.finalize();
  return whole;
}

TEST_P(EpSimulation, RanksTogetherComputeTheWholeLayer) {
  const auto [world, placement, sinks] = GetParam();
  const Registry r = registry_of({build_plugin_dir()});
  std::vector<Problem> problems;
  for (int32_t d = 0; d < world; ++d) problems.push_back(ep_problem(world, placement, d, sinks));
  EXPECT_LE(largest_gap(r, whole_layer(problems[0]).c(), problems, {}), 1e-12);
}

// Caller maps decide where an expert lives (docs/design.md §4): rank 0 holds the odd experts in
// reverse local order, rank 1 the even ones, under a linear placement that says 0-5 and 6-11.
// Planned by the maps' owners the ranks compute the whole layer; by the placement's they would
// send tokens to ranks that skip them (the host step's bug before it swapped the maps).
TEST(EpPlan, CallerMapsDecideWhichRankATokenGoesTo) {
  const Registry r = registry_of({build_plugin_dir()});
  std::vector<std::vector<int32_t>> maps(2, std::vector<int32_t>(12, -1));
  for (int32_t e = 0; e < 12; ++e) maps[size_t(1 - e % 2)][size_t(e)] = e % 2 ? 5 - e / 2 : e / 2;
  std::vector<Problem> problems;
  for (int32_t d = 0; d < 2; ++d) {
    moe_problem q = ep_problem(2, MOE_EP_LINEAR, d, false).c();
    q.ep_map = maps[size_t(d)].data();
    problems.emplace_back(q);
    validate_problem(problems.back().c());
  }
  const std::vector<int32_t> owners = expert_owners(maps, 12);
  EXPECT_EQ(owners, (std::vector<int32_t>{1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0}));
  const moe_problem g = whole_layer(ep_problem(2, MOE_EP_LINEAR, 0, false)).c();
  EXPECT_LE(largest_gap(r, g, problems, owners), 1e-12);
  EXPECT_GT(largest_gap(r, g, problems, expert_owners(problems[0].c())), 1e-3);
}

// Maps that leave an expert on no rank, or put one on two, are refused naming the expert.
TEST(EpPlan, MapsThatLoseOrDoubleAnExpertAreRefused) {
  const std::vector<int32_t> a = {0, 1, -1, -1}, b = {-1, -1, 0, 1}, c = {-1, 0, 1, -1};
  EXPECT_EQ(expert_owners({a, b}, 4), (std::vector<int32_t>{0, 0, 1, 1}));
  expect_error(
      [&] {
        expert_owners({a, c}, 4);
      },
      MOE_STATUS_CONFIG_ERROR, {"expert 1 is held by ranks 0 and 1"});
  expect_error(
      [&] {
        expert_owners({b, {-1, 0, -1, -1}}, 4);
      },
      MOE_STATUS_CONFIG_ERROR, {"expert 0 is held by no rank"});
  expect_error(
      [&] {
        expert_owners({a, {0, 1}}, 4);
      },
      MOE_STATUS_CONFIG_ERROR, {"rank 1's expert map has 2 entries, not the 4 experts"});
}

INSTANTIATE_TEST_SUITE_P(
    Placements, EpSimulation,
    testing::Values(EpCase{2, MOE_EP_LINEAR, false}, EpCase{2, MOE_EP_ROUND_ROBIN, false},
                    EpCase{4, MOE_EP_LINEAR, true}, EpCase{3, MOE_EP_ROUND_ROBIN, true}),
    [](const testing::TestParamInfo<EpCase>& i) {
      return fmt::format("world{}_{}{}", i.param.world, ep_placement_name(i.param.placement),
                         i.param.sinks ? "_sinks" : "");
    });

TEST(EpPlan, ATokenTravelsOnceToEachRankAndOnlyWithThatRanksIds) {
  const Problem p = ep_problem(2, MOE_EP_LINEAR, 0, false);  // experts 0-5 on rank 0, 6-11 on 1
  const int32_t ids[] = {0,  5,  7,    // token 0: twice to rank 0, once to rank 1
                         -1, -1, -1,   // token 1: padding, travels nowhere
                         11, 10, -1};  // token 2: rank 1 only
  const float w[] = {.5f, .3f, .2f, 0, 0, 0, .6f, .4f, 0};
  const DispatchPlan plan = plan_dispatch(p.c(), 2, ids, w, 3);
  EXPECT_EQ(plan.send_counts, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(plan.send_tokens, (std::vector<int32_t>{0, 0, 2}));
  EXPECT_EQ(plan.send_ids, (std::vector<int32_t>{0, 5, -1, -1, -1, 7, 11, 10, -1}));
  EXPECT_EQ(plan.send_weights, (std::vector<float>{.5f, .3f, 0, 0, 0, .2f, .6f, .4f, 0}));
}

// An id below -1 (-1 is "no expert") is refused as the layer's run refuses it, never dropped.
TEST(EpPlan, AnIdBelowMinusOneIsRefusedLikeOneAboveTheExperts) {
  const Problem p = ep_problem(2, MOE_EP_LINEAR, 0, false);
  const float w[] = {.5f, .3f, .2f, .5f, .3f, .2f};
  for (const int32_t bad : {-5, std::numeric_limits<int32_t>::min(), 12}) {
    const int32_t ids[] = {0, 5, 7, 1, bad, -1};
    expect_error([&] { plan_dispatch(p.c(), 2, ids, w, 2); }, MOE_STATUS_INVALID_ARGUMENT,
                 {fmt::format("topk_ids[1][1]={} is outside [-1, experts=12)", bad)});
  }
}

TEST(EpPlan, WorldSizeThatDiffersFromEpSizeIsRefused) {
  const Problem p = ep_problem(2, MOE_EP_ROUND_ROBIN, 0, false);
  const int32_t ids[] = {0, 1, 2};
  const float w[] = {1, 0, 0};
  expect_error([&] { plan_dispatch(p.c(), 3, ids, w, 1); }, MOE_STATUS_INVALID_ARGUMENT,
               {"world size 3 differs from the problem's ep_size=2"});
}

TEST(EpPlan, EpSizeThatDoesNotDivideTheExpertsIsRefused) {
  Problem p = ep_problem(2, MOE_EP_LINEAR, 0, false);
  p.raw().ep_size = 5;
  p.finalize();
  expect_error([&] { validate_problem(p.c()); }, MOE_STATUS_INVALID_ARGUMENT,
               {"ep_size=5 does not divide experts=12"});
}

TEST(EpPlan, ConfigDigestDiffersWithTheSeedAndNotWithTheRank) {
  const Problem a = ep_problem(2, MOE_EP_LINEAR, 0, false),
                b = ep_problem(2, MOE_EP_LINEAR, 1, false);
  EXPECT_EQ(config_digest(a.c(), "x", 1), config_digest(b.c(), "x", 1));
  EXPECT_NE(config_digest(a.c(), "x", 1), config_digest(a.c(), "x", 2));
  EXPECT_NE(config_digest(a.c(), "x", 1), config_digest(a.c(), "y", 1));
}

}  // namespace
}  // namespace moe::test
