// The weight-only GEMM's argument checks on any machine (they fail before any CUDA call): each
// misuse that would otherwise run and be silently wrong is refused, naming what is wrong.
#include <gtest/gtest.h>

#include <string>

#include "moe/sdk/error.hpp"
#include "moe_cuda/wo_gemm.hpp"

namespace moe::gpu {
namespace {

// A valid GEMM1-like call: 4 groups, gated, 2 weight tiles (128 intermediate columns), K = 256.
WoGemmArgs valid() {
  static const int64_t offsets[5] = {0, 3, 3, 9, 12};
  alignas(16) static uint16_t rows[16];
  alignas(16) static uint8_t chunks[16];
  alignas(16) static uint16_t out[16];
  static const float bias[4 * 256] = {};
  WoGemmArgs a;
  a.weights = WoWeights::kMxfp4;
  a.groups = 4;
  a.offsets = offsets;
  a.max_rows = 12;
  a.rows = rows;
  a.k = 256;
  a.chunks = chunks;
  a.n_tiles = 2;
  a.k_stages = 2;
  a.bias = bias;
  a.bias_groups = 4;
  a.bias_ld = 256;
  a.up_offset = 128;
  a.epilogue = WoEpilogue::kGated;
  a.out = out;
  a.out_ld = 128;
  a.out_cols = 128;
  a.sm_count = 132;
  return a;
}

// The same call on bf16 weight rows (tiles) instead of chunks.
WoGemmArgs valid_bf16() {
  alignas(16) static uint16_t tiles[16];
  WoGemmArgs a = valid();
  a.weights = WoWeights::kBf16;
  a.chunks = nullptr;
  a.weight_rows = tiles;
  return a;
}

template <class Edit>
void expect_refused(Edit edit, const std::string& words) {
  WoGemmArgs a = valid();
  edit(a);
  try {
    check_wo_gemm_operands(a);
    ADD_FAILURE() << "accepted: " << words;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(WoGemmArgs, AValidCallPassesAndEachMisuseIsNamed) {
  EXPECT_NO_THROW(check_wo_gemm_operands(valid()));
  expect_refused([](WoGemmArgs& a) { a.groups = 0; }, "groups=0");
  expect_refused([](WoGemmArgs& a) { a.k = 300; }, "k=300");
  expect_refused([](WoGemmArgs& a) { a.k = 250; }, "multiple of 8");
  expect_refused([](WoGemmArgs& a) { a.out_cols = 136; }, "out_cols=136");
  expect_refused([](WoGemmArgs& a) { a.out_ld = 120; }, "out_ld=120");
  expect_refused([](WoGemmArgs& a) { a.tokens_per_tile = 48; }, "tokens_per_tile=48");
  expect_refused([](WoGemmArgs& a) { a.tokens_per_tile = 256; }, "256: bf16 weights only");
  expect_refused([](WoGemmArgs& a) { a.tokens_per_tile = 160; }, "tokens_per_tile=160");
  expect_refused([](WoGemmArgs& a) { a.sm_count = 0; }, "sm_count=0");
  expect_refused([](WoGemmArgs& a) { a.weight_tile_rows = 192; }, "weight_tile_rows=192");
  expect_refused([](WoGemmArgs& a) { a.weight_tile_rows = 256; }, "256: bf16 weights only");
  expect_refused([](WoGemmArgs& a) { a.rows = reinterpret_cast<const uint16_t*>(1); },
                 "16-byte aligned");
  expect_refused(
      [](WoGemmArgs& a) {
        a.weights = WoWeights::kNvfp4;
        a.scale_2 = nullptr;
      },
      "nvfp4 weights need their per-expert scale_2");
  expect_refused([](WoGemmArgs& a) { a.up_offset = 0; }, "up_offset=0 past the 128 gate columns");
  expect_refused([](WoGemmArgs& a) { a.bias_groups = -1; }, "bias rows");
  expect_refused([](WoGemmArgs& a) { a.bias_ld = 200; }, "bias rows (200 wide");
  expect_refused([](WoGemmArgs& a) { a.chunks = nullptr; }, "mxfp4 chunks must be non-null");
  expect_refused([](WoGemmArgs& a) { a.skip_begin = 2, a.skip_end = 1; }, "skipped groups [2, 1)");
  expect_refused([](WoGemmArgs& a) { a.skip_begin = -1; }, "skipped groups [-1, 0)");
  expect_refused([](WoGemmArgs& a) { a.skip_end = a.groups + 1; }, "must lie in [0,");
  WoGemmArgs skips = valid();
  skips.skip_begin = 0;
  skips.skip_end = skips.groups;  // every group skipped: a launch with nothing to do
  EXPECT_NO_THROW(check_wo_gemm_operands(skips));
}

// bf16 weights come as tile rows, not chunks: those rows are required, chunks are not read.
TEST(WoGemmArgs, Bf16TakesWeightRowsNotChunks) {
  alignas(16) static uint16_t tiles[16];
  EXPECT_NO_THROW(check_wo_gemm_operands(valid_bf16()));
  expect_refused(
      [](WoGemmArgs& b) {
        b.weights = WoWeights::kBf16;
        b.chunks = nullptr;
      },
      "bf16 weight rows must be non-null");
  expect_refused(
      [](WoGemmArgs& b) {
        b.weights = WoWeights::kBf16;
        b.weight_rows = reinterpret_cast<const uint16_t*>(tiles + 1);
      },
      "bf16 weight rows must be non-null and 16-byte aligned");
  expect_refused(
      [](WoGemmArgs& b) {
        b.weights = WoWeights::kBf16;
        b.chunks = nullptr;
        b.weight_rows = tiles;
        b.n_tiles = 1 << 22;  // 4 groups x 2^22 tiles x 128 rows = 2^31
        b.up_offset = int64_t(1) << 28;
        b.bias = nullptr;
      },
      "pass 2^31 rows");
}

// TensorRT-LLM's interleaved rows read in place (bf16 and e4m3 only): whole 16-row blocks of a
// group within its tiles, rows at least k long in 16-byte pieces, no tall tiles, and a gated bias
// as interleaved as the rows (column c's up value at 2c: up_offset 0).
TEST(WoGemmArgs, InterleavedRowsAreReadInPlaceOnlyWhereTheyFit) {
  alignas(16) static uint16_t rows[16];
  auto in_place = [](WoGemmArgs& a) {
    a.weights = WoWeights::kBf16;
    a.chunks = nullptr;
    a.weight_rows = rows;
    a.weight_order = WoWeightRows::kInterleaved;
    a.weight_group_rows = 256;  // 2 tiles of 64 gated columns
    a.weight_ld = 256;
    a.up_offset = 0;
  };
  WoGemmArgs a = valid();
  in_place(a);
  EXPECT_NO_THROW(check_wo_gemm_operands(a));
  a.weight_group_rows = 240;  // the last tile's rows past 240 are the next group's,
  a.out_cols = 120;           // whose columns are not stored
  EXPECT_NO_THROW(check_wo_gemm_operands(a));
  expect_refused(
      [&](WoGemmArgs& b) {
        in_place(b);
        b.weight_group_rows = 240;
      },
      "out_cols=128 past the 120 columns of a group's 240 interleaved rows");
  expect_refused(
      [&](WoGemmArgs& b) {
        in_place(b);
        b.weights = WoWeights::kMxfp4;
        b.chunks = reinterpret_cast<const uint8_t*>(rows);
      },
      "interleaved rows are bf16 or e4m3 weights, not mxfp4");
  expect_refused(
      [&](WoGemmArgs& b) {
        in_place(b);
        b.weight_group_rows = 248;
      },
      "weight_group_rows=248");
  expect_refused(
      [&](WoGemmArgs& b) {
        in_place(b);
        b.weight_group_rows = 384;
      },
      "weight_group_rows=384");
  expect_refused(
      [&](WoGemmArgs& b) {
        in_place(b);
        b.weight_ld = 128;
      },
      "weight_ld=128 must be at least k=256");
  expect_refused(
      [&](WoGemmArgs& b) {
        in_place(b);
        b.weight_ld = 260;
      },
      "weight_ld=260");
  expect_refused(
      [&](WoGemmArgs& b) {
        in_place(b);
        b.weight_tile_rows = 256;
      },
      "tall tiles (weight_tile_rows=256)");
  expect_refused(
      [&](WoGemmArgs& b) {
        in_place(b);
        b.up_offset = 128;
      },
      "up_offset must be 0, not 128");
  expect_refused(
      [&](WoGemmArgs& b) {
        in_place(b);
        b.bias_ld = 192;
      },
      "the bias rows (192 wide");
}

// e4m3 (fp8_tensor) takes weight rows like bf16, needs its weight and activation scales, may write
// f32 (and its amax) or e4m3 codes (with their scale), and needs K in whole 16-byte rows; f32 and
// e4m3 outputs and activation scales are e4m3's only, and the amax is the f32 output's.
TEST(WoGemmArgs, E4m3TakesWeightRowsScalesAndMayWriteF32) {
  alignas(16) static uint8_t tiles[16];
  alignas(16) static float out_f32[16];
  static const float scales[4] = {1, 1, 1, 1}, act = 1;
  auto e4m3 = [&](WoGemmArgs& a) {
    a.weights = WoWeights::kE4m3;
    a.chunks = nullptr;
    a.weight_rows = tiles;
    a.scale_2 = scales;
    a.act_scale = &act;
  };
  WoGemmArgs a = valid();
  e4m3(a);
  EXPECT_NO_THROW(check_wo_gemm_operands(a));
  a.out = nullptr;
  a.out_f32 = out_f32;
  EXPECT_NO_THROW(check_wo_gemm_operands(a));
  static uint32_t amax[2];
  a.out_amax = amax;  // the f32 output's amax
  EXPECT_NO_THROW(check_wo_gemm_operands(a));
  expect_refused(
      [&](WoGemmArgs& b) {
        e4m3(b);
        b.weight_rows = nullptr;
      },
      "e4m3 weight rows must be non-null");
  expect_refused(
      [&](WoGemmArgs& b) {
        e4m3(b);
        b.act_scale = nullptr;
      },
      "e4m3 weights need their weight scales (scale_2) and the activation scale");
  expect_refused(
      [&](WoGemmArgs& b) {
        e4m3(b);
        b.scale_2 = nullptr;
      },
      "e4m3 weights need their weight scales");
  expect_refused(
      [&](WoGemmArgs& b) {
        e4m3(b);
        b.k = 248;
      },
      "e4m3 rows of k=248 must be a multiple of 16");
  expect_refused(
      [&](WoGemmArgs& b) {
        e4m3(b);
        b.out_f32 = out_f32;
      },
      "one of out, out_f32 and out_e4m3");
  expect_refused(
      [&](WoGemmArgs& b) {
        e4m3(b);
        b.out = nullptr;
      },
      "one of out, out_f32 and out_e4m3");
  expect_refused(
      [&](WoGemmArgs& b) {
        b.out = nullptr;
        b.out_f32 = out_f32;
      },
      "f32 and e4m3 outputs are for e4m3 weights, not mxfp4");
  expect_refused(
      [&](WoGemmArgs& b) {
        e4m3(b);
        static uint32_t amax[2];
        b.out_amax = amax;
      },
      "out_amax is the amax of the f32 output (out_f32), which is not given");
  // e4m3 codes out (a static-scale GEMM1): with their scale, instead of the other outputs.
  alignas(16) static uint8_t codes[16];
  a.out_f32 = nullptr;
  a.out_amax = nullptr;
  a.out_e4m3 = codes;
  a.out_e4m3_scale = &act;
  EXPECT_NO_THROW(check_wo_gemm_operands(a));
  expect_refused(
      [&](WoGemmArgs& b) {
        e4m3(b);
        b.out = nullptr;
        b.out_e4m3 = codes;
      },
      "e4m3 output (out_e4m3) needs its scale (out_e4m3_scale)");
  expect_refused(
      [&](WoGemmArgs& b) {
        e4m3(b);
        b.out_e4m3_scale = &act;
      },
      "out_e4m3_scale is the scale of the e4m3 output (out_e4m3), which is not given");
  expect_refused(
      [&](WoGemmArgs& b) {
        e4m3(b);
        b.out_e4m3 = codes;
        b.out_e4m3_scale = &act;
      },
      "one of out, out_f32 and out_e4m3");
  expect_refused(
      [&](WoGemmArgs& b) {
        b.out = nullptr;
        b.out_e4m3 = codes;
        b.out_e4m3_scale = &act;
      },
      "f32 and e4m3 outputs are for e4m3 weights, not mxfp4");
  expect_refused([&](WoGemmArgs& b) { b.act_scale = &act; },
                 "activation scales are for e4m3 rows, not mxfp4");
  expect_refused(
      [&](WoGemmArgs& b) {
        e4m3(b);
        b.shared_group = 4;
      },
      "shared_group=4 must be a group of the 4");
  expect_refused(
      [&](WoGemmArgs& b) {
        e4m3(b);
        b.act_scale_shared = &act;
      },
      "act_scale_shared needs one");
  expect_refused(
      [&](WoGemmArgs& b) {
        e4m3(b);
        b.tokens_per_tile = 256;
      },
      "256: bf16 weights only");
}

// Tall tiles only where asked, for bf16, 64- or 128-token tiles and weight tiles in pairs.
TEST(WoGemmArgs, TallTilesFollowTheTiles) {
  WoGemmArgs a = valid();  // mxfp4, 2 weight tiles
  a.weight_tile_rows = 256;
  EXPECT_FALSE(wo_tall_tiles(a, 128));  // not bf16
  a.weights = WoWeights::kBf16;
  EXPECT_TRUE(wo_tall_tiles(a, 128));
  EXPECT_TRUE(wo_tall_tiles(a, 64));
  EXPECT_FALSE(wo_tall_tiles(a, 32));
  EXPECT_FALSE(wo_tall_tiles(a, 256));
  a.n_tiles = 3;
  EXPECT_FALSE(wo_tall_tiles(a, 128));
  a.n_tiles = 4;
  a.weight_tile_rows = 0;
  EXPECT_FALSE(wo_tall_tiles(a, 128));
}

// Narrow last blocks: bf16 weights only; a short last block takes the narrowest of 16, 32, 64
// and 128 tokens under the tile width that holds it (in pairs at least 32), else the full width.
TEST(WoGemmArgs, NarrowLastBlocksAreBf16sAndTakeTheNarrowestWidth) {
  WoGemmArgs a = valid_bf16();
  a.narrow_last_blocks = true;
  EXPECT_NO_THROW(check_wo_gemm_operands(a));
  expect_refused([](WoGemmArgs& b) { b.narrow_last_blocks = true; },
                 "narrow last blocks are for bf16 weights, not mxfp4");
  struct Case {
    int count, tile, n_tiles;  // n_tiles even: the launch pairs CTAs from 64 tokens a tile
    int width;
  };
  for (const Case& c :
       {Case{1, 256, 3, 16}, Case{16, 256, 3, 16}, Case{17, 256, 3, 32}, Case{33, 256, 3, 64},
        Case{64, 256, 3, 64}, Case{65, 256, 3, 128}, Case{128, 256, 3, 128}, Case{129, 256, 3, 256},
        Case{256, 256, 3, 256}, Case{1, 256, 2, 32}, Case{32, 256, 2, 32}, Case{33, 256, 2, 64},
        Case{100, 256, 2, 128}, Case{200, 256, 2, 256}, Case{100, 192, 3, 128},
        Case{129, 192, 2, 192}, Case{20, 128, 4, 32}, Case{64, 128, 4, 64}, Case{65, 128, 3, 128},
        Case{40, 96, 2, 64}, Case{65, 96, 3, 96}, Case{32, 64, 2, 32}, Case{33, 64, 2, 64},
        Case{9, 64, 3, 16},
        // 16- and 32-token tiles never pair: 16 rows or fewer take 16 whatever n_tiles is
        Case{9, 32, 2, 16}, Case{17, 32, 2, 32}, Case{3, 16, 2, 16}})
    EXPECT_EQ(wo_narrow_width(c.count, c.tile, c.n_tiles), c.width)
        << c.count << " rows of a " << c.tile << "-token tile, " << c.n_tiles << " weight tiles";
}

TEST(WoGemmArgs, ChunkSizesAndNames) {
  EXPECT_EQ(wo_chunk_bytes(WoWeights::kMxfp4), 8704);
  EXPECT_EQ(wo_chunk_bytes(WoWeights::kNvfp4), 9216);
  EXPECT_EQ(wo_chunk_bytes(WoWeights::kMxfp8), 16896);
  EXPECT_EQ(wo_chunk_bytes(WoWeights::kBf16), 128 * 128 * 2);
  EXPECT_EQ(wo_chunk_bytes(WoWeights::kE4m3), 128 * 128);
  EXPECT_STREQ(wo_weights_name(WoWeights::kE4m3), "e4m3");
  EXPECT_STREQ(wo_weights_name(WoWeights::kMxfp8), "mxfp8");
  EXPECT_STREQ(wo_weights_name(WoWeights::kBf16), "bf16");
}

// The auto token tile picks what the A/B runs picked (bench/NOTES.md sessions 18-22), by rows an
// expert on average; `rows` below is that times 128 groups.
TEST(WoGemmArgs, AutoTokenTileFollowsTheMeasurements) {
  auto tile = [](int64_t average, WoWeights w, int64_t hidden = 2048) {
    return wo_tokens_per_tile(average * 128, 128, w, hidden);
  };
  for (WoWeights w : {WoWeights::kMxfp4, WoWeights::kNvfp4, WoWeights::kMxfp8}) {
    SCOPED_TRACE(wo_weights_name(w));
    EXPECT_EQ(tile(8, w), 16);
    EXPECT_EQ(tile(16, w), 32);
    EXPECT_EQ(tile(32, w), 64);
    EXPECT_EQ(tile(48, w), 64);
    EXPECT_EQ(tile(64, w), 96);
    EXPECT_EQ(tile(80, w), 96);
    EXPECT_EQ(tile(96, w), 128);
    EXPECT_EQ(tile(112, w), 128);
    EXPECT_EQ(tile(128, w), 192);
    EXPECT_EQ(tile(256, w), 128);  // two 128-token blocks fit where 192 takes two with room
    EXPECT_EQ(tile(1024, w), 192);
    EXPECT_EQ(tile(4096, w), 192);
    EXPECT_EQ(tile(128, w, 7168), 128);  // past hidden 4096: no 192
    EXPECT_EQ(tile(160, w, 7168), 128);  // 3% ahead of 96 (mxfp4)
    EXPECT_EQ(tile(256, w, 7168), 128);
    EXPECT_EQ(tile(512, w, 7168), 192);  // 8% ahead of 128 (mxfp8)
    EXPECT_EQ(tile(4096, w, 7168), 192);
  }
  EXPECT_EQ(wo_tokens_per_tile(1, 1, WoWeights::kMxfp4, 2048), 16);
  EXPECT_EQ(wo_tokens_per_tile(0, 0, WoWeights::kMxfp4, 2048), 16);  // no groups
  EXPECT_EQ(wo_tokens_per_tile(0, 128, WoWeights::kMxfp8, 2048), 16);
  // bf16: 96 ties 128 at 64 rows (0.395 vs 0.401 ms, Qwen3), 192 at 128; 256 past 512.
  EXPECT_EQ(tile(32, WoWeights::kBf16), 64);
  EXPECT_EQ(tile(64, WoWeights::kBf16), 96);
  EXPECT_EQ(tile(128, WoWeights::kBf16), 192);
  EXPECT_EQ(tile(512, WoWeights::kBf16), 192);
  EXPECT_EQ(tile(513, WoWeights::kBf16), 256);
  EXPECT_EQ(tile(16384, WoWeights::kBf16, 7168), 256);
  // e4m3 (session 23's A/Bs): never past 192 (promoted accumulators); 192 at 128 rows an
  // expert (5% ahead of 128, Mixtral T=512), 128 at 256 (13% ahead of 192, Qwen3 T=4096).
  for (int64_t average : {8, 64, 128, 513, 4096, 16384})
    EXPECT_LE(tile(average, WoWeights::kE4m3), 192) << average;
  EXPECT_EQ(tile(8, WoWeights::kE4m3), 16);
  EXPECT_EQ(tile(32, WoWeights::kE4m3), 64);
  EXPECT_EQ(tile(128, WoWeights::kE4m3), 192);
  EXPECT_EQ(tile(256, WoWeights::kE4m3), 128);
  EXPECT_EQ(tile(4096, WoWeights::kE4m3), 192);
  // Tall tiles (bf16 weight_tile 256) pair with 64 and 128 tokens: 96 and 192 are left out.
  EXPECT_EQ(wo_tokens_per_tile(64 * 128, 128, WoWeights::kBf16, 4096, true), 128);
  EXPECT_EQ(wo_tokens_per_tile(128 * 128, 128, WoWeights::kBf16, 4096, true), 128);
  EXPECT_EQ(wo_tokens_per_tile(32 * 128, 128, WoWeights::kBf16, 4096, true), 64);
}

// The words moe describe shows are the rule's own picks.
TEST(WoGemmArgs, TokenTileRuleInWords) {
  const std::string head = "tokens a tile by the batch's rows an expert on average: ";
  const std::string tail = ", then the tile of least expected cost (token blocks x weight streams)";
  EXPECT_EQ(wo_token_tile_rule(WoWeights::kMxfp8, 4096),
            head + "16 up to 10, 32 up to 23, 64 up to 58, 96 up to 86, 128 up to 121, 192 up to " +
                "193, 128 up to 259, 192 to 512" + tail);
  EXPECT_EQ(wo_token_tile_rule(WoWeights::kNvfp4, 7168),
            head + "16 up to 13, 32 up to 26, 64 up to 58, 96 up to 86, 128 up to 259, 192 to 512" +
                tail);
  EXPECT_EQ(wo_token_tile_rule(WoWeights::kBf16, 7168),
            head +
                "16 up to 10, 32 up to 23, 64 up to 50, 96 up to 79, 128 up to 256, 192 to 512, " +
                "256 above");
  EXPECT_EQ(wo_token_tile_rule(WoWeights::kBf16, 2048),
            head + "16 up to 10, 32 up to 23, 64 up to 50, 96 up to 79, 128 up to 119, 192 up to " +
                "197, 128 up to 252, 192 to 512, 256 above");
}

}  // namespace
}  // namespace moe::gpu
