// The e4m3 weight-only GEMM's amax of its f32 output (WoGemmArgs::out_amax), which the fp8_tensor
// layer's intermediate quantisation takes instead of an amax pass: bit for bit the largest |value|
// of what the GEMM stored, the routed groups' and the shared group's apart, for the gated and the
// plain epilogue, token tiles that end early and an empty group. And its e4m3 output
// (WoGemmArgs::out_e4m3, a static-scale layer's GEMM1): code for code the static quantiser's
// codes of that f32 output.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cuda_test_env.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/bf16_tiles.hpp"
#include "moe_cuda/quantize.hpp"
#include "moe_cuda/wo_gemm.hpp"

namespace moe::gpu {
namespace {

using test::DeviceBuffer;

class WoGemmAmaxTest : public test::CudaTest {
 protected:
  // Group g has rows[g] rows; the last group is the shared one. `gated`: GEMM1 of a gated layer
  // (silu_mul, I = n), else a plain GEMM of n columns. The output keeps n - cut columns of rows
  // out_cols + pad apart; the columns past out_cols must stay untouched.
  void expect_f32_amax_and_codes(bool gated, const std::vector<int64_t>& rows, int tokens_per_tile,
                                 int64_t cut = 0, int64_t pad = 0) {
    SCOPED_TRACE(testing::Message() << (gated ? "gated" : "plain") << " tile " << tokens_per_tile
                                    << " cut " << cut << " pad " << pad);
    const int64_t k = 256, n = 384, groups = int64_t(rows.size());
    const int64_t weight_rows = gated ? 2 * n : n, out_cols = n - cut, out_ld = out_cols + pad;
    std::vector<int64_t> offsets{0};
    for (int64_t r : rows) offsets.push_back(offsets.back() + r);
    const int64_t total = offsets.back();

    Problem prob;
    prob.raw().experts = groups;
    prob.raw().top_k = 1;
    prob.raw().hidden = k;
    prob.raw().intermediate = n;
    prob.raw().format = MOE_FORMAT_FP8_TENSOR;
    prob.raw().input_format = MOE_INPUT_FP8_TENSOR_DYNAMIC;
    prob.raw().activation = gated ? MOE_ACTIVATION_SILU_MUL : MOE_ACTIVATION_RELU2;
    prob.finalize();

    // Codes of magnitude up to ~2 (0x00-0x3f and their negatives), so sums stay finite.
    auto codes = [&](size_t count) {
      std::vector<uint8_t> c(count);
      for (auto& b : c) b = uint8_t(randint(0, 0x3f) | (randint(0, 1) << 7));
      return c;
    };
    const std::vector<uint8_t> w = codes(size_t(groups * weight_rows * k));
    const std::vector<uint8_t> tiles =
        pack_e4m3_stack(w.data(), groups, weight_rows, k, gated ? n : 0, "w", {},
                        gated ? GatePairing::kRowPairs : GatePairing::kHalves);
    std::vector<float> weight_scales(static_cast<size_t>(groups));
    for (auto& s : weight_scales) s = uniform(0.01f, 0.1f);

    DeviceBuffer<uint8_t> d_rows(codes(size_t(std::max<int64_t>(total, 1) * k)));
    DeviceBuffer<uint8_t> d_tiles(tiles);
    DeviceBuffer<int64_t> d_offsets(offsets);
    DeviceBuffer<float> d_scales(weight_scales), d_act(std::vector<float>{0.05f});
    DeviceBuffer<float> d_out(size_t(std::max<int64_t>(total, 1) * out_ld));
    DeviceBuffer<uint32_t> d_amax(std::vector<uint32_t>{0, 0});
    d_out.poison(0);

    WoGemmArgs a;
    a.weights = WoWeights::kE4m3;
    a.groups = int(groups);
    a.offsets = d_offsets.get();
    a.max_rows = total;
    a.rows = d_rows.get();
    a.k = k;
    a.weight_rows = d_tiles.get();
    a.n_tiles = int(gated ? n / 64 : n / 128);
    a.k_stages = int(k / 128);
    a.scale_2 = d_scales.get();
    a.act_scale = d_act.get();
    a.shared_group = int(groups - 1);
    a.epilogue = gated ? WoEpilogue::kGated : WoEpilogue::kPlain;
    a.out_f32 = d_out.get();
    a.out_amax = d_amax.get();
    a.out_ld = out_ld;
    a.out_cols = out_cols;
    a.tokens_per_tile = tokens_per_tile;
    MOE_CUDA_CHECK(cudaDeviceGetAttribute(&a.sm_count, cudaDevAttrMultiProcessorCount, 0));
    run_wo_grouped_gemm(prob.c(), a, stream_);
    sync();

    const std::vector<float> out = d_out.download();
    const std::vector<uint32_t> amax = d_amax.download();
    float want[2] = {0.0f, 0.0f};
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t r = offsets[g]; r < offsets[g + 1]; ++r)
        for (int64_t c = 0; c < out_cols; ++c)
          want[g == groups - 1] =
              std::max(want[g == groups - 1], std::abs(out[size_t(r * out_ld + c)]));
    EXPECT_GT(want[0], 0.0f);
    for (int kind = 0; kind < 2; ++kind) {
      float got;
      std::memcpy(&got, &amax[size_t(kind)], sizeof got);
      EXPECT_EQ(got, want[kind]) << (kind ? "shared group" : "routed groups");
    }

    // The same GEMM quantising as it stores, against the static quantiser on the f32 output; a
    // scale that puts the largest value at code ~300 of 448, so the codes span the whole range.
    const float scale = std::max(want[0], want[1]) / 300.0f;
    const size_t n_codes = size_t(total * out_ld);
    DeviceBuffer<float> d_static(std::vector<float>{scale});
    DeviceBuffer<uint8_t> fused(n_codes), separate(n_codes);
    fused.poison(0xaa);
    separate.poison(0x55);
    // The f32 rows whole (their columns past out_cols hold the poison 0.0, code 0).
    launch_quantize_fp8_tensor_static(d_out.get(), out_ld, RowRange{total}, d_static.get(),
                                      separate.get(), stream_);
    a.out_f32 = nullptr;
    a.out_amax = nullptr;
    a.out_e4m3 = fused.get();
    a.out_e4m3_scale = d_static.get();
    run_wo_grouped_gemm(prob.c(), a, stream_);
    sync();
    const std::vector<uint8_t> got = fused.download(), want_codes = separate.download();
    int64_t differ = 0;
    for (size_t i = 0; i < n_codes; ++i) {
      const int64_t col = int64_t(i) % out_ld;
      const int want_code = col < out_cols ? want_codes[i] : 0xaa;  // past out_cols: untouched
      if (got[i] != want_code && differ++ < 5)
        ADD_FAILURE() << "code " << i << " (row " << int64_t(i) / out_ld << ", column " << col
                      << "): " << int(got[i]) << " want " << want_code;
    }
    EXPECT_EQ(differ, 0);
  }
};

// Every token width of the e4m3 tiles: the codes are staged in one pass of N tokens or in two of
// N / 2 (N = 128), and a last tile may keep fewer columns than it computes (cut).
TEST_F(WoGemmAmaxTest, GatedGemm1sAmaxAndE4m3CodesFollowItsF32Output) {
  expect_f32_amax_and_codes(true, {37, 0, 130, 21}, 64);
  expect_f32_amax_and_codes(true, {5, 9, 3}, 16);
  expect_f32_amax_and_codes(true, {37, 0, 130, 21}, 32, 8, 8);
  expect_f32_amax_and_codes(true, {200, 3, 96, 1}, 96);
  expect_f32_amax_and_codes(true, {300, 0, 129, 7}, 128, 8, 16);
  expect_f32_amax_and_codes(true, {400, 191, 193, 2}, 192);
}

TEST_F(WoGemmAmaxTest, PlainGemm1sAmaxAndE4m3CodesFollowItsF32Output) {
  expect_f32_amax_and_codes(false, {70, 200, 1, 64}, 128);
  expect_f32_amax_and_codes(false, {70, 200, 1, 64}, 128, 8, 8);
  expect_f32_amax_and_codes(false, {5, 9, 3}, 16, 0, 8);
  expect_f32_amax_and_codes(false, {400, 191, 193, 2}, 192, 16, 0);
}

TEST_F(WoGemmAmaxTest, AnEmptySharedGroupLeavesItsAmaxAtZero) {
  expect_f32_amax_and_codes(true, {40, 17, 0}, 32);
}

}  // namespace
}  // namespace moe::gpu
