// The trtllm_style layer on a GPU (bf16 and fp8_tensor), through the C ABI: captured in a CUDA
// graph and replayed with new inputs in the same buffers, it matches the reference each time;
// tokens above max_tokens and a wrong dtype are statuses. Skips without an sm_90 GPU.
#include <cuda_runtime_api.h>

#include <cmath>
#include <string>

#include "../../support/graph_replay.hpp"
#include "moe/sdk/formats.hpp"
#include "trtllm_gpu_fixture.hpp"

namespace moe::test {
namespace {

class TrtllmGraph : public TrtllmGpuTest<> {
 protected:
  void SetUp() override {
    TrtllmGpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    problem_.raw().experts = 16;
    problem_.raw().top_k = 4;
    problem_.raw().hidden = 256;
    problem_.raw().intermediate = 192;
    problem_.raw().max_tokens = 64;
    problem_.finalize();
    const Support s = plugin_->supports(problem_.c());
    if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
  }

  // The fixture's problem with fp8_tensor weights on `input` activations (not yet finalised).
  Problem fp8_problem(moe_input_format input) const {
    Problem q = problem_;
    q.raw().format = MOE_FORMAT_FP8_TENSOR;
    q.raw().input_format = input;
    return q;
  }

  Problem problem_;
};

TEST_F(TrtllmGraph, ReplayedGraphMatchesTheReferenceForNewInputs) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 5);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  const GraphReplay graph(plugin_, layer, p, 37);
  for (uint64_t seed : {11u, 12u, 13u}) {
    const Batch batch = random_batch(p, 37, seed, Scenario::kRandom);
    EXPECT_LT(graph.error_against(ref_layer, *reference_, p, batch), 1e-2) << "seed " << seed;
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

// fp8_tensor weights on e4m3 activations (one scale over the batch's hidden states, one over the
// routed intermediate and one over the shared expert's, or the static scales), through every tile
// shape (the activation always fused, 128x256 tiles included), with biases and a
// shared expert, on CUTLASS's GEMMs and on the weight-only GEMM's e4m3 instance (fp8_gemm: own,
// every token tile); within the fp8 tolerance of the fp64 reference (docs/design.md §7).
struct Fp8Case {
  moe_input_format input;
  const char* tiles;
  const char* epilogue;
  bool shared, bias;
  moe_activation activation;
  const char* gemm = "auto";        // fp8_gemm
  const char* token_tile = "auto";  // fp8_gemm own only
};

class TrtllmFp8Tensor : public TrtllmGraph, public testing::WithParamInterface<Fp8Case> {};

TEST_P(TrtllmFp8Tensor, MatchesTheReference) {
  const Fp8Case c = GetParam();
  Problem q = fp8_problem(c.input);
  q.raw().activation = c.activation;
  q.raw().expert_bias = c.bias ? 1 : 0;
  if (c.shared) q.raw().shared_intermediate = q.raw().intermediate;
  if (c.activation == MOE_ACTIVATION_RELU2) {
    q.raw().intermediate = 256;  // relu2 pads I to 128
    if (c.shared) q.raw().shared_intermediate = 256;
  }
  q.finalize();
  const moe_problem p = q.c();
  const Support s = plugin_->supports(p);
  ASSERT_TRUE(s.supported) << s.message;
  const LayerWeights w = random_weights(p, 31);
  Options options{
      {"gemm_tiles", c.tiles}, {"activation_epilogue", c.epilogue}, {"fp8_gemm", c.gemm}};
  if (std::string(c.token_tile) != "auto") options.emplace_back("token_tile", c.token_tile);
  const Layer layer = plugin_->prepare(p, w.view(), options);
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  expect_matches_reference(layer, ref_layer, *reference_, p, {1, 37, 64}, 70, 2e-2);
}

constexpr auto kDyn = MOE_INPUT_FP8_TENSOR_DYNAMIC;
constexpr auto kStatic = MOE_INPUT_FP8_TENSOR_STATIC;
constexpr auto kSilu = MOE_ACTIVATION_SILU_MUL;
INSTANTIATE_TEST_SUITE_P(
    Cases, TrtllmFp8Tensor,
    testing::Values(
        Fp8Case{kDyn, "tokens", "fused", false, false, kSilu},
        Fp8Case{kDyn, "weights", "fused", false, false, kSilu},
        Fp8Case{kDyn, "auto", "auto", false, false, kSilu},
        Fp8Case{kDyn, "tokens", "auto", true, true, kSilu},
        Fp8Case{kDyn, "weights", "fused", true, true, MOE_ACTIVATION_SWIGLU_OAI},
        Fp8Case{kDyn, "weights", "fused", true, false, MOE_ACTIVATION_RELU2},
        Fp8Case{kStatic, "tokens", "fused", false, false, kSilu},
        Fp8Case{kStatic, "weights", "auto", true, true, kSilu},
        Fp8Case{kStatic, "tokens", "auto", false, false, MOE_ACTIVATION_RELU2},
        Fp8Case{kDyn, "auto", "auto", false, false, kSilu, "own"},
        Fp8Case{kDyn, "auto", "auto", true, false, kSilu, "cutlass"},
        Fp8Case{kDyn, "auto", "auto", true, true, kSilu, "own", "16"},
        Fp8Case{kDyn, "auto", "auto", true, true, MOE_ACTIVATION_SWIGLU_OAI, "own", "64"},
        Fp8Case{kDyn, "auto", "auto", true, false, MOE_ACTIVATION_RELU2, "own", "96"},
        Fp8Case{kStatic, "auto", "auto", true, true, kSilu, "own", "128"},
        Fp8Case{kStatic, "auto", "auto", false, false, MOE_ACTIVATION_RELU2, "own", "192"},
        Fp8Case{kDyn, "auto", "auto", false, false, MOE_ACTIVATION_GELU_MUL, "own", "32"}),
    [](const testing::TestParamInfo<Fp8Case>& info) {
      const Fp8Case& c = info.param;
      return fmt::format("{}_{}{}{}_{}_{}{}", c.input == kDyn ? "dynamic" : "static",
                         activation_name(c.activation), c.shared ? "_shared" : "",
                         c.bias ? "_bias" : "", c.tiles, c.epilogue,
                         std::string(c.gemm) == "own"       ? fmt::format("_own_{}", c.token_tile)
                         : std::string(c.gemm) == "cutlass" ? "_cutlass"
                                                            : "");
    });

// fp8_gemm own on a layer with several token blocks a group, odd and even weight tile counts
// (w2's 3 tiles run unpaired, w13's 6 paired), partial tiles in I (200 pads to 256) and more
// tiles than CTAs; within the fp8 tolerance at every token tile.
TEST_F(TrtllmGraph, Fp8TensorOwnGemmManyBlocksAndTilesMatchesTheReference) {
  Problem q = fp8_problem(MOE_INPUT_FP8_TENSOR_DYNAMIC);
  q.raw().experts = 8;
  q.raw().top_k = 2;
  q.raw().hidden = 384;
  q.raw().intermediate = 200;
  q.raw().shared_intermediate = 200;
  q.raw().max_tokens = 1200;
  q.finalize();
  const moe_problem p = q.c();
  const LayerWeights w = random_weights(p, 41);
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  for (const char* tile : {"32", "96", "128", "192"}) {
    SCOPED_TRACE(tile);
    const Layer layer = plugin_->prepare(p, w.view(), {{"fp8_gemm", "own"}, {"token_tile", tile}});
    expect_matches_reference(layer, ref_layer, *reference_, p, {5, 300, 1200}, 80, 2e-2);
  }
}

// fp8_gemm is fp8_tensor's and bf16_gemm bf16's (the other's auto is accepted); fp8_gemm own
// takes no CUTLASS tile shape and no 256-token tile: config errors naming the option.
TEST_F(TrtllmGraph, Fp8GemmOptionErrorsNameTheOption) {
  Problem q = fp8_problem(MOE_INPUT_FP8_TENSOR_DYNAMIC);
  q.finalize();
  const moe_problem p = q.c();
  const LayerWeights w = random_weights(p, 3);
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"fp8_gemm", "mine"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"fp8_gemm 'mine' is not auto, cutlass or own"});
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"bf16_gemm", "own"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"bf16_gemm 'own' is for bf16 layers", "fp8_gemm"});
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"fp8_gemm", "own"}, {"gemm_tiles", "tokens"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"gemm_tiles is for the CUTLASS GEMMs", "fp8_gemm 'own'"});
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"token_tile", "256"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"token_tile '256'"});
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"fp8_gemm", "cutlass"}, {"token_tile", "64"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"token_tile is for the weight-only GEMM"});
  const moe_problem bf16 = problem_.c();
  const LayerWeights wb = random_weights(bf16, 3);
  expect_error(
      [&] {
        plugin_->prepare(bf16, wb.view(), {{"fp8_gemm", "own"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"fp8_gemm 'own' is for fp8_tensor layers", "bf16_gemm"});
  // Each format reads its own option; the other's auto is accepted and changes nothing (here
  // fp8_gemm own still holds, so CUTLASS's gemm_tiles is refused with it).
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(),
                         {{"fp8_gemm", "own"}, {"bf16_gemm", "auto"}, {"gemm_tiles", "tokens"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"fp8_gemm 'own'"});
  EXPECT_NO_THROW(plugin_->prepare(bf16, wb.view(), {{"fp8_gemm", "auto"}}));
}

// fp8_tensor quantises GEMM1's f32 activation: a separate activation kernel (bf16 in between)
// is refused at prepare, naming why; so are 128x256 tiles, which e4m3 does not have.
TEST_F(TrtllmGraph, Fp8TensorWithASeparateActivationOrWideTilesIsAConfigError) {
  Problem q = fp8_problem(MOE_INPUT_FP8_TENSOR_DYNAMIC);
  q.finalize();
  const moe_problem p = q.c();
  const LayerWeights w = random_weights(p, 3);
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"activation_epilogue", "separate"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"'separate' is for bf16 layers", "always fuses"});
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"gemm_tiles", "wide"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"'wide' is for bf16 layers", "tokens or weights"});
}

// A corrupt fp8_tensor scale (NaN, negative) is refused at prepare, naming the tensor and the
// expert, before any weight is uploaded; a tiny one is used as given (no floor), as the
// reference does.
TEST_F(TrtllmGraph, Fp8TensorCorruptScalesAreRefusedByNameAndTinyOnesUsedAsGiven) {
  Problem q = fp8_problem(MOE_INPUT_FP8_TENSOR_STATIC);
  q.finalize();
  const moe_problem p = q.c();
  for (const char* which : {"w13_scale", "w2_scale", "a2_scale"}) {
    LayerWeights w = random_weights(p, 4);
    HostTensor& t = std::string(which) == "w13_scale"  ? w.w13_scale
                    : std::string(which) == "w2_scale" ? w.w2_scale
                                                       : w.a2_scale;
    t.data<float>()[std::string(which) == "a2_scale" ? 0 : 3] =
        std::string(which) == "w2_scale" ? -1.0f : std::nanf("");
    expect_error([&] { plugin_->prepare(p, w.view(), {}); }, MOE_STATUS_INVALID_ARGUMENT, {which});
  }
  // Expert 2's GEMM1 scale 1e-20: its outputs all but vanish, in the reference too (a 1e-10
  // floor would scale them up 1e10 times).
  LayerWeights w = random_weights(p, 4);
  w.w13_scale.data<float>()[2] = 1e-20f;
  const Layer layer = plugin_->prepare(p, w.view(), {});
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  const Batch batch = random_batch(p, 37, 5, Scenario::kRandom);
  const Routing routing = route_batch(*reference_, p, batch);
  const RunResult out = run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16);
  const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
  EXPECT_LT(relative_l2(out.output, ref.output), 2e-2);
}

// The dynamic scales are computed on the device inside the captured work: a replayed graph
// quantises each new batch with its own scales.
TEST_F(TrtllmGraph, Fp8TensorReplayedGraphQuantisesEachBatchAfresh) {
  Problem q = fp8_problem(MOE_INPUT_FP8_TENSOR_DYNAMIC);
  q.raw().shared_intermediate = q.raw().intermediate;
  q.finalize();
  const moe_problem p = q.c();
  const LayerWeights w = random_weights(p, 9);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  const int64_t tokens = 29;
  const GraphReplay graph(plugin_, layer, p, tokens);
  for (uint64_t seed : {21u, 22u}) {
    Batch batch = random_batch(p, tokens, seed, Scenario::kRandom);
    if (seed == 22u) {  // a batch 128x larger: a stale scale would saturate most codes
      auto* x = batch.hidden.data<uint16_t>();
      for (int64_t i = 0; i < tokens * p.hidden; ++i)
        x[i] = float_to_bf16(bf16_to_float(x[i]) * 128.0f);
    }
    EXPECT_LT(graph.error_against(ref_layer, *reference_, p, batch), 2e-2) << "seed " << seed;
  }
}

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
  upload_tensor(ids, routing.ids);
  upload_tensor(weights, routing.weights);
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

}  // namespace
}  // namespace moe::test
