// Random layer weights (inputs.hpp): random_weights_fast draws quantised layers on every core and
// stays a function of the seed alone, with every tensor the problem needs and the scale-block
// structure that makes a misplaced scale visible.
#include "moe/inputs.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "moe/sdk/problem.hpp"
#include "moe/sdk/weights.hpp"

namespace moe {
namespace {

// fp8_block with everything optional: biases, a shared expert, sinks, static activation scales.
moe_problem everything() {
  moe_problem p = default_problem();
  p.experts = 6;
  p.top_k = 2;
  p.hidden = 256;
  p.intermediate = 128;
  p.format = MOE_FORMAT_FP8_BLOCK;
  p.input_format = MOE_INPUT_FP8_TENSOR_STATIC;
  p.expert_bias = 1;
  p.shared_intermediate = 128;
  p.routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  p.routing_bias = 1;
  p.sink_experts = 2;
  p.sink_intermediate = 128;
  p.max_tokens = 8;
  normalize_problem(p);
  validate_problem(p);
  return p;
}

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

TEST(RandomWeightsFast, QuantisedLayerHasEveryTensorTheProblemNeeds) {
  const moe_problem p = everything();
  const LayerWeights w = random_weights_fast(p, 5);
  EXPECT_NO_THROW(check_weights(p, w.view()));
  for (const HostTensor* t :
       {&w.b13, &w.b2, &w.a13_scale, &w.shared_w13, &w.shared_w2_scale, &w.sink_w13, &w.sink_w2})
    EXPECT_FALSE(t->empty());
}

TEST(RandomWeightsFast, IsAFunctionOfTheSeedAlone) {
  const moe_problem p = everything();
  const LayerWeights a = random_weights_fast(p, 5), b = random_weights_fast(p, 5);
  const LayerWeights c = random_weights_fast(p, 6);
  EXPECT_TRUE(same_bytes(a.w13, b.w13));
  EXPECT_TRUE(same_bytes(a.w2_scale, b.w2_scale));
  EXPECT_TRUE(same_bytes(a.sink_w2, b.sink_w2));
  EXPECT_FALSE(same_bytes(a.w13, c.w13));
}

TEST(RandomWeightsFast, ExpertsDifferAndBlockScalesVary) {
  const moe_problem p = everything();
  const LayerWeights w = random_weights_fast(p, 5);
  const size_t per_expert = w.w13.bytes() / size_t(p.local_experts);
  const auto* q = static_cast<const uint8_t*>(w.w13.raw());
  EXPECT_NE(std::memcmp(q, q + per_expert, per_expert), 0) << "experts 0 and 1 are equal";
  const int64_t blocks = w.w13_scale.numel() / p.local_experts;
  const std::set<float> expert0(w.w13_scale.data<float>(), w.w13_scale.data<float>() + blocks);
  EXPECT_EQ(int64_t(expert0.size()), blocks) << "128x128 block scales repeat";
}

}  // namespace
}  // namespace moe
