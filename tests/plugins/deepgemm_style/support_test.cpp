// What deepgemm_style takes and refuses, and its options, on any machine: shape, format and
// feature refusals come before the device check, each with its reason and a sentence naming the
// value; options are parsed (and refused) before anything touches a device.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>

#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"
#include "src/deepgemm_layer.hpp"

namespace moe::deepgemm {
namespace {

moe_problem fp8_problem() {
  moe_problem p = default_problem();
  p.experts = 16;
  p.local_experts = 16;
  p.top_k = 4;
  p.hidden = 384;
  p.intermediate = 256;
  p.format = MOE_FORMAT_FP8_BLOCK;
  p.input_format = MOE_INPUT_FP8_1X128;
  return p;
}

void expect_refusal(const moe_problem& p, moe_reason reason, const std::string& words) {
  const sdk::Verdict v = check_support(p);
  EXPECT_EQ(v.reason, reason) << v.message;
  EXPECT_NE(v.message.find(words), std::string::npos) << v.message;
}

TEST(DeepGemmSupport, RefusesWhatItCannotRunWithTheReasonAndTheValue) {
  moe_problem p = fp8_problem();
  p.format = MOE_FORMAT_BF16;
  expect_refusal(p, MOE_REASON_FORMAT, "not bf16");
  p = fp8_problem();
  p.input_format = MOE_INPUT_BF16;
  expect_refusal(p, MOE_REASON_INPUT_FORMAT, "fp8_1x128");
  p = fp8_problem();
  p.hidden = 320;
  expect_refusal(p, MOE_REASON_SHAPE, "hidden=320");
  p = fp8_problem();
  p.intermediate = 192;
  expect_refusal(p, MOE_REASON_SHAPE, "intermediate=192");
  p = fp8_problem();
  p.shared_intermediate = 128;
  expect_refusal(p, MOE_REASON_SHARED, "shared_intermediate=128");
  p = fp8_problem();  // more columns than the combine takes (refused at run before)
  p.experts = p.local_experts = 64;
  p.top_k = 33;
  expect_refusal(p, MOE_REASON_OTHER, "top_k + sink_experts = 33 columns a token");
}

TEST(DeepGemmSupport, AProblemItCanRunIsRefusedOnlyForWantOfAnSm90Device) {
  moe_problem p = fp8_problem();
  p.expert_bias = 1;  // b13 and b2 are taken (added before the activation and the combine)
  p.shared_intermediate = p.intermediate;
  p.sink_experts = 2;  // bf16 sinks next to the e4m3 experts (cuBLAS, sink_experts.hpp)
  p.sink_intermediate = 192;
  p.routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  p.routing_bias = 1;
  const sdk::Verdict v = check_support(p);
  if (v.ok()) GTEST_SKIP() << "an sm_90 device is present: nothing to refuse";
  EXPECT_EQ(v.reason, MOE_REASON_ARCH) << v.message;
}

TEST(DeepGemmOptions, ParsesTheLayoutTilesAndThreshold) {
  const LayerOptions o = parse_options(
      {{"layout", "masked"}, {"masked_max_tokens", "128"}, {"gemm_tiles", "weights"}});
  ASSERT_TRUE(o.layout.has_value());
  EXPECT_EQ(*o.layout, RowLayout::kMasked);
  EXPECT_EQ(o.masked_max_tokens, 128);
  ASSERT_TRUE(o.tiles.has_value());
  EXPECT_EQ(*o.tiles, Fp8Tiles::kWeights);
  const LayerOptions own = parse_options({{"gemm_tiles", "tokens_ffma"}});
  ASSERT_TRUE(own.tiles.has_value());
  EXPECT_EQ(*own.tiles, Fp8Tiles::kTokensFfma);
  const LayerOptions wide = parse_options({{"gemm_tiles", "tokens_ffma192"}});
  ASSERT_TRUE(wide.tiles.has_value());
  EXPECT_EQ(*wide.tiles, Fp8Tiles::kTokensFfma192);
  const LayerOptions paired = parse_options({{"gemm_tiles", "tokens_paired"}});
  ASSERT_TRUE(paired.tiles.has_value());
  EXPECT_EQ(*paired.tiles, Fp8Tiles::kTokensPaired);
  EXPECT_EQ(parse_options({{"gemm_tiles", "tokens_ffma_split"}}).tiles,
            std::optional(Fp8Tiles::kTokensFfmaSplitK));
  EXPECT_EQ(parse_options({{"gemm_tiles", "weights_ffma"}}).tiles,
            std::optional(Fp8Tiles::kWeightsFfma));
  EXPECT_EQ(parse_options({{"gemm_tiles", "weights_ffma_split"}}).tiles,
            std::optional(Fp8Tiles::kWeightsFfmaSplitK));
  EXPECT_EQ(parse_options({{"gemm1_epilogue", "fused"}}).fused_gemm1, std::optional(true));
  EXPECT_EQ(parse_options({{"gemm1_epilogue", "separate"}}).fused_gemm1, std::optional(false));
  EXPECT_FALSE(parse_options({{"gemm1_epilogue", "auto"}}).fused_gemm1.has_value());
  const LayerOptions d = parse_options({});
  EXPECT_FALSE(d.layout.has_value());
  EXPECT_EQ(d.masked_max_tokens, 64);
  EXPECT_FALSE(d.tiles.has_value());
  EXPECT_FALSE(d.fused_gemm1.has_value());
}

TEST(DeepGemmOptions, RefusesUnknownKeysAndValuesNamingThem) {
  const std::pair<Options, std::string> bad[] = {
      {{{"layout", "sorted"}}, "layout 'sorted'"},
      {{{"masked_max_tokens", "12x"}}, "masked_max_tokens '12x'"},
      {{{"masked_max_tokens", "-1"}}, "masked_max_tokens '-1'"},
      {{{"gemm_tiles", "wide"}}, "gemm_tiles 'wide'"},
      {{{"gemm_tiles", "wide"}},
       "is not one of auto, tokens, tokens_paired, tokens_ffma, tokens_ffma192, "
       "tokens_ffma_split, weights_ffma, weights_ffma_split, weights"},
      {{{"gemm1_epilogue", "on"}}, "gemm1_epilogue 'on' is not auto, separate or fused"},
      {{{"tile", "auto"}}, "unknown option 'tile'"},
      {{{"tile", "auto"}}, "gemm_tiles, gemm1_epilogue)"},
  };
  for (const auto& [options, words] : bad) {
    try {
      parse_options(options);
      ADD_FAILURE() << "accepted " << words;
    } catch (const moe::Error& e) {
      EXPECT_EQ(e.status(), MOE_STATUS_CONFIG_ERROR);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  }
}

TEST(DeepGemmDescribe, SaysWhichLayoutEachBatchGetsAndWhy) {
  const std::string auto_rule = describe(fp8_problem(), parse_options({}));
  EXPECT_NE(auto_rule.find("masked for T <= 64"), std::string::npos) << auto_rule;
  EXPECT_NE(auto_rule.find("contiguous above"), std::string::npos) << auto_rule;
  EXPECT_NE(auto_rule.find("the own kernel with its operands swapped (128x16 weight tiles) up "
                           "to 8 rows an expert (and at most 16 in any group, the shared "
                           "expert's included), its token tiles (128 rows, 192 past 112 rows an "
                           "expert) for up to 176 rows an expert and at most 4096 rows in all"),
            std::string::npos)
      << auto_rule;
  EXPECT_NE(auto_rule.find("GEMM2 on 128-row tiles that would leave half of the SMs idle splits "
                           "K over CTA pairs"),
            std::string::npos)
      << auto_rule;
  const std::string split =
      describe(fp8_problem(), parse_options({{"gemm_tiles", "tokens_ffma_split"}}));
  EXPECT_NE(split.find("token tiles 128x128 split in K over a CTA pair, own kernel"),
            std::string::npos)
      << split;
  const std::string forced = describe(fp8_problem(), parse_options({{"layout", "contiguous"}}));
  EXPECT_NE(forced.find("contiguous at every batch size"), std::string::npos) << forced;
  EXPECT_EQ(forced.find("sink"), std::string::npos) << forced;
  moe_problem sinks = fp8_problem();
  sinks.sink_experts = 2;
  sinks.sink_intermediate = 192;
  const std::string with_sinks = describe(sinks, parse_options({}));
  EXPECT_NE(with_sinks.find("2 sink experts (I=192) in bf16 on every token by cuBLAS"),
            std::string::npos)
      << with_sinks;
  EXPECT_NE(with_sinks.find("GEMMs: CUTLASS's"), std::string::npos) << with_sinks;
  EXPECT_NE(auto_rule.find("re-quantisation in GEMM1's epilogue where the own kernel runs "
                           "192-row tiles (and its 128-row tiles from hidden 4096 and 32 rows an "
                           "expert), else in a kernel of their own"),
            std::string::npos)
      << auto_rule;
  moe_problem wide = fp8_problem();
  wide.hidden = 4096;
  const std::string wide_rule = describe(wide, parse_options({}));
  EXPECT_NE(wide_rule.find("re-quantisation in GEMM1's epilogue wherever the own kernel's token "
                           "tiles run GEMM1 with 32 or more rows an expert (hidden >= 4096)"),
            std::string::npos)
      << wide_rule;
  EXPECT_EQ(with_sinks.find("epilogue"), std::string::npos) << with_sinks;
  const std::string separate =
      describe(fp8_problem(), parse_options({{"gemm1_epilogue", "separate"}}));
  EXPECT_NE(separate.find("re-quantisation in a kernel of their own (option gemm1_epilogue)"),
            std::string::npos)
      << separate;
  const std::string fused = describe(fp8_problem(), parse_options({{"gemm1_epilogue", "fused"}}));
  EXPECT_NE(fused.find("the activation and its re-quantisation in GEMM1's epilogue wherever the "
                       "own kernel's token tiles run GEMM1 (option gemm1_epilogue)"),
            std::string::npos)
      << fused;
  const std::string own =
      describe(fp8_problem(), parse_options({{"gemm_tiles", "tokens_ffma192"}}));
  EXPECT_NE(own.find("token tiles 192x128, own kernel"), std::string::npos) << own;
  EXPECT_NE(own.find("(option gemm_tiles)"), std::string::npos) << own;
}

// Options that cannot serve the problem are config errors naming the option, before anything is
// uploaded.
TEST(DeepGemmOptions, RefusesOptionsTheProblemCannotTake) {
  moe_problem sinks = fp8_problem();
  sinks.sink_experts = 2;
  sinks.sink_intermediate = 256;
  moe_problem relu2 = fp8_problem();
  relu2.activation = MOE_ACTIVATION_RELU2;
  moe_problem narrow = fp8_problem();
  narrow.intermediate = 128;
  moe_problem many = fp8_problem();  // 1024 local experts and the shared one: 1025 groups
  many.experts = many.local_experts = 1024;
  many.shared_intermediate = 256;
  const std::tuple<moe_problem, Options, std::string> bad[] = {
      {sinks, {{"gemm_tiles", "tokens_ffma"}}, "gemm_tiles 'tokens_ffma' takes no sink experts"},
      {sinks, {{"gemm1_epilogue", "fused"}}, "gemm1_epilogue 'fused' needs"},
      {relu2, {{"gemm1_epilogue", "fused"}}, "a gated activation (not relu2)"},
      {fp8_problem(),
       {{"gemm1_epilogue", "fused"}, {"gemm_tiles", "tokens"}},
       "gemm_tiles auto, tokens_ffma or tokens_ffma192 (only the own kernel fuses it"},
      {fp8_problem(),
       {{"gemm1_epilogue", "fused"}, {"gemm_tiles", "tokens_ffma_split"}},
       "with a tile's whole K in one CTA"},
      {narrow,
       {{"gemm_tiles", "tokens_ffma_split"}},
       "needs hidden and intermediate of at least 256 (two K blocks to split), not 384 and 128"},
      {narrow,
       {{"gemm_tiles", "weights_ffma_split"}},
       "gemm_tiles 'weights_ffma_split' needs hidden and intermediate of at least 256"},
      {fp8_problem(),
       {{"gemm1_epilogue", "fused"}, {"gemm_tiles", "weights_ffma"}},
       "with a tile's whole K in one CTA"},
      {sinks, {{"gemm_tiles", "weights_ffma"}}, "gemm_tiles 'weights_ffma' takes no sink experts"},
      {many,
       {{"gemm_tiles", "tokens_ffma"}},
       "gemm_tiles 'tokens_ffma' runs at most 1024 groups (local experts, and the shared expert), "
       "not 1025"},
      {many, {{"gemm_tiles", "weights_ffma_split"}}, "runs at most 1024 groups"},
  };
  for (const auto& [problem, options, words] : bad) {
    try {
      check_options(problem, parse_options(options));
      ADD_FAILURE() << "accepted " << words;
    } catch (const moe::Error& e) {
      EXPECT_EQ(e.status(), MOE_STATUS_CONFIG_ERROR);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  }
  check_options(fp8_problem(), parse_options({{"gemm1_epilogue", "fused"}}));
  check_options(fp8_problem(),
                parse_options({{"gemm1_epilogue", "fused"}, {"gemm_tiles", "tokens_ffma192"}}));
  check_options(sinks, parse_options({{"gemm_tiles", "tokens"}}));
  check_options(sinks, parse_options({{"gemm1_epilogue", "auto"}}));
  check_options(relu2, parse_options({{"gemm1_epilogue", "separate"}}));
  check_options(many, parse_options({{"gemm_tiles", "tokens"}}));
  check_options(many, parse_options({{"gemm_tiles", "auto"}}));
  many.shared_intermediate = 0;  // 1024 groups: the own kernels' limit itself
  check_options(many, parse_options({{"gemm_tiles", "tokens_ffma"}}));
}

// Which GEMM1 writes the intermediate's codes: `fused` wherever the own kernel runs, `auto` on its
// 192-row tiles, and on its 128-row tiles from hidden 4096 and 32 rows an expert, with a gated
// activation and no sinks; never a CUTLASS tiling. (16 experts, top 4: T tokens give T / 4 rows
// an expert.)
TEST(DeepGemmOptions, FusesGemm1WhereTheOptionAndTheTilesSay) {
  const moe_problem p = fp8_problem();
  moe_problem relu2 = p;
  relu2.activation = MOE_ACTIVATION_RELU2;
  moe_problem sinks = p;
  sinks.sink_experts = 2;
  sinks.sink_intermediate = 256;
  const LayerOptions automatic = parse_options({});
  const LayerOptions fused = parse_options({{"gemm1_epilogue", "fused"}});
  const LayerOptions separate = parse_options({{"gemm1_epilogue", "separate"}});
  EXPECT_TRUE(fuses_gemm1(p, automatic, Fp8Tiles::kTokensFfma192, 512));
  EXPECT_FALSE(fuses_gemm1(p, automatic, Fp8Tiles::kTokensFfma, 512));
  // 128-row tiles fuse from hidden 4096 (K of 32 blocks: Mixtral, DeepSeek-V3), not below
  // (Qwen3), and from 32 rows an expert (decode keeps the activation kernel).
  moe_problem wide = p;
  wide.hidden = 4096;
  EXPECT_TRUE(fuses_gemm1(wide, automatic, Fp8Tiles::kTokensFfma, 128));
  EXPECT_FALSE(fuses_gemm1(wide, automatic, Fp8Tiles::kTokensFfma, 124));
  EXPECT_FALSE(fuses_gemm1(wide, automatic, Fp8Tiles::kTokensFfma, 1));
  EXPECT_TRUE(fuses_gemm1(wide, fused, Fp8Tiles::kTokensFfma, 1));
  wide.hidden = 2048;
  EXPECT_FALSE(fuses_gemm1(wide, automatic, Fp8Tiles::kTokensFfma, 512));
  wide.hidden = 7168;
  wide.activation = MOE_ACTIVATION_RELU2;
  EXPECT_FALSE(fuses_gemm1(wide, automatic, Fp8Tiles::kTokensFfma, 512));
  EXPECT_FALSE(fuses_gemm1(relu2, automatic, Fp8Tiles::kTokensFfma192, 512));
  EXPECT_FALSE(fuses_gemm1(sinks, automatic, Fp8Tiles::kTokensFfma192, 512));
  EXPECT_TRUE(fuses_gemm1(p, fused, Fp8Tiles::kTokensFfma, 8));
  EXPECT_TRUE(fuses_gemm1(p, fused, Fp8Tiles::kTokensFfma192, 512));
  EXPECT_FALSE(fuses_gemm1(p, separate, Fp8Tiles::kTokensFfma192, 512));
  for (const Fp8Tiles t : {Fp8Tiles::kTokens, Fp8Tiles::kTokensPaired, Fp8Tiles::kWeights,
                           Fp8Tiles::kTokensFfmaSplitK}) {
    EXPECT_FALSE(fuses_gemm1(p, automatic, t, 512));
    EXPECT_FALSE(fuses_gemm1(p, fused, t, 512));
  }
}

// The measured rule of gemm_tiles: auto (bench/NOTES.md sessions 26, 27 and 31) on the grid's
// shapes.
TEST(DeepGemmOptions, AutoTilesFollowTheRowsPerExpertAndInAll) {
  auto shape = [](int64_t experts, int64_t top_k) {
    moe_problem p = fp8_problem();
    p.experts = p.local_experts = experts;
    p.top_k = top_k;
    return p;
  };
  const moe_problem deepseek = shape(256, 8), mixtral = shape(8, 2), qwen3 = shape(128, 8);
  // Up to 8 rows an expert (decode): the own kernel with its operands swapped (session 33).
  for (const int64_t t : {1, 8, 64}) {
    EXPECT_EQ(auto_fp8_tiles(deepseek, t), Fp8Tiles::kWeightsFfma) << t;
    EXPECT_EQ(auto_fp8_tiles(qwen3, t), Fp8Tiles::kWeightsFfma) << t;
  }
  for (const int64_t t : {1, 8, 32}) EXPECT_EQ(auto_fp8_tiles(mixtral, t), Fp8Tiles::kWeightsFfma);
  EXPECT_EQ(auto_fp8_tiles(qwen3, 128), Fp8Tiles::kWeightsFfma);  // 8 rows an expert
  EXPECT_EQ(auto_fp8_tiles(qwen3, 144), Fp8Tiles::kTokensFfma);   // 9
  EXPECT_EQ(auto_fp8_tiles(mixtral, 36), Fp8Tiles::kTokensFfma);  // 9
  // Then up to 112 rows an expert, at most 4096 in all: its 128-row token tiles.
  EXPECT_EQ(auto_fp8_tiles(mixtral, 64), Fp8Tiles::kTokensFfma);
  EXPECT_EQ(auto_fp8_tiles(deepseek, 512), Fp8Tiles::kTokensFfma);
  EXPECT_EQ(auto_fp8_tiles(qwen3, 512), Fp8Tiles::kTokensFfma);
  // 113-176 rows an expert: 192-row tiles (Mixtral T=512: 128 an expert; T=704: 176).
  EXPECT_EQ(auto_fp8_tiles(mixtral, 512), Fp8Tiles::kTokensFfma192);
  EXPECT_EQ(auto_fp8_tiles(mixtral, 576), Fp8Tiles::kTokensFfma192);
  EXPECT_EQ(auto_fp8_tiles(mixtral, 704), Fp8Tiles::kTokensFfma192);
  // Past the own kernels' 1024 groups, CUTLASS's tiles at every batch (the own ones refused them
  // at run).
  const moe_problem many = shape(1025, 8);
  for (const int64_t t : {1, 8, 64, 512}) {
    const Fp8Tiles tiles = auto_fp8_tiles(many, t);
    EXPECT_TRUE(tiles == Fp8Tiles::kTokens || tiles == Fp8Tiles::kWeights) << t;
  }
  // Past 4096 rows in all, or 176 an expert: CUTLASS's token tiles.
  EXPECT_EQ(auto_fp8_tiles(mixtral, 708), Fp8Tiles::kTokens);
  EXPECT_EQ(auto_fp8_tiles(mixtral, 768), Fp8Tiles::kTokens);
  EXPECT_EQ(auto_fp8_tiles(deepseek, 4096), Fp8Tiles::kTokens);
  EXPECT_EQ(auto_fp8_tiles(qwen3, 4096), Fp8Tiles::kTokens);
  EXPECT_EQ(auto_fp8_tiles(mixtral, 1024), Fp8Tiles::kTokens);
  EXPECT_EQ(auto_fp8_tiles(mixtral, 4096), Fp8Tiles::kTokens);
  // The 192-row tiles start past 112 rows an expert (Mixtral: T=448 is 112, T=452 113).
  EXPECT_EQ(auto_fp8_tiles(mixtral, 448), Fp8Tiles::kTokensFfma);
  EXPECT_EQ(auto_fp8_tiles(mixtral, 452), Fp8Tiles::kTokensFfma192);
  // A shared expert is one more group of T rows: Mixtral T=640 then has 1920 rows over 9 groups,
  // 213 a group (CUTLASS's token tiles), T=512 170 (192-row tiles), T=256 85 (the own kernel's
  // 128-row tiles); DeepSeek-V3 T=512 4608 rows, past the own kernel's 4096 (CUTLASS's weight
  // tiles at 17 a group).
  moe_problem shared = shape(8, 2);
  shared.shared_intermediate = 256;
  EXPECT_EQ(auto_fp8_tiles(shared, 640), Fp8Tiles::kTokens);
  EXPECT_EQ(auto_fp8_tiles(shared, 512), Fp8Tiles::kTokensFfma192);
  EXPECT_EQ(auto_fp8_tiles(shared, 256), Fp8Tiles::kTokensFfma);
  shared = shape(256, 8);
  shared.shared_intermediate = 256;
  EXPECT_EQ(auto_fp8_tiles(shared, 512), Fp8Tiles::kWeights);
  // Expert parallelism counts the rank's rows: 32 of 256 experts at T=512 take 512 rows, at T=64
  // 64 (2 an expert).
  moe_problem ep = shape(256, 8);
  ep.ep_size = 8;
  ep.local_experts = 32;
  EXPECT_EQ(auto_fp8_tiles(ep, 512), Fp8Tiles::kTokensFfma);
  EXPECT_EQ(auto_fp8_tiles(ep, 64), Fp8Tiles::kWeightsFfma);
  // A shared expert's group holds every token: the swapped operands while T fits one 16-token
  // block (DeepSeek-V3 with its shared expert: T=16, not 17; Mixtral-like: T=16 is 3 rows a
  // group, T=32 10).
  moe_problem with_shared = shape(256, 8);
  with_shared.shared_intermediate = 2048;
  EXPECT_EQ(auto_fp8_tiles(with_shared, 16), Fp8Tiles::kWeightsFfma);
  EXPECT_EQ(auto_fp8_tiles(with_shared, 17), Fp8Tiles::kTokensFfma);
  with_shared = shape(8, 2);
  with_shared.shared_intermediate = 256;
  EXPECT_EQ(auto_fp8_tiles(with_shared, 16), Fp8Tiles::kWeightsFfma);
  EXPECT_EQ(auto_fp8_tiles(with_shared, 32), Fp8Tiles::kTokensFfma);
  // Sink experts keep CUTLASS (the own kernel runs every group of the permutation): 16 rows an
  // expert take its weight tiles, 128 its token tiles.
  moe_problem sinks = shape(256, 8);
  sinks.sink_experts = 2;
  sinks.sink_intermediate = 256;
  EXPECT_EQ(auto_fp8_tiles(sinks, 512), Fp8Tiles::kWeights);
  sinks = shape(8, 2);
  sinks.sink_experts = 2;
  sinks.sink_intermediate = 256;
  EXPECT_EQ(auto_fp8_tiles(sinks, 512), Fp8Tiles::kTokens);
}

// Split K where whole 128x128 tiles under even routing keep at most half of the SMs busy:
// Mixtral's GEMM2 at one token (two experts x 32 tiles = 64 of 132 SMs), not where they fill a
// round or more (measured slower there: bench/NOTES.md session 32).
TEST(DeepGemmOptions, SplitKWhereTheTilesLeaveHalfTheSmsIdle) {
  auto shape = [](int64_t experts, int64_t top_k, int64_t hidden, int64_t inter) {
    moe_problem p = fp8_problem();
    p.experts = p.local_experts = experts;
    p.top_k = top_k;
    p.hidden = hidden;
    p.intermediate = inter;
    return p;
  };
  const moe_problem mixtral = shape(8, 2, 4096, 14336), qwen3 = shape(128, 8, 2048, 768),
                    deepseek = shape(256, 8, 7168, 2048);
  EXPECT_TRUE(split_k_pays(mixtral, 1, 4096, 14336, 132));       // 2 x 32 tiles: 64 SMs
  EXPECT_FALSE(split_k_pays(mixtral, 1, 2 * 14336, 4096, 132));  // GEMM1: 2 x 224
  EXPECT_FALSE(split_k_pays(mixtral, 2, 4096, 14336, 132));      // 4 x 32: 128
  EXPECT_FALSE(split_k_pays(mixtral, 1, 4096, 14336, 127));      // 64 tiles on 127 SMs
  EXPECT_FALSE(split_k_pays(qwen3, 1, 2048, 768, 132));          // 8 x 16
  EXPECT_FALSE(split_k_pays(qwen3, 1, 2 * 768, 2048, 132));      // 8 x 12
  EXPECT_FALSE(split_k_pays(deepseek, 1, 7168, 2048, 132));      // 8 x 56
  EXPECT_FALSE(split_k_pays(mixtral, 0, 4096, 14336, 132));      // no rows
  EXPECT_FALSE(split_k_pays(mixtral, 1, 4096, 128, 132));        // one K block: nothing to split
  // One expert, one 128-row block: 8 tiles of N = 1024 on 132 SMs.
  EXPECT_TRUE(split_k_pays(shape(8, 1, 1024, 1024), 1, 1024, 1024, 132));
  // Rows past one block an expert count their blocks: 8 experts x 130 rows = 16 blocks x 4 tiles
  // (64 tiles: half of 132 SMs, all of 64).
  EXPECT_TRUE(split_k_pays(shape(8, 1, 512, 512), 1040, 512, 512, 132));
  EXPECT_FALSE(split_k_pays(shape(8, 1, 512, 512), 1040, 512, 512, 64));
}

}  // namespace
}  // namespace moe::deepgemm
