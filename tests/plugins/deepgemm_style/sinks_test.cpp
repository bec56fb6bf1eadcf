// deepgemm_style's bf16 sink experts next to its e4m3 experts, through the C ABI on a GPU: both
// row layouts and both CUTLASS tilings, padding tokens, a shared expert, relu2 routed experts with
// biases, and a replayed CUDA graph with new inputs and routing, each within the fp8 tolerance
// of the fp64 reference; gemm_tiles: tokens_ffma and tokens_ffma192 (whose kernel would run the
// sinks' groups) are refused by name. Skips without an sm_90 GPU.
#include <cuda_runtime_api.h>

#include "../../support/graph_replay.hpp"
#include "../../support/plugin_fixture.hpp"

namespace moe::test {
namespace {

class DeepGemmSinks : public PluginAndReference<> {
 protected:
  void SetUp() override {
    load("deepgemm_style", "no CUDA or CUTLASS");
    if (IsSkipped() || HasFatalFailure()) return;
    moe_problem& r = problem_.raw();
    r.experts = 16;
    r.top_k = 4;
    r.hidden = 256;
    r.intermediate = 256;
    r.format = MOE_FORMAT_FP8_BLOCK;
    r.routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
    r.routing_bias = 1;
    r.sink_experts = 2;
    r.sink_intermediate = 192;
    r.max_tokens = 80;
    problem_.finalize();
    const Support s = plugin_->supports(problem_.c());
    if (!s.supported) GTEST_SKIP() << "deepgemm_style: " << s.message;
  }

  Problem problem_;
};

// Layers around the sinks: plain; with a shared expert; relu2 routed experts (the sinks stay
// silu_mul) with expert biases.
struct Around {
  bool shared, relu2_bias;
};

TEST_F(DeepGemmSinks, BothLayoutsAndBothTilingsMatchTheReference) {
  for (Around around : {Around{false, false}, Around{true, false}, Around{false, true}}) {
    Problem q = problem_;
    if (around.shared) q.raw().shared_intermediate = q.raw().intermediate;
    if (around.relu2_bias) {
      q.raw().activation = MOE_ACTIVATION_RELU2;
      q.raw().expert_bias = 1;
    }
    q.finalize();
    const moe_problem p = q.c();
    const LayerWeights w = random_weights(p, around.shared ? 12 : around.relu2_bias ? 13 : 11);
    const Layer ref_layer = reference_->prepare(p, w.view(), {});
    for (const char* layout : {"contiguous", "masked"}) {
      for (const char* tiles : {"auto", "tokens"}) {  // auto: swap-AB weight tiles here
        const Layer layer =
            plugin_->prepare(p, w.view(), {{"layout", layout}, {"gemm_tiles", tiles}});
        for (int64_t tokens : {1, 37, 80}) {
          for (Scenario scenario : {Scenario::kRandom, Scenario::kPadding}) {
            const Batch batch = random_batch(p, tokens, 90 + uint64_t(tokens), scenario);
            const Routing routing = route_batch(*reference_, p, batch);
            const RunResult out = run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16);
            const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
            EXPECT_LT(relative_l2(out.output, ref.output), 2e-2)
                << layout << ", " << tiles << (around.shared ? ", shared" : "")
                << (around.relu2_bias ? ", relu2 with biases" : "") << ", " << tokens << " tokens, "
                << scenario_name(scenario);
          }
        }
      }
    }
  }
}

TEST_F(DeepGemmSinks, TheOwnFfmaKernelIsRefusedByName) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 2);
  for (const char* own : {"tokens_ffma", "tokens_ffma192"})
    expect_error(
        [&] {
          plugin_->prepare(p, w.view(), {{"gemm_tiles", own}});
        },
        MOE_STATUS_CONFIG_ERROR, {std::string("'") + own + "'", "sink experts"});
}

// The sinks' cuBLAS GEMMs are captured with the rest (their workspace is the caller's): a replayed
// graph gives each new batch's result.
TEST_F(DeepGemmSinks, AReplayedGraphMatchesTheReferenceForNewInputs) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 5);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  const GraphReplay graph(plugin_, layer, p, 45);
  for (uint64_t seed : {31u, 32u}) {
    const Batch batch = random_batch(p, 45, seed, Scenario::kRandom);
    EXPECT_LT(graph.error_against(ref_layer, *reference_, p, batch), 2e-2) << "seed " << seed;
  }
}

}  // namespace
}  // namespace moe::test
