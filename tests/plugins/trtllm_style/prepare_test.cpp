// The whole trtllm_style chain: prepare then unprepare returns the canonical bytes for every
// format; the order of the steps; the tag and its description; refusals.
#include "prepare.hpp"

#include <tuple>

#include "layout_test_util.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/host_tensor.hpp"
#include "moe/sdk/problem.hpp"
#include "scale_swizzle.hpp"

namespace moe::trtllm {
namespace {

using testing::expect_error;
using testing::random_canonical;

void expect_same_bytes(const LayerTensors& a, const LayerTensors& b) {
  EXPECT_EQ(a.w13.bytes, b.w13.bytes) << "w13";
  EXPECT_EQ(a.w13_scale.bytes, b.w13_scale.bytes) << "w13_scale";
  EXPECT_EQ(a.w2.bytes, b.w2.bytes) << "w2";
  EXPECT_EQ(a.w2_scale.bytes, b.w2_scale.bytes) << "w2_scale";
  EXPECT_EQ(a.b13.bytes, b.b13.bytes) << "b13";
  EXPECT_EQ(a.b2.bytes, b.b2.bytes) << "b2";
}

// (format, gated, epilogue_tile_m, BlockMajorK, biases)
using ChainParam = std::tuple<moe_format, bool, int64_t, bool, bool>;

class PrepareChain : public ::testing::TestWithParam<ChainParam> {};

TEST_P(PrepareChain, UnprepareReturnsTheCanonicalBytes) {
  const auto [format, gated, tile_m, block_major, bias] = GetParam();
  // I off every alignment, except fp8_block gated, which needs whole 128-row scale blocks.
  const int64_t i = format == MOE_FORMAT_FP8_BLOCK ? (gated ? 128 : 200) : 40;
  const LayerShape shape{format, gated, 3, 96, i};
  const LayerTensors canonical = random_canonical(shape, bias, 1000 + uint32_t(format));
  PrepareOptions o;
  o.epilogue_tile_m = tile_m;
  o.block_major_k = block_major;
  o.block_k_bytes = 8;
  const PreparedLayer p = prepare(shape, canonical, o);
  EXPECT_GE(p.tag.padded_intermediate, i);
  EXPECT_NE(p.tensors.w13.bytes, canonical.w13.bytes);
  expect_same_bytes(unprepare(p), canonical);
}

std::string chain_name(const ::testing::TestParamInfo<ChainParam>& info) {
  const auto [format, gated, tile, block_major, bias] = info.param;
  return std::string(format_name(format)) + (gated ? "_gated" : "_relu2") + "_tile" +
         std::to_string(tile) + (block_major ? "_blockmajor" : "") + (bias ? "_bias" : "");
}

INSTANTIATE_TEST_SUITE_P(
    AllFormats, PrepareChain,
    ::testing::Combine(::testing::Values(MOE_FORMAT_BF16, MOE_FORMAT_FP8_TENSOR,
                                         MOE_FORMAT_FP8_BLOCK, MOE_FORMAT_MXFP8, MOE_FORMAT_MXFP4,
                                         MOE_FORMAT_NVFP4),
                       ::testing::Bool(), ::testing::Values(int64_t(128), int64_t(64)),
                       ::testing::Bool(), ::testing::Bool()),
    chain_name);

TEST(Prepare, DefaultBlockMajorKOf128BytesRoundTrips) {
  for (const LayerShape& shape : {LayerShape{MOE_FORMAT_BF16, true, 2, 64, 64},
                                  LayerShape{MOE_FORMAT_FP8_BLOCK, true, 2, 128, 128},
                                  LayerShape{MOE_FORMAT_NVFP4, true, 2, 256, 256}}) {
    const LayerTensors canonical = random_canonical(shape, false, 77);
    PrepareOptions o;
    o.block_major_k = true;
    const PreparedLayer p = prepare(shape, canonical, o);
    EXPECT_EQ(p.tag.block_k_bytes, 128);
    expect_same_bytes(unprepare(p), canonical);
  }
}

// bf16, gated, I = 16, H = 32, tile 128 (B = 32): w13 row r of the canonical layout holds r in
// every byte, so the prepared rows spell out the composed permutation w31 -> interleave ->
// shuffle: prepared row 8*b + a = interleaved row 4*a + b, interleaved row 2j = up_j,
// 2j+1 = gate_j.
TEST(Prepare, StepsComposeAsW31ThenInterleaveThenShuffle) {
  const LayerShape shape{MOE_FORMAT_BF16, true, 1, 32, 16};
  LayerTensors t = canonical_geometry(shape, 16);
  for (int64_t r = 0; r < 32; ++r)
    std::fill_n(t.w13.bytes.begin() + r * 64, 64, uint8_t(r));  // (1, 32, 32) bf16
  const PreparedLayer p = prepare(shape, t);
  const std::vector<int> expected{16, 18, 20, 22, 24, 26, 28, 30,   // up 0, 2, ..., 14
                                  0,  2,  4,  6,  8,  10, 12, 14,   // gate 0, 2, ..., 14
                                  17, 19, 21, 23, 25, 27, 29, 31,   // up 1, 3, ..., 15
                                  1,  3,  5,  7,  9,  11, 13, 15};  // gate 1, 3, ..., 15
  for (int64_t d = 0; d < 32; ++d) EXPECT_EQ(p.tensors.w13.bytes[d * 64], expected[d]) << d;
}

TEST(Prepare, Nvfp4ScalesFollowTheirRowsIntoThe128x4Layout) {
  const LayerShape shape{MOE_FORMAT_NVFP4, true, 1, 32, 16};  // w13 scales (32, 2)
  LayerTensors t = random_canonical(shape, false, 5);
  const PreparedLayer p = prepare(shape, t);
  ASSERT_EQ(p.tensors.w13_scale.shape.rows, 128);
  ASSERT_EQ(p.tensors.w13_scale.shape.cols, 4);
  const std::vector<int> source_row{16, 18, 20, 22, 24, 26, 28, 30, 0, 2};  // as above
  for (int64_t d = 0; d < int64_t(source_row.size()); ++d)
    for (int64_t c = 0; c < 2; ++c)
      EXPECT_EQ(p.tensors.w13_scale.bytes[swizzled_offset(d, c, 2)],
                t.w13_scale.bytes[source_row[d] * 2 + c]);
}

TEST(Prepare, TagRecordsTheChainAndDescribeExplainsIt) {
  const LayerShape shape{MOE_FORMAT_NVFP4, true, 2, 64, 40};
  PrepareOptions o;
  o.block_major_k = true;
  o.block_k_bytes = 8;
  const PreparedLayer p = prepare(shape, random_canonical(shape, true, 3), o);
  const LayoutTag& tag = p.tag;
  EXPECT_EQ(tag.padded_intermediate, 48);
  EXPECT_EQ(tag.pad_multiple, 16);
  EXPECT_TRUE(tag.w31);
  EXPECT_TRUE(tag.gated_interleave);
  EXPECT_EQ(tag.epilogue_tile_m, 128);
  EXPECT_EQ(tag.shuffle_block, 32);
  EXPECT_TRUE(tag.scales_swizzled);
  EXPECT_EQ(tag.block_k_bytes, 8);
  EXPECT_FALSE(tag.fp8_scale_floor);
  EXPECT_TRUE(tag.bias);

  const std::string d = describe(tag);
  using ::testing::HasSubstr;
  EXPECT_THAT(d, HasSubstr("nvfp4 gated, E=2 H=64 I=40"));
  EXPECT_THAT(d, HasSubstr("1. pad I 40 -> 48 (multiple of 16)"));
  EXPECT_THAT(d, HasSubstr("2. w31: w13 halves swapped, [gate; up] -> [up; gate]"));
  EXPECT_THAT(d, HasSubstr("3. gated interleave"));
  EXPECT_THAT(d, HasSubstr("[u0, g0, u1, g1, ...]"));
  EXPECT_THAT(d, HasSubstr("4. row shuffle for epilogue_tile_m=128: in blocks of 32 rows"));
  EXPECT_THAT(d, HasSubstr("5. scales 128x4 swizzled"));
  EXPECT_THAT(d, HasSubstr("6. weights BlockMajorK with 8-byte slabs"));
  EXPECT_THAT(d, HasSubstr("w13        [2, 96, 32] e2m1x2, BlockMajorK [2, 4, 96, 8]"));
  EXPECT_THAT(d, HasSubstr("w13_scale  [2, 128, 4] e4m3, 128x4 swizzled from [2, 96, 4]"));
  EXPECT_THAT(d, HasSubstr("w2_scale   [2, 128, 4] e4m3, 128x4 swizzled from [2, 64, 3]"));
  EXPECT_THAT(d, HasSubstr("b13"));
  EXPECT_EQ(d.back(), '\n');
}

TEST(Prepare, Fp8BlockSkipsInterleaveAndFloorsScalesWhichUnprepareKeeps) {
  const LayerShape shape{MOE_FORMAT_FP8_BLOCK, true, 1, 128, 128};  // w13 scales (2, 1)
  LayerTensors t = random_canonical(shape, false, 4);
  const float zero = 0.f, floor = 1e-10f;
  std::memcpy(t.w13_scale.bytes.data(), &zero, 4);  // gate block: a dead expert's scale
  const PreparedLayer p = prepare(shape, t);
  EXPECT_TRUE(p.tag.w31);
  EXPECT_FALSE(p.tag.gated_interleave);
  EXPECT_TRUE(p.tag.fp8_scale_floor);
  float v;
  std::memcpy(&v, p.tensors.w13_scale.bytes.data() + 4, 4);  // w31: gate block is now second
  EXPECT_EQ(v, floor);
  LayerTensors u = unprepare(p);
  std::memcpy(&v, u.w13_scale.bytes.data(), 4);
  EXPECT_EQ(v, floor);
  std::memcpy(u.w13_scale.bytes.data(), &zero, 4);
  expect_same_bytes(u, t);
  EXPECT_THAT(describe(p.tag), ::testing::HasSubstr("raised to 1e-10"));
}

TEST(Prepare, TakesCanonicalWeightsThroughTheAbiStruct) {
  moe_problem problem = default_problem();
  problem.format = MOE_FORMAT_NVFP4;
  problem.experts = 2;
  problem.hidden = 64;
  problem.intermediate = 32;
  normalize_problem(problem);
  const LayerShape shape = layer_shape(problem);
  EXPECT_EQ(shape.experts, 2);
  EXPECT_TRUE(shape.gated);
  LayerTensors t = random_canonical(shape, false, 8);
  float s2[2] = {1.f, 1.f};
  moe_weights w{};
  w.struct_size = sizeof(moe_weights);
  w.w13 = make_view(t.w13.bytes.data(), MOE_DTYPE_E2M1X2, {2, 64, 32});
  w.w13_scale = make_view(t.w13_scale.bytes.data(), MOE_DTYPE_E4M3, {2, 64, 4});
  w.w13_scale_2 = make_view(s2, MOE_DTYPE_F32, {2});
  w.w2 = make_view(t.w2.bytes.data(), MOE_DTYPE_E2M1X2, {2, 64, 16});
  w.w2_scale = make_view(t.w2_scale.bytes.data(), MOE_DTYPE_E4M3, {2, 64, 2});
  w.w2_scale_2 = make_view(s2, MOE_DTYPE_F32, {2});
  expect_same_bytes(unprepare(prepare(shape, w)), t);

  w.w2 = make_view(t.w2.bytes.data(), MOE_DTYPE_E2M1X2, {2, 64, 8});
  expect_error([&] { prepare(shape, w); }, MOE_STATUS_SHAPE_MISMATCH,
               {"w2", "[2, 64, 16]", "[2, 64, 8]"});
}

TEST(Prepare, HiddenNotAMultipleOfTheShuffleBlockIsRefusedNamingW2) {
  const LayerShape shape{MOE_FORMAT_BF16, true, 1, 48, 16};
  expect_error([&] { prepare(shape, random_canonical(shape, false, 1)); }, MOE_STATUS_UNSUPPORTED,
               {"w2: row shuffle (epilogue_tile_m=128): rows=48", "shuffle block 32"});
}

TEST(Prepare, KNotAMultipleOfTheBlockMajorSlabIsRefusedNamingW13) {
  const LayerShape shape{MOE_FORMAT_BF16, true, 1, 96, 64};
  PrepareOptions o;
  o.block_major_k = true;
  expect_error([&] { prepare(shape, random_canonical(shape, false, 1), o); },
               MOE_STATUS_UNSUPPORTED,
               {"w13: BlockMajorK: K=96 (192 bytes per row)", "block_k=64 (128 bytes)"});
  o.block_k_bytes = 3;
  expect_error([&] { prepare(shape, random_canonical(shape, false, 1), o); },
               MOE_STATUS_INVALID_ARGUMENT, {"block_k_bytes=3", "2-byte element"});
}

TEST(Prepare, Fp8BlockRefusesInterleaveAndHalvesThatSplitAScaleBlock) {
  const LayerShape shape{MOE_FORMAT_FP8_BLOCK, true, 1, 128, 128};
  PrepareOptions o;
  o.gated_interleave = true;
  expect_error([&] { prepare(shape, random_canonical(shape, false, 1), o); },
               MOE_STATUS_UNSUPPORTED, {"gated interleave of fp8_block"});

  const LayerShape small{MOE_FORMAT_FP8_BLOCK, true, 1, 128, 64};
  expect_error([&] { prepare(small, random_canonical(small, false, 1)); }, MOE_STATUS_UNSUPPORTED,
               {"I=64 to 128"});
  PrepareOptions keep;
  keep.pad_multiple = 16;  // no padding, but the w31 swap would still split a block
  expect_error([&] { prepare(small, random_canonical(small, false, 1), keep); },
               MOE_STATUS_UNSUPPORTED, {"w31 swap of fp8_block", "I=64, padded 64"});
  keep.w31 = false;  // halves untouched: fine
  const PreparedLayer p = prepare(small, random_canonical(small, false, 2), keep);
  expect_same_bytes(unprepare(p), random_canonical(small, false, 2));
}

TEST(Prepare, UnprepareRefusesTensorsOfTheWrongShape) {
  const LayerShape shape{MOE_FORMAT_MXFP4, true, 1, 64, 32};
  PreparedLayer p = prepare(shape, random_canonical(shape, false, 1));
  p.tensors.w13_scale.shape.rows = 64;  // as if never swizzled
  expect_error([&] { unprepare(p); }, MOE_STATUS_SHAPE_MISMATCH, {"w13_scale", "rows=128"});
}

// The library checks what the plugin checks before it: an element size is the format's (a
// hand-made view with elem_bytes 0 divided by it), a bias is (E, rows) of bf16 or f32,
// pad_multiple is not negative.
TEST(Prepare, RefusesHandMadeTensorsThePluginWouldNotPass) {
  const LayerShape shape{MOE_FORMAT_BF16, true, 3, 64, 32};
  LayerTensors t = random_canonical(shape, true, 5);
  PrepareOptions block_major;
  block_major.block_major_k = true;
  LayerView zero_size = view_of(t);
  zero_size.w13.shape.elem_bytes = 0;
  expect_error([&] { prepare(shape, zero_size, block_major); }, MOE_STATUS_SHAPE_MISMATCH,
               {"w13", "elem_bytes=2", "elem_bytes=0"});

  LayerView five_experts = view_of(t);
  five_experts.b13.shape.batch = 5;
  expect_error([&] { prepare(shape, five_experts); }, MOE_STATUS_SHAPE_MISMATCH,
               {"b13", "batch=3", "batch=5"});
  LayerView e4m3_bias = view_of(t);
  e4m3_bias.b2.dtype = MOE_DTYPE_E4M3;
  e4m3_bias.b2.shape.elem_bytes = 1;
  expect_error([&] { prepare(shape, e4m3_bias); }, MOE_STATUS_DTYPE_MISMATCH,
               {"b2", "bf16 or f32", "e4m3"});

  PrepareOptions negative;
  negative.pad_multiple = -16;
  expect_error([&] { prepare(shape, t, negative); }, MOE_STATUS_INVALID_ARGUMENT,
               {"pad_multiple=-16"});
}

// plan_layout (`moe describe`'s tag) refuses what prepare() refuses: no plan for a layer that
// cannot be prepared.
TEST(Prepare, PlanLayoutRefusesWhatPrepareRefuses) {
  const LayerShape shape{MOE_FORMAT_FP8_BLOCK, true, 1, 128, 192};
  expect_error([&] { plan_layout(shape, false); }, MOE_STATUS_UNSUPPORTED, {"I=192 to 256"});
  expect_error([&] { prepare(shape, random_canonical(shape, false, 1)); }, MOE_STATUS_UNSUPPORTED,
               {"I=192 to 256"});
}

}  // namespace
}  // namespace moe::trtllm
