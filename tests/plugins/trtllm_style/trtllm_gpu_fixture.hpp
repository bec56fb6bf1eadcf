// What trtllm_style's GPU tests share: the build's registry with the plugin (a test skips where
// it was not built) and the reference, and the E = 16, k = 4 problems they run.
#pragma once

#include "../../support/plugin_fixture.hpp"

namespace moe::test {

template <class Base = testing::Test>
class TrtllmGpuTest : public PluginAndReference<Base> {
 protected:
  void SetUp() override { this->load("trtllm_style", "no CUDA or CUTLASS"); }
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
