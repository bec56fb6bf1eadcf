// The grouped fp8 block-scale GEMMs against a double-precision model of the same sums, for both
// tilings and both row layouts, with empty groups, partial tiles and poisoned outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cuda_test_env.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "src/fp8_gemm.hpp"

namespace moe::deepgemm {
namespace {

using gpu::test::DeviceBuffer;

struct Case {
  Fp8Tiles tiles;
  bool masked;
  bool f32_out;
  int k = 384;
  float code_stddev = 2.0f;  // ~110: codes over the whole e4m3 range, as amax/448 scales give
  int n = 256;               // 384: an odd number of 128-wide N tiles (the own kernel unpaired)
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Fp8Tiles t = info.param.tiles;
  return std::string(t == Fp8Tiles::kTokens              ? "TokenTiles"
                     : t == Fp8Tiles::kTokensFfma        ? "OwnTokenTiles"
                     : t == Fp8Tiles::kTokensFfma192     ? "OwnTokenTiles192"
                     : t == Fp8Tiles::kTokensFfmaSplitK  ? "OwnSplitKTokenTiles"
                     : t == Fp8Tiles::kTokensPaired      ? "PairedTokenTiles"
                     : t == Fp8Tiles::kWeightsFfma       ? "OwnWeightTiles"
                     : t == Fp8Tiles::kWeightsFfmaSplitK ? "OwnSplitKWeightTiles"
                                                         : "WeightTiles") +
         (info.param.masked ? "Masked" : "Contiguous") + (info.param.f32_out ? "F32" : "Bf16") +
         "K" + std::to_string(info.param.k) + (info.param.code_stddev > 10 ? "FullRange" : "") +
         (info.param.n != 256 ? "N" + std::to_string(info.param.n) : "");
}

class Fp8GemmTest : public gpu::test::CudaTest, public ::testing::WithParamInterface<Case> {
 protected:
  // e4m3 codes of values drawn from N(0, 1) on a grid the format holds well.
  std::vector<uint8_t> random_codes(size_t n, float stddev) {
    std::vector<uint8_t> v(n);
    for (auto& c : v) c = e4m3_from_double(normal(stddev));
    return v;
  }
  std::vector<float> random_scales(size_t n) {
    std::vector<float> v(n);
    for (auto& s : v) s = uniform(0.25f, 2.0f);
    return v;
  }
};

TEST_P(Fp8GemmTest, MatchesBlockScaledProductsPerGroup) {
  const Case c = GetParam();
  const int n = c.n, k = c.k, kb = k / 128, nb = n / 128;
  // Partial tiles, an empty group, a second 128-row tile of 3 rows (one 64-row half idle), one of
  // 100 rows (both halves, the second partial), and 197 rows: a second 128-row tile of 69 rows,
  // or 192 rows (every 64-row third) and a second 192-row tile of 5; 131 rows fill two thirds
  // of a 192-row tile and 3 rows of the last.
  const std::vector<int> counts = {5, 0, 131, 1, 100, 197};
  const int groups = int(counts.size());
  const int max_m = 197;
  std::vector<int64_t> offsets = {0};
  for (int m : counts) offsets.push_back(offsets.back() + m);
  // Row r of group g: contiguous offsets[g] + i, masked g * max_m + i.
  const int64_t rows = c.masked ? int64_t(groups) * max_m : offsets.back();
  auto row_of = [&](int g, int i) { return c.masked ? int64_t(g) * max_m + i : offsets[g] + i; };

  const std::vector<uint8_t> a = random_codes(size_t(rows * k), c.code_stddev);
  const std::vector<float> sa = random_scales(size_t(kb * rows));  // [kb][rows]
  std::vector<std::vector<uint8_t>> w(groups);
  std::vector<std::vector<float>> sw(groups);  // [kb][nb]
  for (int g = 0; g < groups; ++g) {
    w[g] = random_codes(size_t(n) * k, c.code_stddev);
    sw[g] = random_scales(size_t(kb * nb));
  }

  DeviceBuffer<uint8_t> d_a(a);
  DeviceBuffer<float> d_sa(sa);
  // Weights and scales stacked group after group, with per-group pointers into the stack.
  std::vector<uint8_t> w_stack;
  std::vector<float> sw_stack;
  for (int g = 0; g < groups; ++g) {
    w_stack.insert(w_stack.end(), w[g].begin(), w[g].end());
    sw_stack.insert(sw_stack.end(), sw[g].begin(), sw[g].end());
  }
  DeviceBuffer<uint8_t> d_w(w_stack);
  DeviceBuffer<float> d_sw(sw_stack);
  std::vector<const void*> w_ptrs;
  std::vector<const float*> sw_ptrs;
  for (int g = 0; g < groups; ++g) {
    w_ptrs.push_back(d_w.get() + size_t(g) * n * k);
    sw_ptrs.push_back(d_sw.get() + size_t(g) * kb * nb);
  }
  DeviceBuffer<const void*> d_w_ptrs(w_ptrs);
  DeviceBuffer<const float*> d_sw_ptrs(sw_ptrs);
  DeviceBuffer<int64_t> d_offsets(offsets);
  DeviceBuffer<int32_t> d_counts(std::vector<int32_t>(counts.begin(), counts.end()));
  DeviceBuffer<float> d_out(size_t(rows * n));  // f32, or bf16 in its first half
  d_out.poison();
  int sm = 0;
  MOE_CUDA_CHECK(cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, 0));
  const size_t ws_bytes = fp8_gemm_workspace_bytes(groups, sm);
  DeviceBuffer<uint8_t> d_ws(ws_bytes);

  Fp8GemmArgs args;
  args.groups = groups;
  args.offsets = c.masked ? nullptr : d_offsets.get();
  args.counts = c.masked ? d_counts.get() : nullptr;
  args.max_m = c.masked ? max_m : 0;
  args.n = n;
  args.k = k;
  args.rows = d_a.get();
  args.row_scales = d_sa.get();
  args.scale_ld = rows;
  args.weights = d_w_ptrs.get();
  args.w_scales = d_sw_ptrs.get();
  args.weight_stack = d_w.get();
  args.w_scale_stack = d_sw.get();
  args.out = d_out.get();
  args.f32_out = c.f32_out;
  args.workspace = d_ws.get();
  args.workspace_bytes = ws_bytes;
  args.sm_count = sm;
  // The counts came from the host (settled): the masked cases let the swapped kernel stream its
  // first weight boxes before its dependency wait, the contiguous ones keep the plain order.
  args.groups_settled = c.masked;
  run_fp8_grouped_gemm(c.tiles, args, stream_);
  sync();
  const std::vector<float> out = d_out.download();
  auto got_at = [&](int64_t i) {
    if (c.f32_out) return double(out[size_t(i)]);
    uint16_t bits;
    std::memcpy(&bits, reinterpret_cast<const char*>(out.data()) + 2 * i, 2);
    return double(bf16_to_float(bits));
  };

  double err2 = 0, ref2 = 0;
  int64_t checked = 0;
  for (int g = 0; g < groups; ++g) {
    for (int i = 0; i < counts[g]; ++i) {
      const int64_t r = row_of(g, i);
      for (int col = 0; col < n; ++col) {
        double want = 0;
        for (int b = 0; b < kb; ++b) {
          double block = 0;
          for (int x = b * 128; x < (b + 1) * 128; ++x)
            block +=
                e4m3_to_double(a[size_t(r * k + x)]) * e4m3_to_double(w[g][size_t(col) * k + x]);
          want += block * sa[size_t(b * rows + r)] * sw[g][size_t(b * nb + col / 128)];
        }
        const double got = got_at(r * n + col);
        ASSERT_TRUE(std::isfinite(got)) << "group " << g << " row " << i << " col " << col;
        err2 += (got - want) * (got - want);
        ref2 += want * want;
        ++checked;
      }
    }
  }
  ASSERT_GT(checked, 0);
  // bf16 rounding alone is ~2e-3; what fp32 output leaves is the tensor cores' own accumulation
  // inside each 128-wide K block (promoted to fp32 between blocks).
  const double rel = std::sqrt(err2 / ref2);
  std::cout << "[ rel err  ] " << rel << " over " << checked << " outputs\n";
  EXPECT_LT(rel, c.f32_out ? 1e-3 : 5e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Fp8GemmTest,
    ::testing::Values(
        Case{Fp8Tiles::kTokens, false, false}, Case{Fp8Tiles::kTokens, true, false},
        Case{Fp8Tiles::kWeights, false, false}, Case{Fp8Tiles::kWeights, true, false},
        Case{Fp8Tiles::kTokens, false, true}, Case{Fp8Tiles::kWeights, true, true},
        Case{Fp8Tiles::kTokens, false, true, 7168}, Case{Fp8Tiles::kWeights, true, true, 7168},
        Case{Fp8Tiles::kTokens, false, true, 256, 110.0f},
        Case{Fp8Tiles::kWeights, true, true, 2048, 110.0f},
        Case{Fp8Tiles::kTokensFfma, false, false}, Case{Fp8Tiles::kTokensFfma, true, false},
        Case{Fp8Tiles::kTokensFfma, false, true}, Case{Fp8Tiles::kTokensFfma, true, true, 7168},
        Case{Fp8Tiles::kTokensFfma, false, true, 2048, 110.0f},
        Case{Fp8Tiles::kTokensFfma192, false, false}, Case{Fp8Tiles::kTokensFfma192, true, false},
        Case{Fp8Tiles::kTokensFfma192, false, true},
        Case{Fp8Tiles::kTokensFfma192, true, true, 7168},
        Case{Fp8Tiles::kTokensFfma192, false, true, 2048, 110.0f},
        Case{Fp8Tiles::kTokensFfma192, false, true, 384, 2.0f, 384},
        Case{Fp8Tiles::kTokensFfma192, true, false, 384, 2.0f, 384},
        Case{Fp8Tiles::kTokensFfma, false, true, 384, 2.0f, 384},
        // K = 1024 (8 blocks): solo tiles in ping-pong, paired and unpaired.
        Case{Fp8Tiles::kTokensFfma, true, false, 1024},
        Case{Fp8Tiles::kTokensFfma, false, true, 1024, 2.0f, 384},
        // K split over a CTA pair: 3 blocks (1 + 2), 10 (5 + 5: ping-pong past the 4-stage
        // ring), 8 with an odd number of N tiles; both consumers of a tile trade sums (131, 197).
        Case{Fp8Tiles::kTokensFfmaSplitK, false, false},
        Case{Fp8Tiles::kTokensFfmaSplitK, true, true, 1280},
        Case{Fp8Tiles::kTokensFfmaSplitK, true, false, 1024, 2.0f, 384},
        Case{Fp8Tiles::kTokensFfmaSplitK, false, true, 2048, 110.0f},
        Case{Fp8Tiles::kTokensPaired, false, false}, Case{Fp8Tiles::kTokensPaired, true, true},
        Case{Fp8Tiles::kTokensPaired, false, true, 7168},
        Case{Fp8Tiles::kTokensPaired, true, false, 2048, 110.0f},
        Case{Fp8Tiles::kTokensPaired, false, true, 384, 2.0f, 384},  // unpaired: odd N tiles
        // Operands swapped: 16-token blocks (131 rows: 9 blocks, the last of 3; 197: 13, of 5).
        Case{Fp8Tiles::kWeightsFfma, true, false}, Case{Fp8Tiles::kWeightsFfma, false, true},
        Case{Fp8Tiles::kWeightsFfma, true, true, 7168},
        Case{Fp8Tiles::kWeightsFfma, false, false, 2048, 110.0f},
        Case{Fp8Tiles::kWeightsFfma, true, false, 384, 2.0f, 384},
        // And K split over a CTA pair: 3 blocks (1 + 2), 10 (5 + 5), 56 past the 11-stage ring.
        Case{Fp8Tiles::kWeightsFfmaSplitK, true, false},
        Case{Fp8Tiles::kWeightsFfmaSplitK, false, true, 1280},
        Case{Fp8Tiles::kWeightsFfmaSplitK, true, true, 7168, 2.0f, 384}),
    case_name);

// Arguments of one empty group that pass the host checks, pointing at host memory: for the
// refusals, which come before anything reaches the device.
Fp8GemmArgs host_args(int n, int k) {
  alignas(16) static uint8_t bytes[64];
  static int64_t offsets[2] = {0, 0};
  static float scale = 1.0f;
  static const void* w[1] = {bytes};
  static const float* s[1] = {&scale};
  Fp8GemmArgs args;
  args.groups = 1;
  args.n = n;
  args.k = k;
  args.offsets = offsets;
  args.rows = bytes;
  args.row_scales = &scale;
  args.scale_ld = 16;
  args.out = bytes;
  args.weights = w;
  args.w_scales = s;
  args.workspace = bytes;
  args.weight_stack = bytes;
  args.w_scale_stack = &scale;
  args.sm_count = 132;
  return args;
}

// CUTLASS's paired tiles refuse an odd number of N tiles (deepgemm_style then runs that GEMM
// unpaired).
TEST(Fp8GemmArgs, PairedTilesRefuseAnOddNumberOfNTiles) {
  const gpu::Fp8BlockGemmArgs args = host_args(384, 256);
  try {
    gpu::run_fp8_block_grouped_gemm(gpu::Fp8BlockTiles::kTokensPaired, args, nullptr);
    FAIL() << "no error";
  } catch (const moe::Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_UNSUPPORTED);
    EXPECT_NE(std::string(e.what()).find("N=384 holds an odd number of 128-wide tiles"),
              std::string::npos)
        << e.what();
  }
}

// Split K needs two K blocks to split: refused before anything reaches the device.
TEST(Fp8GemmArgs, SplitKRefusesASingleKBlock) {
  Fp8GemmArgs args = host_args(256, 128);
  for (const Fp8Tiles t : {Fp8Tiles::kTokensFfmaSplitK, Fp8Tiles::kWeightsFfmaSplitK}) {
    try {
      run_fp8_grouped_gemm(t, args, nullptr);
      ADD_FAILURE() << "no error for " << fp8_tiles_name(t);
    } catch (const moe::Error& e) {
      EXPECT_EQ(e.status(), MOE_STATUS_UNSUPPORTED);
      EXPECT_NE(
          std::string(e.what()).find("split K needs K of two 128-wide blocks or more (K=128)"),
          std::string::npos)
          << e.what();
    }
  }
}

TEST(Fp8GemmArgs, RefusesSizesThatAreNotWholeScaleBlocks) {
  Fp8GemmArgs args;
  args.groups = 1;
  args.n = 200;
  args.k = 256;
  try {
    run_fp8_grouped_gemm(Fp8Tiles::kTokens, args, nullptr);
    FAIL() << "no error";
  } catch (const moe::Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_UNSUPPORTED);
    EXPECT_NE(std::string(e.what()).find("N=200"), std::string::npos) << e.what();
  }
}

// A fused GEMM1 (Fp8FusedGemm1) is refused, naming why, where the own kernel cannot fuse it:
// checked before anything reaches the device.
TEST(Fp8GemmArgs, FusedGemm1RefusesWhatItCannotFuse) {
  Fp8GemmArgs args = host_args(512, 256);
  alignas(16) static uint8_t codes[64];
  static float scale = 1.0f;
  Fp8FusedGemm1 fused;
  fused.codes = codes;
  fused.scales = &scale;
  fused.scale_ld = 16;
  args.fused = &fused;
  auto expect = [&](Fp8Tiles tiles, moe_status status, const std::string& words) {
    try {
      run_fp8_grouped_gemm(tiles, args, nullptr);
      ADD_FAILURE() << "no error for " << words;
    } catch (const moe::Error& e) {
      EXPECT_EQ(e.status(), status) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect(Fp8Tiles::kTokens, MOE_STATUS_UNSUPPORTED,
         "only the own kernel's whole-K token tiles fuse GEMM1's activation");
  expect(Fp8Tiles::kWeightsFfma, MOE_STATUS_UNSUPPORTED,
         "only the own kernel's whole-K token tiles fuse GEMM1's activation");
  fused.activation = MOE_ACTIVATION_RELU2;
  expect(Fp8Tiles::kTokensFfma, MOE_STATUS_UNSUPPORTED, "takes a gated activation, not 4");
  fused.activation = MOE_ACTIVATION_SILU_MUL;
  expect(Fp8Tiles::kTokensFfmaSplitK, MOE_STATUS_UNSUPPORTED,
         "only the own kernel's whole-K token tiles fuse GEMM1's activation");
  fused.scale_ld = 8;
  expect(Fp8Tiles::kTokensFfma192, MOE_STATUS_INVALID_ARGUMENT,
         "scales of a row stride of at least the rows' (8 < 16)");
  fused.scale_ld = 16;
  args.n = 384;
  expect(Fp8Tiles::kTokensFfma, MOE_STATUS_INVALID_ARGUMENT, "N = 2I with I % 128 == 0 (N=384)");
}

// The own kernels address the weight stack's rows with 32-bit TMA coordinates: a stack of 2^31
// rows or more is refused before anything reaches the device.
TEST(Fp8GemmArgs, AWeightStackPastTheTmaCoordinatesIsRefused) {
  Fp8GemmArgs args = host_args(1 << 22, 256);
  args.groups = 512;  // 2^31 rows
  for (const Fp8Tiles t : {Fp8Tiles::kTokensFfma, Fp8Tiles::kWeightsFfma}) {
    try {
      run_fp8_grouped_gemm(t, args, nullptr);
      ADD_FAILURE() << "no error for " << fp8_tiles_name(t);
    } catch (const moe::Error& e) {
      EXPECT_EQ(e.status(), MOE_STATUS_UNSUPPORTED) << e.what();
      EXPECT_NE(std::string(e.what()).find("512 x 4194304 rows exceed the 2^31"), std::string::npos)
          << e.what();
    }
  }
}

// The swapped-operand kernel keeps no timeline.
TEST(Fp8GemmArgs, TheSwappedOperandKernelKeepsNoTimeline) {
  Fp8GemmArgs args = host_args(512, 256);
  static unsigned long long records[132 * 2 * Fp8Timeline::kWords];
  args.timeline = Fp8Timeline{records, 1, sizeof(records) / sizeof(records[0])};
  try {
    run_fp8_grouped_gemm(Fp8Tiles::kWeightsFfma, args, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const moe::Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_UNSUPPORTED) << e.what();
    EXPECT_NE(std::string(e.what()).find("keeps no timeline"), std::string::npos) << e.what();
  }
}

// A timeline (moe_deepgemm_gemm_bench --timeline) needs room for a tile a consumer of every CTA.
TEST(Fp8GemmArgs, ATimelineWithoutRoomIsRefused) {
  Fp8GemmArgs args = host_args(512, 256);
  constexpr int kW = Fp8Timeline::kWords;
  static unsigned long long records[kW];
  for (const Fp8Timeline t : {Fp8Timeline{records, 0, kW}, Fp8Timeline{records, 1, kW}}) {
    args.timeline = t;
    try {
      run_fp8_grouped_gemm(Fp8Tiles::kTokensFfma, args, nullptr);
      ADD_FAILURE() << "no error for a timeline of " << t.tiles << " tiles in " << t.words;
    } catch (const moe::Error& e) {
      EXPECT_EQ(e.status(), MOE_STATUS_INVALID_ARGUMENT) << e.what();
      EXPECT_NE(std::string(e.what()).find("room for at least one tile"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace moe::deepgemm
