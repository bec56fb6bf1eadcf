// cutlass_mega's fused layer on a GPU through the C ABI, against the reference: bf16, fp8_block,
// mxfp4 and nvfp4 weights (4-bit ones on bf16, mxfp8 and e4m3 per-tensor activations), every
// activation, expert biases, a shared expert, sink experts, batch
// sizes from one token to the capacity, padding tokens, every token on one expert, experts without
// tokens, two runs bit-identical, a CUDA graph replayed with new inputs and routing, a batch above
// capacity refused, corrupt block scales and 4-bit scales refused at prepare, the layer on fewer
// SMs (`sms`), the timeline MOE_MEGA_TIMELINE names, the prepared bf16 / e4m3 chunks
// (MOE_MEGA_CHUNKS), one 4-bit chunk a stage (MOE_MEGA_FP4_STAGE=128), one fp8_block tile a stage
// (MOE_MEGA_FP8_STAGE=128), e4m3 fp8_block codes
// (MOE_MEGA_FP8_TOKENS=e4m3) and those codes by wgmma (MOE_MEGA_FP8_WGMMA=1, =2: two tiles a
// stage), 4-bit weights by wgmma (MOE_MEGA_FP4_WGMMA=1), the dependent launch
// (MOE_MEGA_LAUNCH=pdl), misaligned hidden states and workspace refused. Skips without an sm_90
// GPU.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../../support/graph_replay.hpp"
#include "mega_layer_fixture.hpp"
#include "moe/sdk/formats.hpp"

namespace moe::test {
namespace {

struct Case {
  moe_activation activation;
  Scenario scenario;
  moe_format format = MOE_FORMAT_BF16;
  bool bias = false;   // expert biases b13, b2
  int64_t shared = 0;  // shared_intermediate (I = 256: 384 runs as two virtual experts)
  int64_t sinks = 0;   // sink_intermediate of two sinks (Inkling routing), 0: none
  // 4-bit weights: their activations (default: bf16), e4m3 quantised inside the kernel.
  moe_input_format input = MOE_INPUT_DEFAULT;
};

class MegaActivations : public MegaLayer, public testing::WithParamInterface<Case> {};

TEST_P(MegaActivations, MatchTheReferenceFromOneTokenToCapacity) {
  const Case c = GetParam();
  Problem q = problem_;
  q.raw().activation = c.activation;
  q.raw().activation_alpha = 1.702f;
  q.raw().activation_limit = 3.0f;  // small enough that the random GEMM1 outputs get clamped
  q.raw().gelu_tanh = 1;
  q.raw().expert_bias = c.bias ? 1 : 0;
  q.raw().shared_intermediate = c.shared;
  if (c.sinks > 0) add_sinks(q, c.sinks);
  q = in_format(q, c.format, c.input);
  const moe_problem p = q.c();
  const LayerWeights w = random_weights(p, 21);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  // 65 and 96 tokens: two token chunks in GEMM2, an expert with more than 64 slots in GEMM1
  // under one_expert (fp4 items hold 32 slots: 33 tokens there are two chunks already).
  for (int64_t tokens : {1, 5, 33, 64, 65, 96}) {
    const Batch batch = random_batch(p, tokens, 40 + uint64_t(tokens), c.scenario);
    const Routing routing = route_batch(*reference_, p, batch);
    const RunResult out = run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16);
    const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
    EXPECT_LT(relative_l2(out.output, ref.output), tolerance(p, tokens))
        << tokens << " tokens, " << scenario_name(c.scenario);
  }
  if (c.input != MOE_INPUT_DEFAULT) {  // e4m3 activations: a batch whose tokens have no expert
    const Batch batch = random_batch(p, 5, 49, Scenario::kRandom);  // (the shared expert's only)
    Routing routing = route_batch(*reference_, p, batch);
    for (int64_t i = 0; i < routing.ids.numel(); ++i) routing.ids.data<int32_t>()[i] = -1;
    const RunResult out = run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16);
    const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
    if (c.shared > 0)
      EXPECT_LT(relative_l2(out.output, ref.output), tolerance(p)) << "no routed expert";
    else
      for (int64_t i = 0; i < out.output.numel(); ++i)
        ASSERT_EQ(out.output.data<uint16_t>()[i], 0) << "no expert: a zero row, element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MegaActivations,
    testing::Values(
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kRandom},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kPadding},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kOneExpert},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kTies},
        Case{MOE_ACTIVATION_SILU_MUL_CLAMP, Scenario::kRandom},
        Case{MOE_ACTIVATION_SWIGLU_OAI, Scenario::kRandom},
        Case{MOE_ACTIVATION_GELU_MUL, Scenario::kRandom},
        Case{MOE_ACTIVATION_RELU2, Scenario::kRandom},
        Case{MOE_ACTIVATION_RELU2, Scenario::kOneExpert},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kRandom, kFp8},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kPadding, kFp8},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kOneExpert, kFp8},
        Case{MOE_ACTIVATION_SWIGLU_OAI, Scenario::kRandom, kFp8},
        Case{MOE_ACTIVATION_GELU_MUL, Scenario::kRandom, kFp8},
        Case{MOE_ACTIVATION_RELU2, Scenario::kRandom, kFp8},
        Case{MOE_ACTIVATION_RELU2, Scenario::kOneExpert, kFp8},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kRandom, kMx},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kPadding, kMx},
        Case{MOE_ACTIVATION_SWIGLU_OAI, Scenario::kRandom, kMx},
        Case{MOE_ACTIVATION_RELU2, Scenario::kOneExpert, kMx},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kRandom, kNv},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kOneExpert, kNv},
        Case{MOE_ACTIVATION_SILU_MUL_CLAMP, Scenario::kRandom, kNv},
        Case{MOE_ACTIVATION_GELU_MUL, Scenario::kRandom, kNv},
        Case{MOE_ACTIVATION_RELU2, Scenario::kRandom, kNv},
        Case{MOE_ACTIVATION_SWIGLU_OAI, Scenario::kRandom, MOE_FORMAT_BF16, true},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kRandom, kFp8, true},
        Case{MOE_ACTIVATION_SWIGLU_OAI, Scenario::kPadding, kMx, true},
        Case{MOE_ACTIVATION_RELU2, Scenario::kOneExpert, kNv, true},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kRandom, MOE_FORMAT_BF16, false, 384},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kPadding, kFp8, false, 256},
        Case{MOE_ACTIVATION_GELU_MUL, Scenario::kRandom, kFp8, true, 384},
        Case{MOE_ACTIVATION_SWIGLU_OAI, Scenario::kRandom, kMx, true, 512},
        Case{MOE_ACTIVATION_RELU2, Scenario::kOneExpert, kNv, false, 128},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kRandom, MOE_FORMAT_BF16, false, 0, 384},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kPadding, MOE_FORMAT_BF16, false, 256, 256},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kRandom, kMx, false, 0, 0, kMx8},
        Case{MOE_ACTIVATION_SWIGLU_OAI, Scenario::kPadding, kMx, true, 0, 0, kMx8},
        Case{MOE_ACTIVATION_RELU2, Scenario::kOneExpert, kNv, false, 384, 0, kMx8},
        Case{MOE_ACTIVATION_GELU_MUL, Scenario::kRandom, kMx, false, 0, 0, kStatic},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kPadding, kNv, true, 256, 0, kStatic},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kRandom, kNv, false, 0, 0, kDynamic},
        Case{MOE_ACTIVATION_RELU2, Scenario::kOneExpert, kNv, false, 0, 0, kDynamic},
        Case{MOE_ACTIVATION_SILU_MUL_CLAMP, Scenario::kPadding, kMx, false, 384, 0, kDynamic},
        Case{MOE_ACTIVATION_SWIGLU_OAI, Scenario::kRandom, kNv, true, 256, 0, kDynamic},
        Case{MOE_ACTIVATION_RELU2, Scenario::kRandom, kMx, false, 0, 0, kMx8},
        // Sinks apart (a second launch of the bf16 kernel adds their sum): other formats, other
        // activations, with a shared expert, biases, and e4m3 activations.
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kRandom, kFp8, false, 0, 384},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kPadding, kFp8, false, 256, 256},
        Case{MOE_ACTIVATION_SWIGLU_OAI, Scenario::kRandom, kMx, true, 0, 256},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kOneExpert, kNv, false, 0, 384},
        Case{MOE_ACTIVATION_GELU_MUL, Scenario::kRandom, MOE_FORMAT_BF16, false, 0, 256},
        Case{MOE_ACTIVATION_RELU2, Scenario::kPadding, MOE_FORMAT_BF16, false, 256, 256},
        Case{MOE_ACTIVATION_SILU_MUL, Scenario::kRandom, kNv, false, 0, 256, kDynamic}),
    [](const testing::TestParamInfo<Case>& info) {
      return fmt::format(
          "{}_{}_{}{}{}{}{}", format_name(info.param.format),
          activation_name(info.param.activation), scenario_name(info.param.scenario),
          info.param.bias ? "_bias" : "",
          info.param.shared > 0 ? fmt::format("_shared{}", info.param.shared) : std::string(),
          info.param.sinks > 0 ? fmt::format("_sinks{}", info.param.sinks) : std::string(),
          info.param.input != MOE_INPUT_DEFAULT
              ? fmt::format("_{}", input_format_name(info.param.input))
              : std::string());
    });

// Many experts and few tokens (most experts idle); two runs give the same bits.
TEST_F(MegaLayer, ManyIdleExpertsMatchAndRepeatBitForBit) {
  for (moe_format f : {MOE_FORMAT_BF16, kFp8, kMx, kNv}) {
    Problem q = problem_;
    q.raw().experts = 64;
    q.raw().top_k = 6;
    q.raw().hidden = 512;
    q.raw().intermediate = 384;
    q = in_format(q, f);
    const moe_problem p = q.c();
    const LayerWeights w = random_weights(p, 9);
    const Layer ref_layer = reference_->prepare(p, w.view(), {});
    const Layer layer = plugin_->prepare(p, w.view(), {});
    for (int64_t tokens : {2, 40})
      expect_matches_and_repeats(layer, ref_layer, p, tokens, 5 + uint64_t(tokens),
                                 std::string(format_name(f)));
  }
}

// Measurements set in the environment at prepare (docs/design.md §13): MOE_MEGA_CHUNKS=1 streams
// bf16 (one 16 KB tile a stage: MOE_MEGA_BF16_STAGE=64) and e4m3 weights from prepared chunks
// (the stage's tile as TMA would have made it), and MOE_MEGA_FP4_STAGE=128 streams 4-bit weights
// one chunk a stage, where the default takes two (the same sums in the same order; here GEMM2
// never splits along K, so its parts agree too): the very same bits as the TMA tiles;
// MOE_MEGA_FP8_TOKENS=e4m3 multiplies fp8_block's codes as e4m3, where the default keeps them as
// f16 values, MOE_MEGA_FP8_WGMMA=1 by wgmma (32-slot items of 1 to 32 slots: N = 8, 16 and 32;
// every token on one expert: three full items), and bf16's default streams two chunks a stage
// (other sums: within the tolerance, and the same bits run after run); fp8_block's default two
// tiles a stage give the same bits by TMA and as prepared chunks (MOE_MEGA_FP8_STAGE=128 keeps one
// tile). Gated and relu2 W13 tiles, a shared expert's virtual experts, GEMM2 split along K at one
// token, a batch whose tokens have no expert (no GEMM2 item: the plain combine's zeros).
TEST_F(MegaLayer, PreparedChunksGiveTheMapsBitsAndE4m3TokensMatch) {
  struct Setup {
    moe_format format;
    moe_activation activation;
    int64_t shared;
  };
  for (const Setup& c :
       {Setup{MOE_FORMAT_BF16, MOE_ACTIVATION_SILU_MUL, 384},
        Setup{MOE_FORMAT_BF16, MOE_ACTIVATION_RELU2, 0}, Setup{kFp8, MOE_ACTIVATION_SILU_MUL, 256},
        Setup{kMx, MOE_ACTIVATION_SILU_MUL, 256}}) {
    Problem q = problem_;
    q.raw().activation = c.activation;
    q.raw().shared_intermediate = c.shared;
    q = in_format(q, c.format);
    const moe_problem p = q.c();
    const std::string what =
        fmt::format("{} {}", format_name(c.format), activation_name(c.activation));
    const LayerWeights w = random_weights(p, 51);
    const Layer ref_layer = reference_->prepare(p, w.view(), {});
    // Each variable set to its value at prepare (bf16's and fp8_block's one 16 KB tile a stage
    // for every layer but the defaults: the maps and the chunks compared are one-tile stages).
    auto prepared_as_tiles = [&](EnvVars vars) {
      if (c.format == MOE_FORMAT_BF16) vars.emplace_back("MOE_MEGA_BF16_STAGE", "64");
      if (c.format == kFp8) vars.emplace_back("MOE_MEGA_FP8_STAGE", "128");
      return prepared_with(p, w, vars);
    };
    const Layer maps = prepared_as_tiles({});
    const Layer chunks = prepared_as_tiles({{"MOE_MEGA_CHUNKS", "1"}});
    const Layer one_chunk = prepared_as_tiles({{"MOE_MEGA_FP4_STAGE", "128"}});
    // bf16's default; fp8_block's two tiles a stage by mma.sync (its default multiplies them by
    // wgmma: "e4m3 tokens by wgmma, two tiles a stage" below), by TMA and as prepared chunks
    const EnvVars mma_sync = c.format == kFp8 ? EnvVars{{"MOE_MEGA_FP8_WGMMA", "0"}} : EnvVars{};
    const Layer two_chunks = prepared_with(p, w, mma_sync);
    EnvVars mma_sync_chunks = mma_sync;
    mma_sync_chunks.emplace_back("MOE_MEGA_CHUNKS", "1");
    const Layer two_tiles_chunks = prepared_with(p, w, mma_sync_chunks);  // fp8_block
    // fp8_block's e4m3 codes: by e4m3 mma.sync, and by wgmma with one and two tiles a stage
    std::vector<std::pair<std::string, Layer>> e4m3;
    if (c.format == kFp8) {
      e4m3.emplace_back("e4m3 tokens", prepared_as_tiles({{"MOE_MEGA_FP8_TOKENS", "e4m3"}}));
      e4m3.emplace_back("e4m3 tokens by wgmma", prepared_with(p, w, {{"MOE_MEGA_FP8_WGMMA", "1"}}));
      e4m3.emplace_back("e4m3 tokens by wgmma, two tiles a stage (the default)",
                        plugin_->prepare(p, w.view(), {}));
      e4m3.emplace_back("e4m3 tokens by wgmma, two tiles a stage as chunks",
                        prepared_with(p, w, {{"MOE_MEGA_CHUNKS", "1"}}));
    }
    for (int64_t tokens : {1, 40, 96}) {
      const Batch batch = random_batch(p, tokens, 90 + uint64_t(tokens), Scenario::kRandom);
      const Routing routing = route_batch(*reference_, p, batch);
      const std::string at = fmt::format(" at {} tokens", tokens);
      expect_same_bits(maps, chunks, p, batch, routing,
                       what + ": chunks differ from the maps" + at);
      if (c.format == kMx)
        expect_same_bits(maps, one_chunk, p, batch, routing,
                         what + ": two chunks a stage differ from one" + at);
      if (c.format == kFp8) {
        for (const auto& [name, layer] : e4m3)
          expect_matches_and_repeats(layer, ref_layer, p, tokens, 90 + uint64_t(tokens),
                                     what + ", " + name);
        expect_same_bits(two_chunks, two_tiles_chunks, p, batch, routing,
                         what + ": two tiles a stage differ as chunks from the maps" + at);
      }
      if (c.format == MOE_FORMAT_BF16)  // GEMM2's K split counts 128-K stages: other sums at T=1
        expect_matches_and_repeats(two_chunks, ref_layer, p, tokens, 90 + uint64_t(tokens),
                                   what + ", two chunks a stage (the default)");
    }
    {  // no token with an expert: no GEMM2 item, so the plain combine writes every row's zeros
      const Batch batch = random_batch(p, 5, 98, Scenario::kRandom);
      Routing routing = route_batch(*reference_, p, batch);
      for (int64_t i = 0; i < routing.ids.numel(); ++i) routing.ids.data<int32_t>()[i] = -1;
      expect_same_bits(maps, chunks, p, batch, routing, what + ", no expert");
    }
    // every token on one expert: 96 slots, items of 64 and 32 (wgmma: 3 x 32)
    if (c.format == kFp8) {
      const Batch batch = random_batch(p, 96, 97, Scenario::kOneExpert);
      const Routing routing = route_batch(*reference_, p, batch);
      const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
      for (const auto& [name, layer] : e4m3) {
        const RunResult out = run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16);
        EXPECT_LT(relative_l2(out.output, ref.output), tolerance(p)) << what << ", " << name;
      }
    }
  }
}

// MOE_MEGA_FP8_OWN_ROWS=1: each CTA quantises the batch's hidden states itself (up to
// own_rows_tokens: 16384 / H = 64 tokens here) instead of the grid behind a barrier (=0: never):
// the same codes and scales, so the very same bits, on the two-tile and the one-tile instance,
// below and above the limit (96 tokens: the grid's path), with a shared expert's virtual experts,
// and replayed as a CUDA graph against the reference (and the wgmma instance with own rows and
// late prefetches against itself without). The default (up to 2048 / H = 8 tokens
// here) gives the same bits too, and so does MOE_MEGA_FP8_PREFETCH=late0, late1 and late (GEMM1's,
// GEMM2's or both first stages prefetched after the quantisations), with and without own rows.
TEST_F(MegaLayer, OwnRowsGiveTheGridsBits) {
  for (int64_t inter : {256, 384}) {
    Problem q = problem_;
    q.raw().intermediate = inter;
    q.raw().shared_intermediate = 256;
    q = in_format(q, kFp8);
    const moe_problem p = q.c();
    const LayerWeights w = random_weights(p, 81);
    const Layer grid = prepared_with(p, w, {{"MOE_MEGA_FP8_OWN_ROWS", "0"}});
    const Layer own = prepared_with(p, w, {{"MOE_MEGA_FP8_OWN_ROWS", "1"}});
    const Layer by_default = plugin_->prepare(p, w.view(), {});
    std::vector<std::pair<std::string, Layer>> late;
    for (const char* v : {"late0", "late1", "late"})
      late.emplace_back(v, prepared_with(p, w, {{"MOE_MEGA_FP8_PREFETCH", v}}));
    // a copy of the batch's codes per CTA: the switch took effect, and the default's copies
    // cover fewer tokens
    EXPECT_GT(own.workspace_size(16), by_default.workspace_size(16)) << "I " << inter;
    EXPECT_GT(by_default.workspace_size(1), grid.workspace_size(1)) << "I " << inter;
    for (int64_t tokens : {1, 5, 8, 9, 40, 64, 96}) {
      const Batch batch = random_batch(p, tokens, 80 + uint64_t(tokens), Scenario::kRandom);
      const Routing routing = route_batch(*reference_, p, batch);
      expect_same_bits(grid, own, p, batch, routing,
                       fmt::format("I {}: own rows differ at {} tokens", inter, tokens));
      expect_same_bits(grid, by_default, p, batch, routing,
                       fmt::format("I {}: the default differs at {} tokens", inter, tokens));
      for (const auto& [name, layer] : late)
        expect_same_bits(
            grid, layer, p, batch, routing,
            fmt::format("I {}: prefetch {} differs at {} tokens", inter, name, tokens));
    }
    {  // the wgmma instance: the same bits with own rows and with both prefetches late
      const Layer wg_grid =
          prepared_with(p, w, {{"MOE_MEGA_FP8_WGMMA", "1"}, {"MOE_MEGA_FP8_OWN_ROWS", "0"}});
      const Layer wg_own = prepared_with(p, w,
                                         {{"MOE_MEGA_FP8_WGMMA", "1"},
                                          {"MOE_MEGA_FP8_OWN_ROWS", "1"},
                                          {"MOE_MEGA_FP8_PREFETCH", "late"}});
      for (int64_t tokens : {1, 9, 40}) {
        const Batch batch = random_batch(p, tokens, 70 + uint64_t(tokens), Scenario::kRandom);
        const Routing routing = route_batch(*reference_, p, batch);
        expect_same_bits(
            wg_grid, wg_own, p, batch, routing,
            fmt::format("I {}: wgmma, own rows and late prefetches differ at {} tokens", inter,
                        tokens));
      }
    }
    const Layer ref_layer = reference_->prepare(p, w.view(), {});
    const GraphReplay graph(plugin_, own, p, 9);
    for (uint64_t seed : {41u, 42u}) {
      const Batch batch = random_batch(p, 9, seed, Scenario::kRandom);
      EXPECT_LT(graph.error_against(ref_layer, *reference_, p, batch), tolerance(p))
          << "I " << inter << ", own rows replayed, seed " << seed;
    }
  }
}

// MOE_MEGA_LAUNCH=pdl launches the kernel as a programmatic dependent of the stream's previous
// kernel (cudaLaunchKernelEx, cooperative): the same bits as the ordinary launch, run after run
// (the previous kernel is the last run's), and as a CUDA graph replayed with new inputs.
TEST_F(MegaLayer, ADependentLaunchGivesTheOrdinaryLaunchsBitsEagerAndReplayed) {
  for (moe_format f : {MOE_FORMAT_BF16, kFp8, kNv}) {
    const moe_problem p = in_format(problem_, f).c();
    const LayerWeights w = random_weights(p, 91);
    const Layer ordinary = plugin_->prepare(p, w.view(), {});
    setenv("MOE_MEGA_LAUNCH", "pdl", 1);
    const Layer dependent = plugin_->prepare(p, w.view(), {});
    unsetenv("MOE_MEGA_LAUNCH");
    const Layer ref_layer = reference_->prepare(p, w.view(), {});
    for (int64_t tokens : {1, 40, 96}) {
      const Batch batch = random_batch(p, tokens, 300 + uint64_t(tokens), Scenario::kRandom);
      const Routing routing = route_batch(*reference_, p, batch);
      expect_same_bits(
          ordinary, dependent, p, batch, routing,
          fmt::format("{}: the dependent launch differs at {} tokens", format_name(f), tokens));
    }
    const GraphReplay graph(plugin_, dependent, p, 37);
    for (uint64_t seed : {31u, 32u}) {
      const Batch batch = random_batch(p, 37, seed, Scenario::kRandom);
      EXPECT_LT(graph.error_against(ref_layer, *reference_, p, batch), tolerance(p))
          << format_name(f) << ", dependent launch replayed, seed " << seed;
    }
  }
}

// Stages of several prepared chunks at every batch: two 4-bit chunks (MOE_MEGA_FP4_STAGE=256, and
// by wgmma with MOE_MEGA_FP4_WGMMA=1 in mxfp4 and nvfp4), four (MOE_MEGA_FP4_STAGE=512; token
// rows of 1 KB, copied in two passes), two bf16 chunks (the
// default where H and I are multiples of 128: 32 KB stages), two e4m3 tiles by mma.sync
// (MOE_MEGA_FP8_WGMMA=0 where H and I are multiples of 256: two scale blocks a stage, 32-slot
// items; by TMA, and as prepared chunks with MOE_MEGA_CHUNKS=1), e4m3 tiles by wgmma
// (MOE_MEGA_FP8_WGMMA=1: one a stage; two, the default where two tiles apply; 8 and 4 stages, so an
// item of I = 1024 fills the ring and the next wraps it; by TMA and as chunks), where GEMM2 splits
// along K
// (I = 1024 at one token): against the reference, the same bits run after run; the layer's
// timeline shows the instance that ran (its number, K step and stage bytes), not a fallback.
TEST_F(MegaLayer, MultiChunkStagesMatchTheReferenceWhereGemm2Splits) {
  struct Setup {
    moe_format format;
    int chunks;
    EnvVars vars;  // the switches that take the instance (none: the default)
    int chunk_bytes, chunk_k;
    int instance;  // the kernel instance the timeline must name (kernels/config.cuh WeightKind)
  };
  const char* const fp4_stage = "MOE_MEGA_FP4_STAGE";
  const char* const fp4_wgmma = "MOE_MEGA_FP4_WGMMA";
  const char* const fp8_wgmma = "MOE_MEGA_FP8_WGMMA";
  const char* const chunks = "MOE_MEGA_CHUNKS";
  for (const Setup& c :
       {Setup{kMx, 2, {{fp4_stage, "256"}}, 8704, 128, 5},
        Setup{kMx, 2, {{fp4_wgmma, "1"}}, 8704, 128, 12},
        Setup{kNv, 2, {{fp4_wgmma, "1"}}, 9216, 128, 13},
        Setup{kMx, 4, {{fp4_stage, "512"}}, 8704, 128, 7},
        Setup{kNv, 2, {{fp4_stage, "256"}}, 9216, 128, 6},
        Setup{kNv, 4, {{fp4_stage, "512"}}, 9216, 128, 8},
        Setup{MOE_FORMAT_BF16, 2, {}, 16384, 64, 9},
        Setup{MOE_FORMAT_FP8_BLOCK, 2, {}, 16384, 128, 14},
        Setup{MOE_FORMAT_FP8_BLOCK, 2, {{chunks, "1"}}, 16384, 128, 14},
        Setup{MOE_FORMAT_FP8_BLOCK, 2, {{fp8_wgmma, "0"}}, 16384, 128, 10},
        Setup{MOE_FORMAT_FP8_BLOCK, 2, {{fp8_wgmma, "0"}, {chunks, "1"}}, 16384, 128, 10},
        Setup{MOE_FORMAT_FP8_BLOCK, 1, {{"MOE_MEGA_FP8_STAGE", "128"}}, 16384, 128, 4},
        Setup{MOE_FORMAT_FP8_BLOCK, 1, {{fp8_wgmma, "1"}}, 16384, 128, 11},
        Setup{MOE_FORMAT_FP8_BLOCK, 1, {{fp8_wgmma, "1"}, {chunks, "1"}}, 16384, 128, 11}}) {
    Problem q = problem_;
    q.raw().hidden = 512;
    q.raw().intermediate = 1024;
    q = in_format(q, c.format);
    const moe_problem p = q.c();
    const LayerWeights w = random_weights(p, 61);
    const Layer ref_layer = reference_->prepare(p, w.view(), {});
    std::string what =
        fmt::format("{}, {} chunks a stage, switches:", format_name(c.format), c.chunks);
    for (const auto& [name, value] : c.vars) what += fmt::format(" {}={}", name, value);
    const nlohmann::json j = timeline_of(p, w, c.vars, [&](const Layer& layer) {
      for (int64_t tokens : {1, 40, 96})
        expect_matches_and_repeats(layer, ref_layer, p, tokens, 62 + uint64_t(tokens), what);
    });
    ASSERT_FALSE(j.is_null()) << what;
    EXPECT_EQ(j["step_bytes"], c.chunks * c.chunk_bytes) << what;
    EXPECT_EQ(j["steps1"], p.hidden / (c.chunk_k * c.chunks)) << what;
    EXPECT_EQ(j["steps2"], p.intermediate / (c.chunk_k * c.chunks)) << what;
    EXPECT_EQ(j["instance"], c.instance) << what;
  }
}

// By default a 4-bit layer whose H and I are multiples of 512 takes two chunks a stage below
// four_chunk_tokens (8 slots an expert: 32 tokens here) and four from there, on the same prepared
// chunks: each batch against the reference, and the timeline of each layer's last run shows the
// instance it took.
TEST_F(MegaLayer, The4BitStageTakesFourChunksFromEightSlotsAnExpert) {
  for (moe_format f : {kMx, kNv}) {
    Problem q = problem_;
    q.raw().hidden = 512;
    q.raw().intermediate = 512;
    q = in_format(q, f);
    const moe_problem p = q.c();
    // four_chunk_tokens: 8 x 16 experts / top_k 4 = 32 (support_test.cpp checks the rule)
    const LayerWeights w = random_weights(p, 71);
    const Layer ref_layer = reference_->prepare(p, w.view(), {});
    const int chunk_bytes = f == kMx ? 8704 : 9216;
    for (const auto& [tokens, chunks] : {std::pair{31, 2}, std::pair{32, 4}, std::pair{96, 4}}) {
      const std::string what = fmt::format("{} at {} tokens", format_name(f), tokens);
      const nlohmann::json j = timeline_of(p, w, {}, [&](const Layer& layer) {
        expect_matches_and_repeats(layer, ref_layer, p, tokens, 72 + uint64_t(tokens), what);
      });
      ASSERT_FALSE(j.is_null()) << what;
      EXPECT_EQ(j["step_bytes"], chunks * chunk_bytes) << what;
    }
  }
}

// `sms: N` runs the same layer on N CTAs (every phase's items strided over fewer of them, GEMM2's
// K split chosen for N): 1 and 7 CTAs, and a cap above the device's SMs (every SM), against the
// reference, two runs bit for bit.
TEST_F(MegaLayer, FewerSmsMatchTheReferenceAndRepeatBitForBit) {
  struct Setup {
    moe_format format;
    moe_input_format input;
  };
  for (const Setup& c : {Setup{MOE_FORMAT_BF16, MOE_INPUT_DEFAULT}, Setup{kFp8, MOE_INPUT_DEFAULT},
                         Setup{kMx, MOE_INPUT_DEFAULT}, Setup{kNv, MOE_INPUT_DEFAULT},
                         Setup{kMx, kMx8}, Setup{kNv, kDynamic}}) {
    const moe_format f = c.format;
    const moe_problem p = in_format(problem_, f, c.input).c();
    const LayerWeights w = random_weights(p, 31);
    const Layer ref_layer = reference_->prepare(p, w.view(), {});
    for (const char* sms : {"1", "7", "1024"}) {
      const Layer layer = plugin_->prepare(p, w.view(), {{"sms", sms}});
      for (int64_t tokens : {1, 40, 96})
        expect_matches_and_repeats(
            layer, ref_layer, p, tokens, 70 + uint64_t(tokens),
            fmt::format("{} on {}, sms {}", format_name(f),
                        input_format_name(static_cast<moe_input_format>(p.input_format)), sms));
    }
  }
}

// MOE_MEGA_TIMELINE (a measurement): the layer writes its last run's clocks when destroyed, every
// CTA's phase boundaries in order, and one record per GEMM1 item: each active expert's one chunk
// (33 tokens x 4 slots over 16 experts: under 64 slots an expert) times I / 64 column slices.
TEST_F(MegaLayer, ATimelineNamedInTheEnvironmentHoldsTheLastRunsClocksInOrder) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 41);
  const Batch batch = random_batch(p, 33, 7, Scenario::kRandom);
  const Routing routing = route_batch(*reference_, p, batch);
  const nlohmann::json j = timeline_of(p, w, {}, [&](const Layer& layer) {
    run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16);
  });
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["tokens"], 33);
  EXPECT_EQ(j["format"], "bf16");
  std::set<int32_t> active;
  for (int64_t i = 0; i < routing.ids.numel(); ++i)
    if (routing.ids.data<int32_t>()[i] >= 0) active.insert(routing.ids.data<int32_t>()[i]);
  size_t gemm1_items = 0;
  for (const auto& r : j["records"]) {
    uint64_t last = 0;
    for (const auto& b : r["boundaries"]) {
      ASSERT_FALSE(b["ns"].is_null()) << r["cta"] << ": a boundary not reached";
      EXPECT_GE(b["ns"].get<uint64_t>(), last) << r["cta"];
      last = b["ns"].get<uint64_t>();
    }
    for (const auto& it : r["items"]) gemm1_items += it["phase"] == 1 ? 1 : 0;
  }
  EXPECT_EQ(gemm1_items, active.size() * size_t(p.intermediate / 64));
}

class MegaGraph : public MegaLayer, public testing::WithParamInterface<moe_format> {};

TEST_P(MegaGraph, ReplayedGraphMatchesTheReferenceForNewInputsAndRouting) {
  const Problem q = in_format(problem_, GetParam());
  const moe_problem p = q.c();
  const LayerWeights w = random_weights(p, 5);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  const GraphReplay graph(plugin_, layer, p, 37);
  for (uint64_t seed : {11u, 12u, 13u}) {
    const Batch batch =
        random_batch(p, 37, seed, seed == 12 ? Scenario::kPadding : Scenario::kRandom);
    EXPECT_LT(graph.error_against(ref_layer, *reference_, p, batch), tolerance(p))
        << "seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, MegaGraph, testing::Values(MOE_FORMAT_BF16, kFp8, kMx, kNv),
                         [](const testing::TestParamInfo<moe_format>& info) {
                           return std::string(format_name(info.param));
                         });

// Sinks apart (fp8_block, mxfp4, and bf16 with gelu_mul: a second launch of the bf16 kernel adds
// their sum into the first's output): both launches in one replayed graph with new inputs and
// routing, and a run onto an output (accumulate: the first launch adds onto it, then the sinks),
// against the reference's result plus that output.
TEST_F(MegaLayer, SinksApartReplayInAGraphAndAddOntoAnOutput) {
  for (const auto& [f, act] :
       {std::pair{kFp8, MOE_ACTIVATION_SILU_MUL}, std::pair{kMx, MOE_ACTIVATION_SILU_MUL},
        std::pair{MOE_FORMAT_BF16, MOE_ACTIVATION_GELU_MUL}}) {
    Problem q = problem_;
    q.raw().activation = act;
    add_sinks(q, 384);
    q = in_format(q, f);
    const moe_problem p = q.c();
    const std::string what = fmt::format("{} {}", format_name(f), activation_name(act));
    const LayerWeights w = random_weights(p, 83);
    const Layer layer = plugin_->prepare(p, w.view(), {});
    const Layer ref_layer = reference_->prepare(p, w.view(), {});
    const GraphReplay graph(plugin_, layer, p, 29);
    for (uint64_t seed : {91u, 92u}) {
      const Batch batch = random_batch(p, 29, seed, Scenario::kRandom);
      EXPECT_LT(graph.error_against(ref_layer, *reference_, p, batch), tolerance(p))
          << what << ", replayed, seed " << seed;
    }
    const Batch batch = random_batch(p, 21, 95, Scenario::kPadding);
    const Routing routing = route_batch(*reference_, p, batch);
    // The output to add onto: random hidden states scaled to about the layer's size (x 1/4,
    // exact in bf16), so the layer's share of the sum is not lost in it.
    HostTensor base = random_batch(p, 21, 96, Scenario::kRandom).hidden;
    for (int64_t i = 0; i < base.numel(); ++i)
      base.data<uint16_t>()[i] = float_to_bf16(0.25f * bf16_to_float(base.data<uint16_t>()[i]));
    const RunResult got = run_layer_onto(layer, p, batch.hidden, routing, base);
    const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
    HostTensor want(MOE_DTYPE_F64, {21, p.hidden});
    for (int64_t i = 0; i < want.numel(); ++i)
      want.data<double>()[i] =
          double(bf16_to_float(base.data<uint16_t>()[i])) + ref.output.data<double>()[i];
    EXPECT_LT(relative_l2(got.output, want), tolerance(p)) << what << ", onto an output";
  }
}

// A NaN, zero or negative block scale is a corrupt tensor, not a dead block: prepare refuses it,
// naming the tensor and the block.
TEST_F(MegaLayer, CorruptBlockScalesAreRefusedAtPrepareNamingTheBlock) {
  const Problem q = in_format(problem_, kFp8);
  const moe_problem p = q.c();
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    LayerWeights w = random_weights(p, 5);
    static_cast<float*>(w.w2_scale.raw())[3] = bad;  // expert 0, row block 1, K block 1
    expect_error([&] { plugin_->prepare(p, w.view(), {}); }, MOE_STATUS_INVALID_ARGUMENT,
                 {"w2_scale[0][1][1]", "not a finite positive block scale"});
  }
}

// 4-bit scales the kernel cannot take exactly, and nvfp4 scale_2 values that cannot be right, are
// refused at prepare naming the tensor and the place (moe_cuda/fp4_chunks.hpp).
TEST_F(MegaLayer, CorruptFp4ScalesAreRefusedAtPrepareNamingThePlace) {
  const moe_problem mx = in_format(problem_, kMx).c();
  LayerWeights w = random_weights(mx, 5);
  static_cast<uint8_t*>(w.w13_scale.raw())[8 * 2 + 1] = 0xff;  // expert 0, row 2, block 1
  expect_error([&] { plugin_->prepare(mx, w.view(), {}); }, MOE_STATUS_INVALID_ARGUMENT,
               {"w13_scale[0, 2, 1]", "NaN"});
  const moe_problem nv = in_format(problem_, kNv).c();
  for (float bad : {0.0f, -2.0f, std::numeric_limits<float>::infinity()}) {
    LayerWeights v = random_weights(nv, 5);
    static_cast<float*>(v.w2_scale_2.raw())[3] = bad;
    expect_error([&] { plugin_->prepare(nv, v.view(), {}); }, MOE_STATUS_INVALID_ARGUMENT,
                 {"w2_scale_2[3]", "finite and positive"});
  }
}

TEST_F(MegaLayer, ABatchAboveCapacityIsRefusedNamingBothNumbers) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 5);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  Problem roomy = problem_;  // routes 97 tokens (routing does not depend on the capacity)
  roomy.raw().max_tokens = 128;
  roomy.finalize();
  const Batch batch = random_batch(roomy.c(), 97, 1, Scenario::kRandom);
  const Routing routing = route_batch(*reference_, roomy.c(), batch);
  expect_error([&] { run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16); },
               MOE_STATUS_CAPACITY_EXCEEDED, {"97 tokens", "max_tokens=96"});
}

// A run whose hidden states start `hidden_offset` bytes and whose workspace starts
// `workspace_offset` bytes past a cudaMalloc'd (256-byte aligned) buffer, expected to fail with
// `status` naming `words` before anything launches.
void expect_misaligned_run_refused(const std::shared_ptr<const Plugin>& plugin,
                                   const Plugin& reference, const moe_problem& p,
                                   size_t hidden_offset, size_t workspace_offset,
                                   std::initializer_list<std::string> words) {
  const LayerWeights w = random_weights(p, 7);
  const Layer layer = plugin->prepare(p, w.view(), {});
  const int64_t tokens = 9, width = p.top_k;
  const Batch batch = random_batch(p, tokens, 3, Scenario::kRandom);
  const Routing routing = route_batch(reference, p, batch);
  const size_t row_bytes = size_t(tokens * p.hidden * 2);
  Buffer hidden(plugin, row_bytes + 16), out(plugin, row_bytes), ids(plugin, tokens * width * 4),
      weights(plugin, tokens * width * 4);
  const size_t ws_bytes = layer.workspace_size(tokens);
  Buffer ws(plugin, ws_bytes + 16);
  char* h = static_cast<char*>(hidden.data()) + hidden_offset;
  ASSERT_EQ(cudaMemcpy(h, batch.hidden.raw(), row_bytes, cudaMemcpyHostToDevice), cudaSuccess);
  upload_tensor(ids, routing.ids);
  upload_tensor(weights, routing.weights);
  moe_run_args args{};
  args.hidden = make_view(h, MOE_DTYPE_BF16, {tokens, p.hidden});
  args.topk_ids = make_view(ids.data(), MOE_DTYPE_I32, {tokens, width});
  args.topk_weights = make_view(weights.data(), MOE_DTYPE_F32, {tokens, width});
  args.output = make_view(out.data(), MOE_DTYPE_BF16, {tokens, p.hidden});
  args.workspace = static_cast<char*>(ws.data()) + workspace_offset;
  args.workspace_size = ws_bytes;
  expect_error([&] { layer.run(args); }, MOE_STATUS_INVALID_ARGUMENT, words);
}

// Hidden states 2 bytes off a 16-byte boundary: the kernel copies their rows 16 bytes at a time,
// so the run refuses them, naming the tensor.
TEST_F(MegaLayer, HiddenStatesOffA16ByteBoundaryAreRefusedNamingThem) {
  expect_misaligned_run_refused(plugin_, *reference_, problem_.c(), 2, 0,
                                {"hidden", "16-byte aligned"});
}

// A workspace 8 bytes off a 16-byte boundary: its rows are copied and summed 16 bytes at a time.
TEST_F(MegaLayer, WorkspaceOffA16ByteBoundaryIsRefusedNamingIt) {
  expect_misaligned_run_refused(plugin_, *reference_, problem_.c(), 0, 8,
                                {"workspace", "16-byte aligned"});
}

}  // namespace
}  // namespace moe::test
