// prepare()'s one-pass gather against its definition, the steps run one by one
// (prepare_step_by_step): byte-identical for every format, gated and not, padded or not, with and
// without biases, every row order, swizzle and BlockMajorK on and off; and the copies it makes:
// each prepared tensor allocated once, nothing else, so a layer costs one host copy.
#include <fmt/format.h>

#include <tuple>

#include "gather.hpp"
#include "layout_test_util.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/host_tensor.hpp"
#include "moe/sdk/problem.hpp"
#include "prepare.hpp"
#include "prepare_steps.hpp"

namespace moe::trtllm {
namespace {

using testing::random_canonical;

void expect_same_tensor(const LayoutTensor& a, const LayoutTensor& b, const char* name) {
  EXPECT_EQ(a.dtype, b.dtype) << name;
  EXPECT_EQ(to_string(a.shape), to_string(b.shape)) << name;
  EXPECT_TRUE(a.bytes == b.bytes) << name << ": bytes differ";
}

void expect_same_tensors(const LayerTensors& a, const LayerTensors& b) {
  expect_same_tensor(a.w13, b.w13, "w13");
  expect_same_tensor(a.w13_scale, b.w13_scale, "w13_scale");
  expect_same_tensor(a.w2, b.w2, "w2");
  expect_same_tensor(a.w2_scale, b.w2_scale, "w2_scale");
  expect_same_tensor(a.b13, b.b13, "b13");
  expect_same_tensor(a.b2, b.b2, "b2");
}

void expect_same_layer(const PreparedLayer& a, const PreparedLayer& b) {
  EXPECT_EQ(describe(a.tag), describe(b.tag));
  EXPECT_EQ(a.tag.padded_intermediate, b.tag.padded_intermediate);
  EXPECT_EQ(a.tag.shuffle_block, b.tag.shuffle_block);
  expect_same_tensors(a.tensors, b.tensors);
}

// Prepares with the allocator poisoning new buffers, so a byte the gather fails to write differs
// from the step functions' (which zero or fully write theirs).
PreparedLayer prepare_poisoned(const LayerShape& s, const LayerTensors& t,
                               const PrepareOptions& o) {
  poison_new_bytes(true);
  PreparedLayer p = prepare(s, t, o);
  poison_new_bytes(false);
  return p;
}

// The canonical tensors as the ABI passes them (views, no copy).
moe_weights weights_of(LayerTensors& t, const LayerShape& s) {
  auto view = [&](LayoutTensor& x, bool scalar) {
    if (!x.present()) return moe_tensor{};
    const MatrixStack& m = x.shape;
    if (scalar) return make_view(x.bytes.data(), x.dtype, {m.batch});
    return make_view(x.bytes.data(), x.dtype, {m.batch, m.rows, m.cols});
  };
  const bool scalar = s.format == MOE_FORMAT_FP8_TENSOR;
  moe_weights w{};
  w.struct_size = sizeof(moe_weights);
  w.w13 = view(t.w13, false);
  w.w13_scale = view(t.w13_scale, scalar);
  w.w2 = view(t.w2, false);
  w.w2_scale = view(t.w2_scale, scalar);
  if (t.b13.present())
    w.b13 = make_view(t.b13.bytes.data(), t.b13.dtype, {s.experts, t.b13.shape.rows});
  if (t.b2.present()) w.b2 = make_view(t.b2.bytes.data(), t.b2.dtype, {s.experts, s.hidden});
  return w;
}

// (format, gated, epilogue_tile_m, BlockMajorK, biases, swizzle, padded)
using GatherParam = std::tuple<moe_format, bool, int64_t, bool, bool, bool, bool>;

struct Case {
  LayerShape shape;
  PrepareOptions options;
};

// H = 96: a whole number of shuffle blocks but not of 128 (partial fp8_block and 4-col scale
// tiles). `padded`: I off the alignment (fp8_block gated: padded 128 -> 256 by pad_multiple).
// BlockMajorK slabs of 32 bytes (16 for 1-byte, 8 for fp4) do not divide I's bytes, so a slab of
// w2 holds the end of the canonical row and the start of its zero padding.
Case make_case(const GatherParam& param) {
  const auto& [format, gated, tile, block_major, bias, swizzle, padded] = param;
  Case c{{format, gated, 3, 96, 0}, {}};
  if (format == MOE_FORMAT_FP8_BLOCK) {
    c.shape.intermediate = gated ? 128 : (padded ? 200 : 256);
    if (gated && padded) c.options.pad_multiple = 256;
  } else {
    c.shape.intermediate = padded ? 40 : (gated ? 64 : 128);
  }
  c.options.epilogue_tile_m = tile;
  c.options.block_major_k = block_major;
  c.options.block_k_bytes = format == MOE_FORMAT_BF16 ? 32 : is_fp4(format) ? 8 : 16;
  c.options.swizzle_scales = swizzle;
  return c;
}

class PrepareGather : public ::testing::TestWithParam<GatherParam> {};

TEST_P(PrepareGather, MatchesTheStepByStepPipelineByteForByte) {
  const auto [format, gated, tile, block_major, bias, swizzle, padded] = GetParam();
  const Case c = make_case(GetParam());
  LayerTensors canonical = random_canonical(c.shape, bias, 2000 + uint32_t(format));
  const PreparedLayer fused = prepare_poisoned(c.shape, canonical, c.options);
  const PreparedLayer steps = prepare_step_by_step(c.shape, canonical, c.options);
  EXPECT_EQ(fused.tag.padded_intermediate > c.shape.intermediate, padded);
  expect_same_layer(fused, steps);
  expect_same_tensors(unprepare(fused), canonical);
  // The ABI path reads the same bytes in place.
  expect_same_layer(prepare(c.shape, weights_of(canonical, c.shape), c.options), steps);
}

std::string gather_name(const ::testing::TestParamInfo<GatherParam>& info) {
  const auto [format, gated, tile, block_major, bias, swizzle, padded] = info.param;
  return std::string(format_name(format)) + (gated ? "_gated" : "_relu2") + "_tile" +
         std::to_string(tile) + (block_major ? "_blockmajor" : "") + (bias ? "_bias" : "") +
         (swizzle ? "" : "_noswizzle") + (padded ? "_padded" : "");
}

INSTANTIATE_TEST_SUITE_P(
    AllFormats, PrepareGather,
    ::testing::Combine(::testing::Values(MOE_FORMAT_BF16, MOE_FORMAT_FP8_TENSOR,
                                         MOE_FORMAT_FP8_BLOCK, MOE_FORMAT_MXFP8, MOE_FORMAT_MXFP4,
                                         MOE_FORMAT_NVFP4),
                       ::testing::Bool(), ::testing::Values(int64_t(0), int64_t(64), int64_t(128)),
                       ::testing::Bool(), ::testing::Bool(), ::testing::Bool(), ::testing::Bool()),
    gather_name);

// The w31 swap and the gated interleave each on and off (DeviceLayer's bf16 layout is w31 +
// interleave without the shuffle), for a format without scales, with per-row scales, and with
// 128-row scale blocks (which cannot be interleaved).
TEST(PrepareGather, EveryRowOrderOptionMatchesTheSteps) {
  for (const moe_format f : {MOE_FORMAT_BF16, MOE_FORMAT_NVFP4, MOE_FORMAT_FP8_BLOCK}) {
    const bool fp8b = f == MOE_FORMAT_FP8_BLOCK;
    const LayerShape shape{f, true, 2, 64, fp8b ? 128 : 24};
    const LayerTensors canonical = random_canonical(shape, !fp8b, 31);
    for (const bool w31 : {false, true})
      for (const bool interleave : {false, true})
        for (const int64_t tile : {int64_t(0), int64_t(128)}) {
          if (fp8b && interleave) continue;
          PrepareOptions o;
          o.w31 = w31;
          o.gated_interleave = interleave;
          o.epilogue_tile_m = tile;
          SCOPED_TRACE(fmt::format("{} w31={} interleave={} tile={}", format_name(f), w31,
                                   interleave, tile));
          expect_same_layer(prepare_poisoned(shape, canonical, o),
                            prepare_step_by_step(shape, canonical, o));
        }
  }
}

// Matrices split across several tasks (rows [r0, r1) with r0 > 0, per-task zeroing of swizzled
// tiles): tasks shrunk to one 128-row tile, matrices of 320 and 384 rows.
TEST(PrepareGather, MatricesSplitAcrossTasksMatchTheSteps) {
  const int64_t previous = set_gather_task_bytes(1);
  for (const moe_format f : {MOE_FORMAT_BF16, MOE_FORMAT_FP8_TENSOR, MOE_FORMAT_FP8_BLOCK,
                             MOE_FORMAT_MXFP8, MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4}) {
    const bool fp8b = f == MOE_FORMAT_FP8_BLOCK;
    const LayerShape shape{f, true, 2, 384, fp8b ? 256 : 160};
    const LayerTensors canonical = random_canonical(shape, true, 53);
    for (const bool block_major : {false, true}) {
      PrepareOptions o;
      o.epilogue_tile_m = 128;
      o.block_major_k = block_major;
      o.block_k_bytes = f == MOE_FORMAT_BF16 ? 32 : is_fp4(f) ? 8 : 16;
      SCOPED_TRACE(fmt::format("{} block_major={}", format_name(f), block_major));
      const PreparedLayer fused = prepare_poisoned(shape, canonical, o);
      expect_same_layer(fused, prepare_step_by_step(shape, canonical, o));
      expect_same_tensors(unprepare(fused), canonical);
    }
  }
  set_gather_task_bytes(previous);
}

TEST(PrepareGather, Fp8BlockScaleFloorMatchesTheSteps) {
  const LayerShape shape{MOE_FORMAT_FP8_BLOCK, true, 2, 256, 128};
  LayerTensors t = random_canonical(shape, false, 41);
  const float zero = 0.f, negative = -1.f;
  std::memcpy(t.w13_scale.bytes.data(), &zero, 4);
  std::memcpy(t.w2_scale.bytes.data() + 4, &negative, 4);
  expect_same_layer(prepare_poisoned(shape, t, {}), prepare_step_by_step(shape, t, {}));
}

int64_t bytes_of(const LayerTensors& t) {
  int64_t n = 0;
  for (const LayoutTensor* x : {&t.w13, &t.w13_scale, &t.w2, &t.w2_scale, &t.b13, &t.b2})
    n += int64_t(x->bytes.size());
  return n;
}

// What prepare(shape, w) allocated while it ran, and its high-water mark above what was live.
struct Cost {
  int64_t allocated = 0, peak = 0, prepared = 0;
};
template <class Fn>
Cost measure(Fn&& fn) {
  reset_byte_peak();
  const ByteCounts before = byte_counts();
  const PreparedLayer p = fn();
  const ByteCounts after = byte_counts();
  return {after.allocated - before.allocated, after.peak - before.live, bytes_of(p.tensors)};
}

// The contract: preparing a layer writes at most 2 copies of its weights on the host (this
// implementation: exactly 1, the prepared tensors themselves; the caller's canonical bytes are
// read in place). The step-by-step pipeline, measured the same way, shows the counter sees the
// copies that the one-pass gather avoids.
TEST(PrepareCopies, OneHostCopyOfTheLayerFromTheAbiStruct) {
  PrepareOptions device_layer;  // DeviceLayer's bf16 layout: w31 + interleave, no shuffle
  device_layer.epilogue_tile_m = 0;
  PrepareOptions full;  // every step that applies
  full.block_major_k = true;
  full.block_k_bytes = 16;
  for (const moe_format f : {MOE_FORMAT_BF16, MOE_FORMAT_FP8_TENSOR, MOE_FORMAT_FP8_BLOCK,
                             MOE_FORMAT_MXFP8, MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4})
    for (const PrepareOptions& o : {device_layer, full}) {
      const LayerShape shape{f, true, 8, 256, f == MOE_FORMAT_FP8_BLOCK ? 256 : 184};
      LayerTensors canonical = random_canonical(shape, true, 51);
      const moe_weights w = weights_of(canonical, shape);
      SCOPED_TRACE(fmt::format("{} tile={}", format_name(f), o.epilogue_tile_m));
      const Cost one = measure([&] { return prepare(shape, w, o); });
      EXPECT_GT(one.prepared, 0);
      EXPECT_EQ(one.allocated, one.prepared) << "prepare allocated more than its result";
      EXPECT_LE(one.peak, one.prepared);
      EXPECT_LE(one.allocated, 2 * one.prepared) << "the contract: at most 2 host copies";
      const Cost steps = measure([&] { return prepare_step_by_step(shape, canonical, o); });
      EXPECT_EQ(steps.prepared, one.prepared);
      EXPECT_GT(steps.allocated, steps.prepared + steps.prepared / 2);
    }
}

}  // namespace
}  // namespace moe::trtllm
