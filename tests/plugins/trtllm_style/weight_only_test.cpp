// trtllm_style's weight-only layers (mxfp4, nvfp4, mxfp8 weights, and bf16 ones with option
// bf16_gemm: own) on a GPU, through the C ABI: the Hopper weight-only layouts (bf16: tiles) read by
// common_cuda's weight-only grouped GEMM (bf16 activations),
// against the fp64 reference within the quantised formats' tolerance (docs/design.md §7): every
// activation form, biases, a shared expert (as wide as the routed ones, or narrower and padded),
// shapes that are not whole tiles (padded I and H, a partial last mx block), each token tile width,
// padding tokens and one expert taking every token; captured in a CUDA graph and replayed; a
// corrupt scale refused by name; options that do not apply are config errors. Skips without an
// sm_90 GPU.
#include <cuda_runtime_api.h>

#include <ostream>
#include <string>

#include "../../support/graph_replay.hpp"
#include "../../support/scoped_env.hpp"
#include "moe/sdk/formats.hpp"
#include "trtllm_gpu_fixture.hpp"

namespace moe::test {
namespace {

struct WoCase {
  moe_format format;
  moe_activation activation;
  int64_t shared;  // shared_intermediate, 0: none
  bool bias;
  int64_t hidden, intermediate;
  const char* tile;         // token_tile
  int64_t max_tokens = 64;  // 256: several token blocks per expert at 64 and 128 tokens a tile
  const char* weight_tile = "auto";  // weight_tile (bf16: 256 for tall tiles)
  const char* last_block = "auto";   // last_block (bf16: narrow)
};

void PrintTo(const WoCase& c, std::ostream* os) {
  *os << format_name(c.format) << " " << activation_name(c.activation) << " shared=" << c.shared
      << " bias=" << c.bias << " H=" << c.hidden << " I=" << c.intermediate
      << " token_tile=" << c.tile << " weight_tile=" << c.weight_tile
      << " last_block=" << c.last_block;
}

class TrtllmWeightOnly : public TrtllmGpuTest<testing::TestWithParam<WoCase>> {
 protected:
  static Problem problem(const WoCase& c) {
    return trtllm_problem({c.format, MOE_INPUT_BF16, c.activation, c.shared, c.bias, c.hidden,
                           c.intermediate, c.max_tokens});
  }
};

constexpr moe_format kMx = MOE_FORMAT_MXFP4;
constexpr moe_format kNv = MOE_FORMAT_NVFP4;
constexpr moe_format kMx8 = MOE_FORMAT_MXFP8;
constexpr moe_format kBf = MOE_FORMAT_BF16;  // with bf16_gemm: own

// The case's options: its token tile, and bf16 layers on the weight-only GEMM.
Options case_options(const WoCase& c) {
  Options o{{"token_tile", c.tile}, {"weight_tile", c.weight_tile}, {"last_block", c.last_block}};
  if (c.format == kBf) o.emplace_back("bf16_gemm", "own");
  return o;
}

TEST_P(TrtllmWeightOnly, MatchesTheReference) {
  const WoCase c = GetParam();
  const Problem q = problem(c);
  const moe_problem p = q.c();
  const Support s = plugin_->supports(p);
  if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
  const LayerWeights w = random_weights(p, 51);
  const Layer layer = plugin_->prepare(p, w.view(), case_options(c));
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  if (c.max_tokens >= 256)
    expect_matches_reference(layer, ref_layer, *reference_, p, {1, 64, 200, 256}, 70, 2e-2);
  else
    expect_matches_reference(layer, ref_layer, *reference_, p, {1, 5, 37, 64}, 70, 2e-2);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TrtllmWeightOnly,
    testing::Values(
        WoCase{kMx, MOE_ACTIVATION_SILU_MUL, 0, false, 384, 256, "auto"},
        WoCase{kNv, MOE_ACTIVATION_SILU_MUL, 0, false, 384, 256, "16"},
        WoCase{kMx, MOE_ACTIVATION_SWIGLU_OAI, 0, true, 256, 256, "64"},
        WoCase{kNv, MOE_ACTIVATION_SILU_MUL, 128, true, 256, 128, "128"},
        WoCase{kMx, MOE_ACTIVATION_GELU_MUL, 32, false, 160, 96, "auto"},
        WoCase{kNv, MOE_ACTIVATION_SILU_MUL_CLAMP, 0, true, 200, 48, "16"},
        WoCase{kMx, MOE_ACTIVATION_RELU2, 0, true, 256, 192, "64"},
        WoCase{kNv, MOE_ACTIVATION_RELU2, 128, false, 128, 128, "128"},
        WoCase{kMx8, MOE_ACTIVATION_SILU_MUL, 0, false, 384, 256, "auto"},
        WoCase{kMx8, MOE_ACTIVATION_SWIGLU_OAI, 0, true, 256, 256, "64"},
        WoCase{kMx8, MOE_ACTIVATION_GELU_MUL, 32, false, 200, 96, "16"},
        WoCase{kMx8, MOE_ACTIVATION_RELU2, 128, true, 128, 128, "128"},
        WoCase{kMx, MOE_ACTIVATION_SILU_MUL, 0, true, 256, 256, "64", 256},
        WoCase{kNv, MOE_ACTIVATION_SILU_MUL, 256, false, 256, 256, "128", 256},
        WoCase{kMx8, MOE_ACTIVATION_SILU_MUL, 0, false, 256, 256, "128", 256},
        // Gated tiles cut by the padding (I = 80, 200: the last tile's columns past
        // I are zero) with biases and a narrower shared expert, at 64 and 128 tokens.
        WoCase{kNv, MOE_ACTIVATION_GELU_MUL, 32, true, 256, 80, "64"},
        WoCase{kMx8, MOE_ACTIVATION_SILU_MUL_CLAMP, 48, true, 192, 200, "128", 256},
        // bf16 tiles: every width, activation form, bias, the shared expert, padding.
        WoCase{kBf, MOE_ACTIVATION_SILU_MUL, 0, false, 384, 256, "auto"},
        WoCase{kBf, MOE_ACTIVATION_SWIGLU_OAI, 0, true, 256, 256, "16"},
        WoCase{kBf, MOE_ACTIVATION_GELU_MUL, 256, false, 200, 256, "64"},
        WoCase{kBf, MOE_ACTIVATION_RELU2, 0, true, 128, 192, "128"},
        WoCase{kBf, MOE_ACTIVATION_SILU_MUL_CLAMP, 0, true, 192, 200, "128", 256},
        WoCase{kBf, MOE_ACTIVATION_SILU_MUL, 80, false, 256, 80, "64", 256},
        // 32 tokens a tile, each format.
        WoCase{kMx, MOE_ACTIVATION_SWIGLU_OAI, 0, true, 256, 192, "32"},
        WoCase{kNv, MOE_ACTIVATION_RELU2, 128, false, 128, 128, "32"},
        WoCase{kMx8, MOE_ACTIVATION_SILU_MUL, 32, true, 200, 96, "32", 256},
        WoCase{kBf, MOE_ACTIVATION_GELU_MUL, 0, true, 384, 256, "32", 256},
        // 96 tokens a tile, each format, gated and plain (one epilogue pass), in
        // pairs and alone (H = 384: GEMM2 has three weight tiles).
        WoCase{kMx, MOE_ACTIVATION_SILU_MUL, 0, true, 384, 256, "96", 256},
        WoCase{kNv, MOE_ACTIVATION_RELU2, 128, false, 256, 128, "96", 256},
        WoCase{kMx8, MOE_ACTIVATION_SWIGLU_OAI, 0, true, 200, 200, "96", 256},
        WoCase{kBf, MOE_ACTIVATION_GELU_MUL, 0, true, 384, 192, "96", 256},
        WoCase{kBf, MOE_ACTIVATION_RELU2, 0, false, 256, 256, "96", 256},
        // 192 tokens a tile, each format: gated and plain, two epilogue passes, in
        // pairs and alone.
        WoCase{kBf, MOE_ACTIVATION_SILU_MUL, 0, true, 384, 256, "192", 512},
        WoCase{kBf, MOE_ACTIVATION_RELU2, 128, false, 256, 128, "192", 512},
        WoCase{kMx, MOE_ACTIVATION_SWIGLU_OAI, 0, true, 384, 192, "192", 512},
        WoCase{kNv, MOE_ACTIVATION_SILU_MUL, 128, false, 256, 128, "192", 512},
        WoCase{kMx8, MOE_ACTIVATION_RELU2, 0, true, 384, 200, "192", 512},
        // 256 tokens a tile (bf16 only): gated and plain, four epilogue passes.
        WoCase{kBf, MOE_ACTIVATION_SILU_MUL, 0, true, 256, 256, "256", 256},
        WoCase{kBf, MOE_ACTIVATION_RELU2, 128, false, 384, 128, "256", 256},
        // Tall tiles (bf16, two prepared weight tiles a CTA): in pairs (weight tiles
        // in fours) and alone, gated and plain, padded I, 64 and 128 tokens a tile.
        WoCase{kBf, MOE_ACTIVATION_SILU_MUL, 0, true, 512, 256, "128", 256, "256"},
        WoCase{kBf, MOE_ACTIVATION_SWIGLU_OAI, 0, true, 256, 128, "64", 256, "256"},
        WoCase{kBf, MOE_ACTIVATION_RELU2, 0, true, 512, 512, "128", 256, "256"},
        WoCase{kBf, MOE_ACTIVATION_GELU_MUL, 200, false, 256, 200, "64", 64, "256"},
        WoCase{kBf, MOE_ACTIVATION_SILU_MUL_CLAMP, 0, false, 512, 256, "auto", 256, "256"},
        // Narrow last blocks (bf16): every tile width with narrower ones, in pairs
        // (H = 256: 2 weight tiles) and alone (H = 384, I = 192: 3), gated and plain,
        // the shared expert's group, the bias; 50-64 rows an expert at 200-256 tokens
        // and one expert with every token leave last blocks of every width.
        WoCase{kBf, MOE_ACTIVATION_SILU_MUL, 0, true, 256, 256, "256", 256, "auto", "narrow"},
        WoCase{kBf, MOE_ACTIVATION_RELU2, 192, false, 384, 192, "256", 256, "auto", "narrow"},
        WoCase{kBf, MOE_ACTIVATION_SWIGLU_OAI, 0, true, 384, 192, "128", 256, "auto", "narrow"},
        WoCase{kBf, MOE_ACTIVATION_GELU_MUL, 256, false, 256, 256, "128", 256, "auto", "narrow"},
        WoCase{kBf, MOE_ACTIVATION_SILU_MUL, 0, false, 256, 256, "192", 512, "auto", "narrow"},
        WoCase{kBf, MOE_ACTIVATION_RELU2, 0, true, 384, 192, "96", 256, "auto", "narrow"},
        WoCase{kBf, MOE_ACTIVATION_SILU_MUL_CLAMP, 0, true, 256, 200, "64", 256, "auto", "narrow"},
        WoCase{kBf, MOE_ACTIVATION_SILU_MUL, 192, false, 384, 192, "32", 256, "auto", "narrow"},
        // 192 and 64 tokens alone (GEMM2's three weight tiles at H = 384).
        WoCase{kBf, MOE_ACTIVATION_SILU_MUL, 0, true, 384, 256, "192", 512, "auto", "narrow"},
        WoCase{kBf, MOE_ACTIVATION_RELU2, 0, false, 384, 256, "64", 256, "auto", "narrow"}),
    [](const testing::TestParamInfo<WoCase>& info) {
      const WoCase& c = info.param;
      return fmt::format("{}_{}{}{}_h{}_i{}_tile_{}_t{}_w{}{}", format_name(c.format),
                         activation_name(c.activation),
                         c.shared > 0 ? fmt::format("_shared{}", c.shared) : std::string(),
                         c.bias ? "_bias" : "", c.hidden, c.intermediate, c.tile, c.max_tokens,
                         c.weight_tile, std::string(c.last_block) == "narrow" ? "_narrow" : "");
    });

// One run captured in a CUDA graph, replayed with new batches and routing over the same buffers.
TEST_F(TrtllmWeightOnly, ReplaysInACudaGraph) {
  const Problem q = problem({kNv, MOE_ACTIVATION_SILU_MUL, 128, false, 256, 128, "auto"});
  const moe_problem p = q.c();
  const Support s = plugin_->supports(p);
  if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
  const LayerWeights w = random_weights(p, 53);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  const GraphReplay graph(plugin_, layer, p, 37);
  for (uint64_t seed : {33u, 34u}) {
    const Batch batch = random_batch(p, 37, seed, Scenario::kRandom);
    EXPECT_LT(graph.error_against(ref_layer, *reference_, p, batch), 2e-2) << "seed " << seed;
  }
}

// Sink experts next to a weight-only layer run apart: bf16 by cuBLAS,
// their results into the sink slots' GEMM2 rows, the weight-only GEMMs skipping their groups. Every
// weight-only format; sinks as wide as the routed experts and narrower, with a shared expert after
// them (its group past the sinks'), biases, relu2 routed experts; padding tokens and one expert
// taking every token; then a graph replayed with new inputs.
TEST_F(TrtllmWeightOnly, SinksApartMatchTheReference) {
  struct SinkCase {
    moe_format format;
    moe_activation activation;
    int64_t shared, sink_intermediate;
    bool bias;
  };
  for (const SinkCase& c : {SinkCase{kMx, MOE_ACTIVATION_SILU_MUL, 0, 128, false},
                            SinkCase{kNv, MOE_ACTIVATION_SILU_MUL, 128, 96, true},
                            SinkCase{kMx8, MOE_ACTIVATION_SWIGLU_OAI, 128, 128, true},
                            SinkCase{kNv, MOE_ACTIVATION_RELU2, 0, 64, false}}) {
    expect_sinks_apart_match(problem({c.format, c.activation, c.shared, c.bias, 256, 128, "auto"}),
                             c.sink_intermediate, 61);
    if (HasFatalFailure() || IsSkipped()) return;
  }
}

// Narrow last blocks compute the same sums as full-width ones (only the width of the wgmma and
// of the token loads differ), so the two layers agree to rounding: 1e-3, twenty times inside the
// format tolerance, where one token row in error among 333 is ~5e-2. A wrong token row or a lost
// contribution in a narrow block (which the reference comparison, over the whole output, could
// average away) shows here. Every tile width, in pairs and alone, with the last blocks that follow
// full ones (one expert taking every token) and alone (few tokens).
TEST_F(TrtllmWeightOnly, NarrowLastBlocksGiveTheFullWidthsSums) {
  for (const char* tile : {"32", "64", "96", "128", "192", "256"}) {
    for (int64_t hidden : {256, 384}) {  // GEMM2's weight tiles in pairs, alone
      SCOPED_TRACE(fmt::format("token_tile {}, H = {}", tile, hidden));
      const Problem q = problem({kBf, MOE_ACTIVATION_SILU_MUL, 0, true, hidden, 192, tile, 512});
      const moe_problem p = q.c();
      const Support s = plugin_->supports(p);
      if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
      const LayerWeights w = random_weights(p, 63);
      const Options full{{"bf16_gemm", "own"}, {"token_tile", tile}, {"last_block", "full"}};
      Options narrow = full;
      narrow.back().second = "narrow";
      const Layer a = plugin_->prepare(p, w.view(), full);
      const Layer b = plugin_->prepare(p, w.view(), narrow);
      for (int64_t tokens : {1, 7, 37, 200, 333}) {
        for (Scenario scenario : {Scenario::kRandom, Scenario::kOneExpert}) {
          const Batch batch = random_batch(p, tokens, 90 + uint64_t(tokens), scenario);
          const Routing routing = scenario_routing(*reference_, p, batch, scenario);
          const RunResult x = run_layer(a, p, batch.hidden, routing, MOE_DTYPE_BF16);
          const RunResult y = run_layer(b, p, batch.hidden, routing, MOE_DTYPE_BF16);
          EXPECT_LT(relative_l2(y.output, x.output), 1e-3)
              << tokens << " tokens, scenario " << int(scenario);
        }
      }
    }
  }
}

// Under expert parallelism the layer holds and runs only this rank's experts (linear and
// round-robin placement), the other ranks' slots contributing nothing, as in the reference.
TEST_F(TrtllmWeightOnly, RunsOnlyTheLocalExpertsUnderExpertParallelism) {
  for (auto [format, placement] :
       {std::pair{kMx, MOE_EP_LINEAR}, std::pair{kMx8, MOE_EP_ROUND_ROBIN}}) {
    Problem q = problem({format, MOE_ACTIVATION_SILU_MUL, 0, true, 256, 128, "auto"});
    q.raw().ep_placement = placement;
    q.raw().ep_size = 2;
    q.raw().ep_rank = 1;
    q.finalize();
    const moe_problem p = q.c();
    const Support s = plugin_->supports(p);
    if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
    ASSERT_EQ(p.local_experts, 8);
    const LayerWeights w = random_weights(p, 59);
    const Layer layer = plugin_->prepare(p, w.view(), {});
    const Layer ref_layer = reference_->prepare(p, w.view(), {});
    expect_matches_reference(layer, ref_layer, *reference_, p, {1, 37, 64}, 80, 2e-2);
  }
}

// The CUTLASS tile and epilogue options do not apply to the weight-only GEMM; token_tile
// takes only its widths.
TEST_F(TrtllmWeightOnly, CutlassOptionsAndUnknownTileWidthsAreConfigErrors) {
  const Problem q = problem({kMx, MOE_ACTIVATION_SILU_MUL, 0, false, 256, 128, "auto"});
  const moe_problem p = q.c();
  const Support s = plugin_->supports(p);
  if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
  const LayerWeights w = random_weights(p, 55);
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"gemm_tiles", "wide"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"gemm_tiles 'wide'", "token_tile"});
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"activation_epilogue", "separate"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"'separate' is not for mxfp4"});
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"token_tile", "48"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"token_tile '48'", "16, 32, 64, 96, 128 or 192"});
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"token_tile", "256"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"token_tile '256'", "256: bf16 layers only"});
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"weight_tile", "256"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"weight_tile '256'", "256: bf16 layers only"});
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"weight_tile", "64"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"weight_tile '64'", "auto, 128 or 256"});
}

// bf16_gemm: own takes bf16 layers without sinks, and not the CUTLASS tile or a separate
// activation; token_tile is for the weight-only GEMM only (bf16_gemm: auto takes it as a choice of
// that GEMM, CUTLASS's options as a choice of CUTLASS's, both at once are a config error).
TEST_F(TrtllmWeightOnly, OwnBf16GemmOptionErrors) {
  const Problem q = problem({kBf, MOE_ACTIVATION_SILU_MUL, 0, false, 256, 128, "auto"});
  const moe_problem p = q.c();
  const Support s = plugin_->supports(p);
  if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
  const LayerWeights w = random_weights(p, 61);
  auto refused = [&](const moe_problem& of, const LayerWeights& weights, const Options& options,
                     std::initializer_list<std::string> words) {
    expect_error([&] { plugin_->prepare(of, weights.view(), options); }, MOE_STATUS_CONFIG_ERROR,
                 words);
  };
  refused(p, w, {{"bf16_gemm", "mine"}}, {"bf16_gemm 'mine'", "auto, cutlass or own"});
  refused(p, w, {{"bf16_gemm", "own"}, {"gemm_tiles", "wide"}}, {"gemm_tiles", "bf16_gemm 'own'"});
  refused(p, w, {{"activation_epilogue", "separate"}, {"bf16_gemm", "own"}},
          {"'separate'", "bf16_gemm 'own'"});
  refused(p, w, {{"token_tile", "64"}, {"bf16_gemm", "cutlass"}},
          {"token_tile is for the weight-only GEMM", "bf16"});
  refused(p, w, {{"token_tile", "64"}, {"gemm_tiles", "tokens"}},
          {"token_tile is for the weight-only GEMM", "bf16"});
  refused(p, w, {{"weight_tile", "256"}, {"bf16_gemm", "cutlass"}},
          {"weight_tile is for the weight-only GEMM", "bf16"});
  refused(p, w, {{"last_block", "thin"}}, {"last_block 'thin'", "auto, full or narrow"});
  refused(p, w, {{"last_block", "narrow"}, {"weight_tile", "256"}},
          {"last_block 'narrow'", "not weight_tile 256"});
  const Problem mx = problem({kMx, MOE_ACTIVATION_SILU_MUL, 0, false, 256, 128, "auto"});
  const LayerWeights m = random_weights(mx.c(), 61);
  refused(mx.c(), m, {{"last_block", "narrow"}},
          {"last_block 'narrow' is for bf16 layers", "not mxfp4"});
  refused(mx.c(), m, {{"bf16_gemm", "own"}}, {"bf16_gemm 'own' is for bf16 layers", "mxfp4"});
  refused(mx.c(), m, {{"bf16_gemm", "cutlass"}},
          {"bf16_gemm 'cutlass' is for bf16 layers", "mxfp4"});
  // Options left at auto choose nothing: the layer takes auto's path (here the weight-only GEMM).
  EXPECT_NO_THROW(plugin_->prepare(p, w.view(), {{"gemm_tiles", "auto"}, {"token_tile", "auto"}}));
  Problem sinks = problem({kBf, MOE_ACTIVATION_SILU_MUL, 0, false, 256, 128, "auto"});
  sinks.raw().sink_experts = 1;
  sinks.raw().sink_intermediate = 128;
  sinks.raw().routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  sinks.finalize();
  if (plugin_->supports(sinks.c()).supported) {
    const LayerWeights k = random_weights(sinks.c(), 61);
    expect_error(
        [&] {
          plugin_->prepare(sinks.c(), k.view(), {{"bf16_gemm", "own"}});
        },
        MOE_STATUS_CONFIG_ERROR, {"sink experts"});
  }
}

// Scales the kernel cannot take exactly are refused at prepare, naming the tensor and the place
// in the caller's indexing: a NaN ue8m0 code, a negative nvfp4 scale_2.
TEST_F(TrtllmWeightOnly, CorruptScalesAreRefusedByName) {
  const Problem mx = problem({kMx, MOE_ACTIVATION_SILU_MUL, 0, false, 256, 128, "auto"});
  const Support s = plugin_->supports(mx.c());
  if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
  LayerWeights w = random_weights(mx.c(), 57);
  w.w2_scale.data<uint8_t>()[4 * 3 + 2] = 0xff;  // expert 0, row 3, block 2 (I = 128: 4 blocks)
  expect_error([&] { plugin_->prepare(mx.c(), w.view(), {}); }, MOE_STATUS_INVALID_ARGUMENT,
               {"w2_scale[0, 3, 2]", "NaN"});
  const Problem nv = problem({kNv, MOE_ACTIVATION_SILU_MUL, 0, false, 256, 128, "auto"});
  LayerWeights v = random_weights(nv.c(), 57);
  v.w13_scale_2.data<float>()[5] = -1.0f;
  expect_error([&] { plugin_->prepare(nv.c(), v.view(), {}); }, MOE_STATUS_INVALID_ARGUMENT,
               {"w13_scale_2[5]", "finite and positive"});
  // mxfp8: an e4m3 NaN code (the bit placement would make it a finite number) and a scale past
  // the window the kernel applies exactly.
  const Problem mx8 = problem({kMx8, MOE_ACTIVATION_SILU_MUL, 0, false, 256, 128, "auto"});
  LayerWeights x = random_weights(mx8.c(), 57);
  x.w13.data<uint8_t>()[256 * 2 + 9] = 0x7f;  // expert 0, row 2, K 9
  expect_error([&] { plugin_->prepare(mx8.c(), x.view(), {}); }, MOE_STATUS_INVALID_ARGUMENT,
               {"w13[0, 2, 9] is an e4m3 NaN code"});
  LayerWeights y = random_weights(mx8.c(), 57);
  y.w2_scale.data<uint8_t>()[4 * 3 + 1] = 200;  // expert 0, row 3, block 1: 2^73
  expect_error([&] { plugin_->prepare(mx8.c(), y.view(), {}); }, MOE_STATUS_INVALID_ARGUMENT,
               {"w2_scale[0, 3, 1] = 2^73 is outside the mxfp8 scales"});
  // Scale tensors of the wrong shape: a block too few along K, half the experts, nvfp4's
  // per-expert scale_2 one short.
  const LayerWeights fresh_mx = random_weights(mx.c(), 58);
  const LayerWeights fresh_mx8 = random_weights(mx8.c(), 58);
  const LayerWeights fresh_nv = random_weights(nv.c(), 58);
  moe_weights bad = fresh_mx.view();
  bad.w13_scale.shape[2] -= 1;
  expect_error([&] { plugin_->prepare(mx.c(), bad, {}); }, MOE_STATUS_SHAPE_MISMATCH,
               {"w13_scale"});
  bad = fresh_mx8.view();
  bad.w2_scale.shape[0] /= 2;
  expect_error([&] { plugin_->prepare(mx8.c(), bad, {}); }, MOE_STATUS_SHAPE_MISMATCH,
               {"w2_scale"});
  bad = fresh_nv.view();
  bad.w13_scale_2.shape[0] -= 1;
  expect_error([&] { plugin_->prepare(nv.c(), bad, {}); }, MOE_STATUS_SHAPE_MISMATCH,
               {"w13_scale_2"});
}

}  // namespace
}  // namespace moe::test
