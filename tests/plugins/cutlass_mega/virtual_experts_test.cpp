// cutlass_mega's shared expert as virtual experts, on any machine: each virtual expert,
// dequantised, holds exactly the shared expert's gate, up and down weights for its intermediate
// columns and zeros past them, in every format the kernel takes, gated or not; fp8 block scales are
// checked.
#include <gtest/gtest.h>

#include <vector>

#include "moe/inputs.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/format_table.hpp"
#include "moe/sdk/problem.hpp"
#include "src/virtual_experts.hpp"

namespace moe::mega {
namespace {

moe_problem shared_problem(moe_format f, moe_activation a, int64_t shared_intermediate) {
  moe_problem p = default_problem();
  p.experts = p.local_experts = 4;
  p.top_k = 2;
  p.hidden = 256;
  p.intermediate = 128;
  p.shared_intermediate = shared_intermediate;
  p.format = f;
  p.activation = a;
  p.max_tokens = 16;
  return p;
}

std::vector<double> dequantized(moe_format f, const void* q, const void* scales, float scale_2,
                                int64_t rows, int64_t cols) {
  std::vector<double> out(size_t(rows * cols));
  dequantize_matrix(f, q, scales, scale_2, rows, cols, out.data());
  return out;
}

// Bytes of one expert's matrix [rows, cols] and of its scales in `v`'s layouts.
size_t matrix_bytes(moe_format f, int64_t rows, int64_t cols) {
  return size_t(rows * cols) * (f == MOE_FORMAT_BF16 ? 2 : 1) /
         (f == MOE_FORMAT_MXFP4 || f == MOE_FORMAT_NVFP4 ? 2 : 1);
}

void expect_chunks_hold_the_shared_expert(const moe_problem& p) {
  const LayerWeights w = random_weights(p, 3);
  const VirtualExperts v = virtual_experts(p, w.view());
  const int64_t I = p.intermediate, Is = p.shared_intermediate, H = p.hidden;
  const bool gated = p.activation != MOE_ACTIVATION_RELU2;
  const int64_t n1 = gated ? 2 * I : I, n1s = gated ? 2 * Is : Is;
  ASSERT_EQ(v.count, virtual_count(p));
  ASSERT_EQ(v.count, (Is + I - 1) / I);
  const moe_format f = static_cast<moe_format>(p.format);
  const bool fp8 = f == MOE_FORMAT_FP8_BLOCK, fp4 = f == MOE_FORMAT_MXFP4 || f == MOE_FORMAT_NVFP4;
  const std::vector<double> s13 =
      dequantized(f, w.shared_w13.raw(), fp8 || fp4 ? w.shared_w13_scale.raw() : nullptr,
                  f == MOE_FORMAT_NVFP4 ? *w.shared_w13_scale_2.data<float>() : 0.0f, n1s, H);
  const std::vector<double> s2 =
      dequantized(f, w.shared_w2.raw(), fp8 || fp4 ? w.shared_w2_scale.raw() : nullptr,
                  f == MOE_FORMAT_NVFP4 ? *w.shared_w2_scale_2.data<float>() : 0.0f, H, Is);
  const int64_t g = f == MOE_FORMAT_MXFP4 ? 32 : 16;
  for (int64_t c = 0; c < v.count; ++c) {
    const void* q13 = v.w13.data() + c * matrix_bytes(f, n1, H);
    const void* q2 = v.w2.data() + c * matrix_bytes(f, H, I);
    const void* sc13 =
        fp8   ? static_cast<const void*>(&v.w13_blocks[size_t(c * (n1 / 128) * (H / 128))])
        : fp4 ? static_cast<const void*>(&v.w13_scale[size_t(c * n1 * (H / g))])
              : nullptr;
    const void* sc2 =
        fp8   ? static_cast<const void*>(&v.w2_blocks[size_t(c * (H / 128) * (I / 128))])
        : fp4 ? static_cast<const void*>(&v.w2_scale[size_t(c * H * (I / g))])
              : nullptr;
    const float g13 = f == MOE_FORMAT_NVFP4 ? v.w13_scale_2[size_t(c)] : 0.0f;
    const float g2 = f == MOE_FORMAT_NVFP4 ? v.w2_scale_2[size_t(c)] : 0.0f;
    const std::vector<double> v13 = dequantized(f, q13, sc13, g13, n1, H);
    const std::vector<double> v2 = dequantized(f, q2, sc2, g2, H, I);
    for (int64_t r = 0; r < n1; ++r) {
      const bool up = gated && r >= I;
      const int64_t col = c * I + (up ? r - I : r);
      for (int64_t k = 0; k < H; ++k) {
        const double want = col < Is ? s13[size_t(((up ? Is : 0) + col) * H + k)] : 0.0;
        ASSERT_EQ(v13[size_t(r * H + k)], want) << "chunk " << c << " w13 row " << r << " k " << k;
      }
    }
    for (int64_t h = 0; h < H; ++h)
      for (int64_t k = 0; k < I; ++k) {
        const double want = c * I + k < Is ? s2[size_t(h * Is + c * I + k)] : 0.0;
        ASSERT_EQ(v2[size_t(h * I + k)], want) << "chunk " << c << " w2 row " << h << " k " << k;
      }
  }
}

TEST(MegaVirtualExperts, VirtualExpertsHoldItsColumnsAndZerosInEveryFormat) {
  for (moe_activation a : {MOE_ACTIVATION_SILU_MUL, MOE_ACTIVATION_RELU2}) {
    // bf16: any shared width (200: the second chunk is padded).
    expect_chunks_hold_the_shared_expert(shared_problem(MOE_FORMAT_BF16, a, 200));
    for (moe_format f : {MOE_FORMAT_FP8_BLOCK, MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4}) {
      expect_chunks_hold_the_shared_expert(shared_problem(f, a, 384));  // three whole chunks
      expect_chunks_hold_the_shared_expert(shared_problem(f, a, 128));  // one
      moe_problem wide = shared_problem(f, a, 384);  // I = 256: the second chunk half padding
      wide.intermediate = 256;
      expect_chunks_hold_the_shared_expert(wide);
    }
  }
}

// Sinks (bf16): two of width 200 on I = 128 make two chunks each, then the shared expert's two.
TEST(MegaVirtualExperts, SinkChunksHoldTheirSinkAndReadTheirColumn) {
  moe_problem p = shared_problem(MOE_FORMAT_BF16, MOE_ACTIVATION_SILU_MUL, 256);
  p.sink_experts = 2;
  p.sink_intermediate = 200;
  p.routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  p.routing_bias = 1;
  const LayerWeights w = random_weights(p, 4);
  const VirtualExperts v = virtual_experts(p, w.view());
  ASSERT_EQ(v.count, 6);
  EXPECT_EQ(slots_per_token(p), p.top_k + 6);
  const int32_t E = int32_t(p.experts), k = int32_t(p.top_k);
  const std::vector<SlotColumn> cols = slot_columns(p);
  const std::vector<SlotColumn> want = {{k, E + 0, E},   {k + 1, E + 2, E + 1},
                                        {k, E + 1, E},   {k + 1, E + 3, E + 1},
                                        {-1, E + 4, -1}, {-1, E + 5, -1}};
  ASSERT_EQ(cols.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(cols[i].src == want[i].src && cols[i].expert == want[i].expert &&
                cols[i].match == want[i].match)
        << "column " << i << ": " << cols[i].src << " " << cols[i].expert << " " << cols[i].match;
  const int64_t I = p.intermediate, H = p.hidden, Is = p.sink_intermediate;
  for (int64_t s = 0; s < 2; ++s) {
    const std::vector<double> s13 = dequantized(
        MOE_FORMAT_BF16, w.sink_w13.data<uint16_t>() + s * 2 * Is * H, nullptr, 0, 2 * Is, H);
    const std::vector<double> s2 =
        dequantized(MOE_FORMAT_BF16, w.sink_w2.data<uint16_t>() + s * H * Is, nullptr, 0, H, Is);
    for (int64_t c = 0; c < 2; ++c) {
      const int64_t e = s * 2 + c;
      const std::vector<double> v13 =
          dequantized(MOE_FORMAT_BF16, v.w13.data() + e * 2 * I * H * 2, nullptr, 0, 2 * I, H);
      const std::vector<double> v2 =
          dequantized(MOE_FORMAT_BF16, v.w2.data() + e * H * I * 2, nullptr, 0, H, I);
      for (int64_t r = 0; r < 2 * I; ++r) {
        const bool up = r >= I;
        const int64_t col = c * I + (up ? r - I : r);
        for (int64_t x = 0; x < H; ++x)
          ASSERT_EQ(v13[size_t(r * H + x)],
                    col < Is ? s13[size_t(((up ? Is : 0) + col) * H + x)] : 0.0)
              << "sink " << s << " chunk " << c << " row " << r;
      }
      for (int64_t h = 0; h < H; ++h)
        for (int64_t x = 0; x < I; ++x)
          ASSERT_EQ(v2[size_t(h * I + x)], c * I + x < Is ? s2[size_t(h * Is + c * I + x)] : 0.0)
              << "sink " << s << " chunk " << c << " w2 row " << h;
    }
  }
}

TEST(MegaVirtualExperts, NoSharedExpertMeansNoVirtualOnes) {
  const moe_problem p = shared_problem(MOE_FORMAT_BF16, MOE_ACTIVATION_SILU_MUL, 0);
  EXPECT_EQ(virtual_count(p), 0);
  EXPECT_EQ(slots_per_token(p), p.top_k);
  EXPECT_TRUE(slot_columns(p).empty());
  EXPECT_EQ(virtual_experts(p, random_weights(p, 1).view()).count, 0);
}

TEST(MegaVirtualExperts, CorruptSharedBlockScalesAreRefusedByName) {
  const moe_problem p = shared_problem(MOE_FORMAT_FP8_BLOCK, MOE_ACTIVATION_SILU_MUL, 256);
  LayerWeights w = random_weights(p, 2);
  w.shared_w2_scale.data<float>()[1] = -1.0f;
  try {
    virtual_experts(p, w.view());
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("shared_w2_scale"), std::string::npos) << e.what();
  }
}

// A bad 4-bit scale of the shared expert is named where the checkpoint holds it, not where the
// virtual experts rearranged it.
TEST(MegaVirtualExperts, CorruptSharedFp4ScalesAreNamedWhereTheyAre) {
  const moe_problem p = shared_problem(MOE_FORMAT_MXFP4, MOE_ACTIVATION_SILU_MUL, 384);
  LayerWeights w = random_weights(p, 2);
  w.shared_w2_scale.data<uint8_t>()[5 * (384 / 32) + 7] = 0xff;  // row 5, block 7
  try {
    virtual_experts(p, w.view());
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("shared_w2_scale[0, 5, 7] is the ue8m0 NaN code"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moe::mega
