// The trtllm_style layer on a GPU, through the C ABI: captured in a CUDA graph and replayed with
// new inputs in the same buffers, it matches the reference each time; tokens above max_tokens
// and a wrong dtype are statuses. Skips without an sm_90 GPU.
#include <cuda_runtime_api.h>

#include "../../support/graph_replay.hpp"
#include "../../support/test_env.hpp"

namespace moe::test {
namespace {

class TrtllmGraph : public testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_unique<Registry>(registry_of({build_plugin_dir()}));
    plugin_ = registry_->find("trtllm_style");
    reference_ = registry_->find("reference");
    if (plugin_ == nullptr) GTEST_SKIP() << "trtllm_style was not built (no CUDA or CUTLASS)";
    problem_.raw().experts = 16;
    problem_.raw().top_k = 4;
    problem_.raw().hidden = 256;
    problem_.raw().intermediate = 192;
    problem_.raw().max_tokens = 64;
    problem_.finalize();
    const Support s = plugin_->supports(problem_.c());
    if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
  }

  std::unique_ptr<Registry> registry_;
  std::shared_ptr<Plugin> plugin_, reference_;
  Problem problem_;
};

// A host tensor's bytes into an existing device buffer.
void put(const Buffer& b, const HostTensor& t) {
  b.upload(t.raw(), t.bytes());
}

TEST_F(TrtllmGraph, ReplayedGraphMatchesTheReferenceForNewInputs) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 5);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  const GraphReplay graph(plugin_, layer, p, 37);
  for (uint64_t seed : {11u, 12u, 13u}) {
    const Batch batch = random_batch(p, 37, seed, Scenario::kRandom);
    const Routing routing = route_batch(*reference_, p, batch);
    const HostTensor got = graph.replay(batch, routing);
    const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
    EXPECT_LT(relative_l2(got, ref.output), 1e-2) << "seed " << seed;
  }
}

// Every activation, through both tile shapes (the epilogue pairs up/gate differently in each),
// with the activation fused into GEMM1's epilogue and as a kernel of its own.
struct EpilogueCase {
  moe_activation activation;
  bool bias, sinks;
  const char* tiles;
  const char* epilogue;
};

class TrtllmEpilogue : public TrtllmGraph, public testing::WithParamInterface<EpilogueCase> {};

TEST_P(TrtllmEpilogue, MatchesTheReference) {
  const EpilogueCase c = GetParam();
  Problem q = problem_;
  q.raw().activation = c.activation;
  q.raw().activation_alpha = 1.702f;
  q.raw().activation_limit = 3.0f;  // small enough that the random GEMM1 outputs get clamped
  q.raw().gelu_tanh = 1;
  q.raw().expert_bias = c.bias ? 1 : 0;
  if (c.sinks) {
    q.raw().sink_experts = 2;
    q.raw().sink_intermediate = q.raw().intermediate;
    q.raw().routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
    q.raw().routing_bias = 1;
  }
  q.finalize();
  const moe_problem p = q.c();
  const LayerWeights w = random_weights(p, 21);
  const Layer layer =
      plugin_->prepare(p, w.view(), {{"gemm_tiles", c.tiles}, {"activation_epilogue", c.epilogue}});
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  for (int64_t tokens : {1, 37, 64}) {
    const Batch batch = random_batch(p, tokens, 40 + uint64_t(tokens), Scenario::kRandom);
    const Routing routing = route_batch(*reference_, p, batch);
    const RunResult out = run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16);
    const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
    EXPECT_LT(relative_l2(out.output, ref.output), 1e-2) << tokens << " tokens";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Activations, TrtllmEpilogue,
    testing::Values(EpilogueCase{MOE_ACTIVATION_SILU_MUL, false, false, "tokens", "fused"},
                    EpilogueCase{MOE_ACTIVATION_SILU_MUL, false, false, "weights", "fused"},
                    EpilogueCase{MOE_ACTIVATION_SILU_MUL, false, true, "tokens", "fused"},
                    EpilogueCase{MOE_ACTIVATION_SILU_MUL, false, true, "weights", "fused"},
                    EpilogueCase{MOE_ACTIVATION_SILU_MUL_CLAMP, false, false, "weights", "fused"},
                    EpilogueCase{MOE_ACTIVATION_SWIGLU_OAI, true, false, "tokens", "fused"},
                    EpilogueCase{MOE_ACTIVATION_SWIGLU_OAI, true, false, "weights", "fused"},
                    EpilogueCase{MOE_ACTIVATION_SWIGLU_OAI, true, false, "weights", "separate"},
                    EpilogueCase{MOE_ACTIVATION_GELU_MUL, true, false, "tokens", "fused"},
                    EpilogueCase{MOE_ACTIVATION_GELU_MUL, false, false, "weights", "fused"},
                    EpilogueCase{MOE_ACTIVATION_RELU2, true, false, "tokens", "fused"},
                    EpilogueCase{MOE_ACTIVATION_RELU2, false, false, "weights", "fused"},
                    EpilogueCase{MOE_ACTIVATION_RELU2, false, false, "tokens", "separate"},
                    EpilogueCase{MOE_ACTIVATION_SILU_MUL, false, true, "wide", "separate"},
                    EpilogueCase{MOE_ACTIVATION_SWIGLU_OAI, true, false, "wide", "fused"}),
    [](const testing::TestParamInfo<EpilogueCase>& info) {
      const EpilogueCase& c = info.param;
      return fmt::format("{}{}{}_{}_{}", activation_name(c.activation), c.bias ? "_bias" : "",
                         c.sinks ? "_sinks" : "", c.tiles, c.epilogue);
    });

// Partial tiles in N (I=200 pads to 208: GEMM1 N=416 is 3.25 128-wide tiles) and enough tiles
// that every CTA of the persistent kernels takes several, so the fused epilogue's staging tile
// is reused across work tiles; every tile shape, fused and separate.
TEST_F(TrtllmGraph, PartialTilesAndManyTilesPerCtaMatchTheReference) {
  Problem q = problem_;
  q.raw().experts = 32;
  q.raw().top_k = 4;
  q.raw().intermediate = 200;
  q.raw().max_tokens = 2048;
  q.finalize();
  const moe_problem p = q.c();
  const LayerWeights w = random_weights(p, 31);
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  const int64_t tokens = 2000;
  const Batch batch = random_batch(p, tokens, 77, Scenario::kRandom);
  const Routing routing = route_batch(*reference_, p, batch);
  const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
  for (const char* tiles : {"tokens", "weights", "wide"}) {
    for (const char* epilogue : {"fused", "separate"}) {
      const Layer layer =
          plugin_->prepare(p, w.view(), {{"gemm_tiles", tiles}, {"activation_epilogue", epilogue}});
      const RunResult out = run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16);
      EXPECT_LT(relative_l2(out.output, ref.output), 1e-2) << tiles << ", " << epilogue;
    }
  }
}

TEST_F(TrtllmGraph, UnknownEpilogueOptionIsAConfigError) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 5);
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"activation_epilogue", "maybe"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"activation_epilogue 'maybe' is not auto, fused or separate"});
}

// Tensors that start 2 bytes off a 16-byte boundary take the kernels' unvectorised paths and
// still give the right answer; a workspace off its 256-byte alignment is a clear status.
TEST_F(TrtllmGraph, MisalignedTensorsStillMatchAndAMisalignedWorkspaceIsAStatus) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 7);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  const int64_t tokens = 19, width = p.top_k;
  const Batch batch = random_batch(p, tokens, 3, Scenario::kRandom);
  const Routing routing = route_batch(*reference_, p, batch);
  const size_t row_bytes = size_t(tokens * p.hidden * 2);
  Buffer hidden(plugin_, row_bytes + 16), out(plugin_, row_bytes + 16),
      ids(plugin_, tokens * width * 4), weights(plugin_, tokens * width * 4);
  const size_t ws_bytes = layer.workspace_size(tokens);
  Buffer ws(plugin_, ws_bytes + 256);
  char* h = static_cast<char*>(hidden.data()) + 2;
  char* o = static_cast<char*>(out.data()) + 2;
  ASSERT_EQ(cudaMemcpy(h, batch.hidden.raw(), row_bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(o, 0xFF, row_bytes), cudaSuccess);  // poison
  put(ids, routing.ids);
  put(weights, routing.weights);
  moe_run_args args{};
  args.hidden = make_view(h, MOE_DTYPE_BF16, {tokens, p.hidden});
  args.topk_ids = make_view(ids.data(), MOE_DTYPE_I32, {tokens, width});
  args.topk_weights = make_view(weights.data(), MOE_DTYPE_F32, {tokens, width});
  args.output = make_view(o, MOE_DTYPE_BF16, {tokens, p.hidden});
  args.workspace = ws.data();
  args.workspace_size = ws_bytes;
  layer.run(args);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  HostTensor got(MOE_DTYPE_BF16, {tokens, p.hidden});
  ASSERT_EQ(cudaMemcpy(got.raw(), o, row_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
  EXPECT_LT(relative_l2(got, ref.output), 1e-2);

  args.workspace = static_cast<char*>(ws.data()) + 16;
  expect_error([&] { layer.run(args); }, MOE_STATUS_INVALID_ARGUMENT, {"aligned"});
}

TEST_F(TrtllmGraph, TokensAboveMaxTokensAreACapacityError) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 5);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  Problem roomy = problem_;  // route the 65 tokens under a problem that admits them
  roomy.raw().max_tokens = 128;
  const Batch batch = random_batch(roomy.c(), 65, 1, Scenario::kRandom);
  const Routing routing = route_batch(*reference_, roomy.c(), batch);
  expect_error([&] { run_layer(layer, p, batch.hidden, routing); }, MOE_STATUS_CAPACITY_EXCEEDED,
               {"65 tokens exceed max_tokens=64"});
}

TEST_F(TrtllmGraph, OnlyBf16WeightsAreSupportedWithTheReason) {
  Problem fp8 = problem_;
  fp8.raw().format = MOE_FORMAT_FP8_BLOCK;
  fp8.raw().input_format = MOE_INPUT_DEFAULT;
  fp8.finalize();
  const Support s = plugin_->supports(fp8.c());
  EXPECT_FALSE(s.supported);
  EXPECT_EQ(s.reason, MOE_REASON_FORMAT);
  EXPECT_THAT(s.message, testing::HasSubstr("trtllm_style takes only bf16 weights, not"));
}

}  // namespace
}  // namespace moe::test
