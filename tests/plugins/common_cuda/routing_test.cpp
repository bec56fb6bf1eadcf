// launch_route against moe::reference::route: ids exactly (ties and NaN included), weights to 1e-6.
#include <cmath>
#include <limits>
#include <vector>

#include "cuda_test_env.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/routing.hpp"
#include "routing.hpp"  // plugins/reference: the oracle

namespace moe::gpu {
namespace {

using test::DeviceBuffer;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

moe_problem make_problem(moe_routing routing, int64_t experts, int64_t top_k) {
  moe_problem p = default_problem();
  p.routing = routing;
  p.experts = experts;
  p.top_k = top_k;
  p.renormalize = 0;
  return p;
}

moe_problem grouped(int64_t experts, int64_t top_k, int64_t groups, int64_t kept, bool bias) {
  moe_problem p = make_problem(MOE_ROUTING_GROUPED_TOPK, experts, top_k);
  p.num_groups = groups;
  p.topk_group = kept;
  p.routing_bias = bias;
  p.renormalize = 1;
  p.routed_scaling_factor = 2.5f;
  return p;
}

moe_problem sink(int64_t experts, int64_t top_k, int64_t sinks) {
  moe_problem p = make_problem(MOE_ROUTING_SIGMOID_BIAS_SINK, experts, top_k);
  p.sink_experts = sinks;
  p.routing_bias = 1;
  p.route_scale = 2.0f;
  p.global_scale = 0.75f;
  return p;
}

class RouteTest : public test::CudaTest {
 protected:
  std::vector<float> normal_logits(const moe_problem& p, int64_t tokens, float stddev = 1.5f) {
    std::vector<float> v(static_cast<size_t>(tokens * (p.experts + p.sink_experts)));
    for (auto& x : v) x = normal(stddev);
    return v;
  }
  // Multiples of 0.5 in [-1.5, 1.5]: most tokens have several equal logits.
  std::vector<float> grid_logits(const moe_problem& p, int64_t tokens) {
    std::vector<float> v(static_cast<size_t>(tokens * (p.experts + p.sink_experts)));
    for (auto& x : v) x = 0.5f * float(randint(-3, 3));
    return v;
  }
  std::vector<float> bias_for(const moe_problem& p, bool grid = false) {
    if (!p.routing_bias) return {};
    std::vector<float> b(static_cast<size_t>(p.experts));
    for (auto& x : b) x = grid ? 0.5f * float(randint(0, 1)) : normal(0.05f);
    return b;
  }

  // Routes on both sides and compares: ids exactly, weights within 1e-6 (NaN matches NaN).
  void expect_matches_reference(const moe_problem& p, int64_t tokens,
                                const std::vector<float>& logits, const std::vector<float>& bias,
                                const std::vector<uint8_t>& padding = {}) {
    const int64_t width = topk_width(p);
    const size_t n = size_t(tokens * width);
    std::vector<int32_t> want_ids(n, -7);
    std::vector<float> want_w(n, kNaN);
    reference::route(p, tokens, logits.data(), bias.empty() ? nullptr : bias.data(),
                     padding.empty() ? nullptr : padding.data(), want_ids.data(), want_w.data());

    DeviceBuffer<float> d_logits(logits), d_bias(bias);
    DeviceBuffer<uint8_t> d_padding(padding);
    DeviceBuffer<int32_t> d_ids(n);
    DeviceBuffer<float> d_w(n);
    d_ids.poison(0x7b);
    d_w.poison(0xff);
    launch_route(p, tokens, d_logits.get(), bias.empty() ? nullptr : d_bias.get(),
                 padding.empty() ? nullptr : d_padding.get(), d_ids.get(), d_w.get(), stream_);
    sync();
    const std::vector<int32_t> ids = d_ids.download();
    const std::vector<float> w = d_w.download();

    int reported = 0;
    for (size_t i = 0; i < n && reported < 10; ++i) {
      const bool weight_ok =
          (std::isnan(w[i]) && std::isnan(want_w[i])) ||
          std::abs(double(w[i]) - want_w[i]) <= 1e-6 * std::max(1.0, std::abs(double(want_w[i])));
      if (ids[i] != want_ids[i] || !weight_ok) {
        ++reported;
        ADD_FAILURE() << describe_problem(p) << " token " << i / width << " column " << i % width
                      << ": id " << ids[i] << " weight " << w[i] << ", reference id " << want_ids[i]
                      << " weight " << want_w[i];
      }
    }
  }
};

TEST_F(RouteTest, SoftmaxTopkMatchesTheReferenceOnRandomLogits) {
  for (int renormalize : {0, 1}) {
    moe_problem p = make_problem(MOE_ROUTING_SOFTMAX_TOPK, 256, 8);
    p.renormalize = renormalize;
    expect_matches_reference(p, 4096, normal_logits(p, 4096), {});
  }
}

TEST_F(RouteTest, SigmoidTopkWithBiasMatchesTheReferenceOnRandomLogits) {
  for (int renormalize : {0, 1}) {
    moe_problem p = make_problem(MOE_ROUTING_SIGMOID_TOPK, 256, 8);
    p.renormalize = renormalize;
    p.routing_bias = 1;
    expect_matches_reference(p, 4096, normal_logits(p, 4096), bias_for(p));
  }
}

TEST_F(RouteTest, GroupedTopkDeepSeekV3MatchesTheReference) {
  const moe_problem p = grouped(256, 8, 8, 4, /*bias=*/true);
  expect_matches_reference(p, 4096, normal_logits(p, 4096), bias_for(p));
}

TEST_F(RouteTest, GroupedTopkSoftmaxWithoutBiasMatchesTheReference) {
  moe_problem p = grouped(64, 6, 8, 3, /*bias=*/false);
  p.score_function = MOE_SCORE_SOFTMAX;
  p.renormalize = 0;
  p.routed_scaling_factor = 1.0f;
  expect_matches_reference(p, 2048, normal_logits(p, 2048), {});
}

TEST_F(RouteTest, GroupedTopkWithMoreGroupsThanLanesMatchesTheReference) {
  const moe_problem p = grouped(1024, 8, 64, 16, /*bias=*/true);  // lanes loop over groups
  expect_matches_reference(p, 512, normal_logits(p, 512), bias_for(p));
}

TEST_F(RouteTest, SigmoidBiasSinkMatchesTheReference) {
  const moe_problem p = sink(64, 6, 2);
  expect_matches_reference(p, 4096, normal_logits(p, 4096), bias_for(p));
}

TEST_F(RouteTest, TiesOnAHalfGridGoToTheLowestIndexInEveryMethod) {
  moe_problem softmax = make_problem(MOE_ROUTING_SOFTMAX_TOPK, 64, 8);
  softmax.renormalize = 1;
  moe_problem sigmoid_bias = make_problem(MOE_ROUTING_SIGMOID_TOPK, 64, 8);
  sigmoid_bias.routing_bias = 1;
  moe_problem grouped_softmax = grouped(64, 8, 8, 4, false);
  grouped_softmax.score_function = MOE_SCORE_SOFTMAX;
  const moe_problem problems[] = {
      softmax,         sigmoid_bias,  grouped(64, 8, 8, 4, true), grouped(64, 8, 8, 4, false),
      grouped_softmax, sink(64, 6, 2)};
  for (const moe_problem& p : problems) {
    SCOPED_TRACE(describe_problem(p));
    expect_matches_reference(p, 512, grid_logits(p, 512), bias_for(p, /*grid=*/true));
  }
}

TEST_F(RouteTest, NanRanksLowestAndInfinitiesRouteLikeTheReference) {
  moe_problem softmax = make_problem(MOE_ROUTING_SOFTMAX_TOPK, 32, 4);
  moe_problem sigmoid = make_problem(MOE_ROUTING_SIGMOID_TOPK, 32, 4);
  sigmoid.renormalize = 1;
  const moe_problem problems[] = {softmax, sigmoid, grouped(32, 4, 4, 2, true), sink(32, 4, 2)};
  for (const moe_problem& p : problems) {
    SCOPED_TRACE(describe_problem(p));
    std::vector<float> logits = grid_logits(p, 256);
    for (auto& x : logits) {
      const int64_t r = randint(0, 19);
      if (r == 0) x = kNaN;
      if (r == 1) x = kInf;
      if (r == 2) x = -kInf;
    }
    expect_matches_reference(p, 256, logits, bias_for(p));
  }
}

// Renormalised scores that all underflow take the reference's limit (a softmax of their logs):
// sigmoid logits near -800, and softmax experts a bias picks from far below the row's max.
TEST_F(RouteTest, ScoresThatAllUnderflowRenormalizeLikeTheReference) {
  moe_problem sigmoid = make_problem(MOE_ROUTING_SIGMOID_TOPK, 32, 4);
  sigmoid.renormalize = 1;
  moe_problem softmax = make_problem(MOE_ROUTING_SOFTMAX_TOPK, 32, 4);
  softmax.renormalize = 1;
  softmax.routing_bias = 1;
  const moe_problem grouped_sigmoid = grouped(32, 4, 4, 2, false);
  for (const moe_problem& p : {sigmoid, grouped_sigmoid}) {
    SCOPED_TRACE(describe_problem(p));
    std::vector<float> logits = normal_logits(p, 128);
    for (auto& x : logits) x -= 800.0f;
    expect_matches_reference(p, 128, logits, bias_for(p));
  }
  std::vector<float> logits = normal_logits(softmax, 128);
  for (size_t i = 0; i < logits.size(); ++i)
    if (i % 32 >= 4) logits[i] -= 800.0f;  // experts 4.. far below 0..3
  std::vector<float> bias(32, 0.0f);
  for (size_t e = 4; e < 32; ++e) bias[e] = 2.0f + normal(0.1f);  // and chosen by the bias
  expect_matches_reference(softmax, 128, logits, bias);
}

TEST_F(RouteTest, PaddingTokensGetNoExpertsAndZeroWeights) {
  const moe_problem problems[] = {make_problem(MOE_ROUTING_SOFTMAX_TOPK, 64, 4),
                                  grouped(64, 4, 8, 2, true), sink(64, 4, 2)};
  for (const moe_problem& p : problems) {
    SCOPED_TRACE(describe_problem(p));
    std::vector<uint8_t> padding(300);
    for (auto& x : padding) x = randint(0, 2) == 0 ? uint8_t(randint(1, 255)) : 0;
    expect_matches_reference(p, 300, normal_logits(p, 300), bias_for(p), padding);
  }
}

TEST_F(RouteTest, ZeroAndOneTokens) {
  const moe_problem p = grouped(256, 8, 8, 4, true);
  expect_matches_reference(p, 0, {}, bias_for(p));  // no launch, no error
  expect_matches_reference(p, 1, normal_logits(p, 1), bias_for(p));
  const moe_problem s = sink(64, 6, 2);
  expect_matches_reference(s, 1, normal_logits(s, 1), bias_for(s));
}

TEST_F(RouteTest, ExpertCountsThatAreNotMultiplesOfTheWarp) {
  moe_problem a = make_problem(MOE_ROUTING_SOFTMAX_TOPK, 77, 5);
  moe_problem b = make_problem(MOE_ROUTING_SIGMOID_TOPK, 3, 3);
  moe_problem c = make_problem(MOE_ROUTING_SOFTMAX_TOPK, 512, 16);
  c.renormalize = 1;
  const moe_problem problems[] = {a, b, c, grouped(96, 4, 6, 2, true), sink(33, 16, 8)};
  for (const moe_problem& p : problems) {
    SCOPED_TRACE(describe_problem(p));
    expect_matches_reference(p, 333, normal_logits(p, 333), bias_for(p));
  }
}

TEST_F(RouteTest, ThousandsOfExpertsUseFewerWarpsPerBlockAndMoreSharedMemory) {
  // 4096 experts: one warp's scores take 36 KB (one warp per block); 6000: 54 KB, past the
  // default 48 KB limit.
  for (int64_t experts : {4096, 6000}) {
    moe_problem p = make_problem(MOE_ROUTING_SOFTMAX_TOPK, experts, 8);
    p.renormalize = 1;
    expect_matches_reference(p, 64, normal_logits(p, 64), {});
  }
}

}  // namespace
}  // namespace moe::gpu
