// What trtllm_style's GPU tests share: the build's registry with the plugin (a test skips where
// it was not built) and the reference, and the E = 16, k = 4 problems they run.
#pragma once

#include <string>

#include "../../support/graph_replay.hpp"
#include "../../support/plugin_fixture.hpp"

namespace moe::test {

template <class Base = testing::Test>
class TrtllmGpuTest : public PluginAndReference<Base> {
 protected:
  void SetUp() override { this->load("trtllm_style", "no CUDA or CUTLASS"); }

  // `q` with two sink experts of `sink_intermediate` (Inkling routing), run apart by the plugin
  // against the reference within 2e-2: random routing,
  // padding tokens and one expert taking every token, then a graph replayed with new inputs. A
  // machine that cannot run `q` at all skips; a refusal of its sinks fails.
  void expect_sinks_apart_match(Problem q, int64_t sink_intermediate, uint64_t seed) {
    const Support without = this->plugin_->supports(q.c());
    if (!without.supported) GTEST_SKIP() << "trtllm_style: " << without.message;
    q.raw().sink_experts = 2;
    q.raw().sink_intermediate = sink_intermediate;
    q.raw().routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
    q.raw().routing_bias = 1;
    q.finalize();
    const moe_problem p = q.c();
    const Support s = this->plugin_->supports(p);
    ASSERT_TRUE(s.supported) << s.message;
    const LayerWeights w = random_weights(p, seed);
    const Layer layer = this->plugin_->prepare(p, w.view(), {});
    const Layer ref_layer = this->reference_->prepare(p, w.view(), {});
    expect_matches_reference(layer, ref_layer, *this->reference_, p, {1, 5, 37, 64}, seed + 1,
                             2e-2);
    const GraphReplay graph(this->plugin_, layer, p, 29);
    for (uint64_t replay : {seed + 2, seed + 3}) {
      const Batch batch = random_batch(p, 29, replay, Scenario::kRandom);
      EXPECT_LT(graph.error_against(ref_layer, *this->reference_, p, batch), 2e-2)
          << "replayed, seed " << replay;
    }
  }
};

// One layer of 16 experts, top-4: its weights and activations, a shared expert (0: none) and
// biases; the clamped activations take limit 7 and alpha 1.702 (gpt-oss's).
struct TrtllmLayerSpec {
  moe_format format;
  moe_input_format input;
  moe_activation activation;
  int64_t shared;
  bool bias;
  int64_t hidden, intermediate, max_tokens;
};

inline Problem trtllm_problem(const TrtllmLayerSpec& s) {
  Problem q;
  q.raw().experts = 16;
  q.raw().top_k = 4;
  q.raw().hidden = s.hidden;
  q.raw().intermediate = s.intermediate;
  q.raw().max_tokens = s.max_tokens;
  q.raw().format = s.format;
  q.raw().input_format = s.input;
  q.raw().activation = s.activation;
  q.raw().expert_bias = s.bias ? 1 : 0;
  q.raw().shared_intermediate = s.shared;
  if (s.activation == MOE_ACTIVATION_SILU_MUL_CLAMP || s.activation == MOE_ACTIVATION_SWIGLU_OAI) {
    q.raw().activation_limit = 7.0f;
    q.raw().activation_alpha = 1.702f;
  }
  q.finalize();
  return q;
}

}  // namespace moe::test
