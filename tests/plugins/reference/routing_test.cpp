// The reference routing against expectations worked out by hand (docs/design.md §4).
#include "routing.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"

namespace {

using moe::reference::route;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Routed {
  std::vector<int32_t> ids;    // [T, k + S]
  std::vector<float> weights;  // [T, k + S]
};

moe_problem make_problem(moe_routing routing, int64_t experts, int64_t top_k) {
  moe_problem p = moe::default_problem();
  p.routing = routing;
  p.experts = experts;
  p.top_k = top_k;
  p.renormalize = 0;
  return p;
}

// logits [T, E + S]; bias and padding empty = not given. Outputs start poisoned.
Routed run(const moe_problem& p, const std::vector<float>& logits,
           const std::vector<float>& bias = {}, const std::vector<uint8_t>& padding = {}) {
  const int64_t tokens = static_cast<int64_t>(logits.size()) / (p.experts + p.sink_experts);
  const size_t size = tokens * moe::topk_width(p);
  Routed r{std::vector<int32_t>(size, 7777), std::vector<float>(size, kNaN)};
  route(p, tokens, logits.data(), bias.empty() ? nullptr : bias.data(),
        padding.empty() ? nullptr : padding.data(), r.ids.data(), r.weights.data());
  return r;
}

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

void expect_weights(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_FLOAT_EQ(got[i], static_cast<float>(want[i])) << "column " << i;
}

std::string error_of(const moe_problem& p, const std::vector<float>& logits,
                     const std::vector<float>& bias = {}) {
  try {
    run(p, logits, bias);
  } catch (const moe::Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_INVALID_ARGUMENT);
    return e.what();
  }
  return "no error";
}

TEST(ReferenceRouting, SoftmaxTopkWeightsAreSoftmaxProbabilities) {
  const moe_problem p = make_problem(MOE_ROUTING_SOFTMAX_TOPK, 4, 2);
  const Routed r = run(p, {1.0f, 3.0f, 0.5f, 2.0f});
  const double z = std::exp(1.0) + std::exp(3.0) + std::exp(0.5) + std::exp(2.0);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 3}));
  expect_weights(r.weights, {std::exp(3.0) / z, std::exp(2.0) / z});
}

TEST(ReferenceRouting, SoftmaxTopkRenormalizeDividesBySelectedSum) {
  moe_problem p = make_problem(MOE_ROUTING_SOFTMAX_TOPK, 4, 2);
  p.renormalize = 1;
  const Routed r = run(p, {1.0f, 3.0f, 0.5f, 2.0f});
  const double sum = std::exp(3.0) + std::exp(2.0);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 3}));
  expect_weights(r.weights, {std::exp(3.0) / sum, std::exp(2.0) / sum});
}

TEST(ReferenceRouting, SigmoidTopkWeightsAreSigmoidsOptionallyRenormalized) {
  moe_problem p = make_problem(MOE_ROUTING_SIGMOID_TOPK, 5, 3);
  const std::vector<float> logits = {-1.0f, 2.0f, 0.5f, 3.0f, 0.0f};
  Routed r = run(p, logits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 1, 2}));
  expect_weights(r.weights, {sigmoid(3.0), sigmoid(2.0), sigmoid(0.5)});

  p.renormalize = 1;
  r = run(p, logits);
  const double sum = sigmoid(3.0) + sigmoid(2.0) + sigmoid(0.5);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 1, 2}));
  expect_weights(r.weights, {sigmoid(3.0) / sum, sigmoid(2.0) / sum, sigmoid(0.5) / sum});
}

// Chosen scores that all underflow (sigmoid of a logit below about -708; softmax numerators a
// selection bias picks far below the row's max) renormalise to the ratio's limit, not 0 / 0.
TEST(ReferenceRouting, RenormalizingScoresThatAllUnderflowGivesTheRatiosLimit) {
  const double e = std::exp(1.0);
  moe_problem p = make_problem(MOE_ROUTING_SIGMOID_TOPK, 4, 2);
  p.renormalize = 1;
  Routed r = run(p, {-800.0f, -801.0f, -802.0f, -803.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1}));
  expect_weights(r.weights, {e / (1.0 + e), 1.0 / (1.0 + e)});

  p.routing = MOE_ROUTING_SOFTMAX_TOPK;
  p.routing_bias = 1;
  r = run(p, {0.0f, -800.0f, -801.0f, 0.0f}, {0.0f, 2.0f, 1.0f, 0.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 2}));
  expect_weights(r.weights, {e / (1.0 + e), 1.0 / (1.0 + e)});

  moe_problem g = make_problem(MOE_ROUTING_GROUPED_TOPK, 8, 2);
  g.num_groups = 4;
  g.topk_group = 2;
  g.renormalize = 1;
  g.routed_scaling_factor = 2.0f;
  r = run(g, {-900.0f, -901.0f, -902.0f, -903.0f, -904.0f, -905.0f, -906.0f, -907.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1}));  // every score 0: the lowest indices
  expect_weights(r.weights, {2.0 * e / (1.0 + e), 2.0 / (1.0 + e)});
}

TEST(ReferenceRouting, OutputIsInDescendingScoreOrder) {
  const moe_problem p = make_problem(MOE_ROUTING_SIGMOID_TOPK, 6, 4);
  const Routed r = run(p, {0.1f, 3.0f, -2.0f, 2.0f, 5.0f, 1.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{4, 1, 3, 5}));
  for (size_t i = 1; i < r.weights.size(); ++i) EXPECT_GT(r.weights[i - 1], r.weights[i]);
}

TEST(ReferenceRouting, EqualScoresGoToTheLowestIndex) {
  moe_problem p = make_problem(MOE_ROUTING_SOFTMAX_TOPK, 6, 3);
  EXPECT_EQ(run(p, {0.0f, 1.0f, 1.0f, 0.0f, 1.0f, 1.0f}).ids, (std::vector<int32_t>{1, 2, 4}));
  p.routing = MOE_ROUTING_SIGMOID_TOPK;
  EXPECT_EQ(run(p, {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f}).ids, (std::vector<int32_t>{0, 1, 2}));
}

TEST(ReferenceRouting, SelectionBiasChangesTheChoiceButNotTheWeights) {
  // softmax: expert 1 has the best probability, the bias lifts expert 2 above it.
  moe_problem p = make_problem(MOE_ROUTING_SOFTMAX_TOPK, 4, 1);
  p.routing_bias = 1;
  Routed r = run(p, {0.0f, 1.0f, 0.5f, 0.0f}, {0.0f, 0.0f, 1.0f, 0.0f});
  const double z = 2.0 + std::exp(1.0) + std::exp(0.5);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2}));
  expect_weights(r.weights, {std::exp(0.5) / z});

  // sigmoid: order follows sigmoid + bias, weights stay sigmoid(logit).
  p.routing = MOE_ROUTING_SIGMOID_TOPK;
  p.top_k = 2;
  r = run(p, {2.0f, 1.0f, 0.0f, -1.0f}, {0.0f, 0.0f, 0.0f, 3.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 0}));
  expect_weights(r.weights, {sigmoid(-1.0), sigmoid(2.0)});
}

moe_problem grouped_problem(int64_t experts, int64_t groups, int64_t topk_group, int64_t top_k) {
  moe_problem p = make_problem(MOE_ROUTING_GROUPED_TOPK, experts, top_k);
  p.num_groups = groups;
  p.topk_group = topk_group;
  return p;
}

// Groups of two: {5, -5} holds the single best expert, {2, 2} and {1, 1} have the best pairs.
const std::vector<float> kGroupLogits = {5.0f, -5.0f, 2.0f, 2.0f, 1.0f, 1.0f, -1.0f, -1.0f};

TEST(ReferenceRouting, GroupedTopkNeverSelectsFromAMaskedGroup) {
  moe_problem p = grouped_problem(8, 4, 2, 2);
  p.routing_bias = 1;
  // Top-2 sums: 1.0, 1.76, 1.46, 0.54 -> groups 1 and 2 kept; expert 0 (the best) is masked.
  const Routed r = run(p, kGroupLogits, std::vector<float>(8, 0.0f));
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 3}));
  expect_weights(r.weights, {sigmoid(2.0), sigmoid(2.0)});
}

TEST(ReferenceRouting, GroupedTopkScoresGroupsByTop2WithBiasAndByMaxWithout) {
  moe_problem p = grouped_problem(8, 4, 2, 2);
  // Without a bias the groups score their max: 0.993, 0.881, 0.731, 0.269 -> groups 0 and 1.
  EXPECT_EQ(run(p, kGroupLogits).ids, (std::vector<int32_t>{0, 2}));
  p.routing_bias = 1;  // the same logits, a zero bias: top-2 sums keep groups 1 and 2
  EXPECT_EQ(run(p, kGroupLogits, std::vector<float>(8, 0.0f)).ids, (std::vector<int32_t>{2, 3}));
}

TEST(ReferenceRouting, GroupedTopkWeightsAreUnbiasedRenormalizedThenScaled) {
  moe_problem p = grouped_problem(4, 2, 1, 2);
  p.routing_bias = 1;
  p.renormalize = 1;
  p.routed_scaling_factor = 2.5f;
  // s = 0.731, 0.690, 0.5, 0.450; b = s + {0, 0, .5, .5}: group 1 sums 1.95 > 1.42.
  const Routed r = run(p, {1.0f, 0.8f, 0.0f, -0.2f}, {0.0f, 0.0f, 0.5f, 0.5f});
  const double s2 = sigmoid(0.0), s3 = sigmoid(-0.2);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 3}));
  expect_weights(r.weights, {2.5 * s2 / (s2 + s3), 2.5 * s3 / (s2 + s3)});
}

TEST(ReferenceRouting, GroupedTopkSoftmaxScoreFunction) {
  moe_problem p = grouped_problem(4, 2, 1, 2);
  p.score_function = MOE_SCORE_SOFTMAX;
  // Group maxima p1 < p2: group 1 wins, so expert 3 is chosen over the better expert 1.
  const Routed r = run(p, {1.0f, 2.0f, 3.0f, 0.0f});
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + 1.0;
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 3}));
  expect_weights(r.weights, {std::exp(3.0) / z, 1.0 / z});
}

TEST(ReferenceRouting, GroupedTopkEqualGroupsGoToTheLowestGroup) {
  moe_problem p = grouped_problem(4, 2, 1, 1);
  EXPECT_EQ(run(p, {1.0f, 0.0f, 0.0f, 1.0f}).ids, (std::vector<int32_t>{0}));
  p = grouped_problem(6, 2, 1, 2);
  p.routing_bias = 1;  // top-2 sums tie at 2 * sigmoid(1); inside group 0 the three tie too
  EXPECT_EQ(run(p, {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f}, std::vector<float>(6, 0.0f)).ids,
            (std::vector<int32_t>{0, 1}));
}

moe_problem sink_problem() {
  moe_problem p = make_problem(MOE_ROUTING_SIGMOID_BIAS_SINK, 4, 2);
  p.sink_experts = 2;
  p.sink_intermediate = 64;
  return p;
}

// softmax(log_sigmoid(a)) == sigmoid(a) / sum(sigmoid(a)): an independent way to the weights.
std::vector<double> sink_weights(const std::vector<double>& active, double scale) {
  double sum = 0.0;
  for (double a : active) sum += sigmoid(a);
  std::vector<double> w;
  for (double a : active) w.push_back(sigmoid(a) / sum * scale);
  return w;
}

TEST(ReferenceRouting, SinkRoutingAppendsSinkIdsAndGammas) {
  moe_problem p = sink_problem();
  p.routing_bias = 1;
  p.route_scale = 1.5f;
  p.global_scale = 2.0f;
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f, 0.1f, 0.3f, -0.7f};
  // sigmoid + bias = 0.62, 1.27, 0.88, 0.52 -> experts 1, 2; their raw logits -1, 2 stay active.
  const Routed r = run(p, logits, {0.0f, 1.0f, 0.0f, 0.0f});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 2, 4, 5}));
  expect_weights(r.weights, sink_weights({-1.0, 2.0, 0.3, -0.7}, 3.0));

  p.renormalize = 1;  // ignored by this method
  EXPECT_EQ(run(p, logits, {0.0f, 1.0f, 0.0f, 0.0f}).weights, r.weights);
}

TEST(ReferenceRouting, SinkRoutingLargeLogitsGiveFiniteWeights) {
  const moe_problem p = sink_problem();
  const Routed r = run(p, {100.0f, -100.0f, 50.0f, -50.0f, 100.0f, -100.0f,  //
                           1e30f, -1e30f, -1e30f, 1e30f, -1e30f, 1e30f,      //
                           -1000.0f, -1001.0f, -1002.0f, -1003.0f, -1000.0f, -1010.0f});
  // sigmoid(100) == sigmoid(50) == 1 in double, and every sigmoid of the third token is 0: ties
  // go to the lowest index.
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 2, 4, 5, 0, 3, 4, 5, 0, 1, 4, 5}));
  for (float w : r.weights) EXPECT_TRUE(std::isfinite(w));
  expect_weights({r.weights.begin(), r.weights.begin() + 4},
                 sink_weights({100.0, 50.0, 100.0, -100.0}, 1.0));
  expect_weights({r.weights.begin() + 4, r.weights.begin() + 8},
                 sink_weights({1e30, 1e30, -1e30, 1e30}, 1.0));
  // Below about -745 every sigmoid underflows to 0 (so the identity above gives 0/0), while
  // log_sigmoid(a) = a exactly in double: the weights are softmax(a) = exp(a - max) / sum.
  const double z = 1.0 + std::exp(-1.0) + 1.0 + std::exp(-10.0);
  expect_weights({r.weights.begin() + 8, r.weights.end()},
                 {1.0 / z, std::exp(-1.0) / z, 1.0 / z, std::exp(-10.0) / z});
}

TEST(ReferenceRouting, PaddingTokensGetNoExperts) {
  const moe_problem p = sink_problem();
  const std::vector<float> token = {0.5f, -1.0f, 2.0f, 0.1f, 0.3f, -0.7f};
  std::vector<float> logits;
  for (int t = 0; t < 3; ++t) logits.insert(logits.end(), token.begin(), token.end());
  const Routed alone = run(p, token);
  const Routed r = run(p, logits, {}, {0, 1, 0});
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(r.ids[j], alone.ids[j]);
    EXPECT_EQ(r.ids[4 + j], -1);
    EXPECT_EQ(r.weights[4 + j], 0.0f);
    EXPECT_EQ(r.ids[8 + j], alone.ids[j]);
  }
}

TEST(ReferenceRouting, ZeroTokensWritesNothing) {
  const moe_problem p = make_problem(MOE_ROUTING_SOFTMAX_TOPK, 4, 2);
  std::vector<int32_t> ids(2, 7777);
  std::vector<float> weights(2, -3.0f);
  route(p, 0, nullptr, nullptr, nullptr, ids.data(), weights.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{7777, 7777}));
  EXPECT_EQ(weights, (std::vector<float>{-3.0f, -3.0f}));
}

TEST(ReferenceRouting, NanScoresRankBelowEveryNumber) {
  moe_problem p = make_problem(MOE_ROUTING_SIGMOID_TOPK, 4, 2);
  const Routed r = run(p, {kNaN, 0.0f, 1.0f, kNaN});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 1}));
  expect_weights(r.weights, {sigmoid(1.0), sigmoid(0.0)});
  // softmax: one NaN makes every probability NaN; the row still gets valid ids.
  p.routing = MOE_ROUTING_SOFTMAX_TOPK;
  EXPECT_EQ(run(p, {0.0f, kNaN, 1.0f, 2.0f}).ids, (std::vector<int32_t>{0, 1}));
}

TEST(ReferenceRouting, BiasMustMatchRoutingBias) {
  moe_problem p = make_problem(MOE_ROUTING_SIGMOID_TOPK, 4, 2);
  EXPECT_EQ(error_of(p, {0, 0, 0, 0}, {0, 0, 0, 0}), "bias is given but routing_bias=0");
  p.routing_bias = 1;
  EXPECT_EQ(error_of(p, {0, 0, 0, 0}), "bias is null but routing_bias=1");
}

TEST(ReferenceRouting, InconsistentRoutingFieldsAreRejected) {
  moe_problem p = make_problem(MOE_ROUTING_SOFTMAX_TOPK, 4, 5);
  EXPECT_EQ(error_of(p, {0, 0, 0, 0}), "top_k=5 must be in [1, experts=4]");
  p = grouped_problem(6, 4, 1, 1);
  EXPECT_EQ(error_of(p, {0, 0, 0, 0, 0, 0}), "num_groups=4 must divide experts=6");
  p = grouped_problem(4, 2, 1, 3);
  EXPECT_EQ(error_of(p, {0, 0, 0, 0}), "top_k=3 exceeds the 2 experts in topk_group=1 groups");
  p = make_problem(MOE_ROUTING_SOFTMAX_TOPK, 4, 2);
  p.sink_experts = 1;
  EXPECT_EQ(error_of(p, {0, 0, 0, 0, 0}), "sink_experts=1 needs routing sigmoid_bias_sink");
}

// The scales the weights are multiplied by are checked by route() itself, not only by a problem's
// validation: a caller of the routing alone gets an error, not NaN or negated weights.
TEST(ReferenceRouting, ScalesThatAreNotFiniteAndPositiveAreRejected) {
  moe_problem p = grouped_problem(4, 2, 1, 1);
  p.routed_scaling_factor = kNaN;
  EXPECT_EQ(error_of(p, {0, 0, 0, 0}), "routed_scaling_factor=nan must be finite and > 0");
  p.routed_scaling_factor = -1;
  EXPECT_EQ(error_of(p, {0, 0, 0, 0}), "routed_scaling_factor=-1 must be finite and > 0");
  p = make_problem(MOE_ROUTING_SIGMOID_BIAS_SINK, 4, 1);
  p.route_scale = 0;
  EXPECT_EQ(error_of(p, {0, 0, 0, 0}), "route_scale=0 must be finite and > 0");
  p.route_scale = 1;
  p.global_scale = std::numeric_limits<float>::infinity();
  EXPECT_EQ(error_of(p, {0, 0, 0, 0}), "global_scale=inf must be finite and > 0");
  p.global_scale = 1;
  p.sink_experts = 65;
  p.sink_intermediate = 8;
  EXPECT_EQ(error_of(p, std::vector<float>(69, 0.0f)), "sink_experts=65 must be <= 64");
}

}  // namespace
