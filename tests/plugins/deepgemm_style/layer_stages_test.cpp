// The deepgemm_style layer stage by stage on a GPU: after one run, every intermediate buffer of
// the workspace is read back and each stage is checked against a double model fed with the
// previous stage's actual output, so a failure names the stage: the quantising gather (exact),
// GEMM1 (tensor-core fp8 against double), the activation and its 1x128 re-quantisation (codes
// against the reference's rule on GEMM1's actual values), GEMM2, and the weighted combine. The
// end-to-end error against a double model of the reference's semantics is bounded last.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda_test_env.hpp"
#include "moe/inputs.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "src/deepgemm_layer.hpp"

namespace moe::deepgemm {
namespace {

using gpu::test::DeviceBuffer;

struct Case {
  moe_activation activation;
  RowLayout layout;
  int64_t tokens;
  const char* tiles = "auto";  // option gemm_tiles
  // >= 768 (six 128-wide K blocks, the 128-row kernel's stage ring): the own kernel's consumers
  // take tiles of <= 64 rows in turn (ping-pong).
  int64_t hidden = 384, intermediate = 256;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(c.activation == MOE_ACTIVATION_RELU2 ? "Relu2" : "SiluMul") +
         (c.layout == RowLayout::kMasked ? "Masked" : "Contiguous") + "T" +
         std::to_string(c.tokens) +
         (std::string(c.tiles) == "tokens_ffma"          ? "OwnGemm"
          : std::string(c.tiles) == "tokens_ffma192"     ? "OwnGemm192"
          : std::string(c.tiles) == "tokens"             ? "CutlassTokenTiles"
          : std::string(c.tiles) == "weights"            ? "CutlassWeightTiles"
          : std::string(c.tiles) == "tokens_paired"      ? "CutlassPairedTiles"
          : std::string(c.tiles) == "weights_ffma"       ? "OwnSwappedGemm"
          : std::string(c.tiles) == "weights_ffma_split" ? "OwnSwappedSplitGemm"
                                                         : "") +
         (c.hidden != 384 ? fmt::format("H{}I{}", c.hidden, c.intermediate) : std::string());
}

double rel_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double e = 0, r = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    e += (got[i] - want[i]) * (got[i] - want[i]);
    r += want[i] * want[i];
  }
  return r > 0 ? std::sqrt(e / r) : std::sqrt(e);
}

// y = W x for W [n, k] (row-major doubles).
std::vector<double> matvec(const std::vector<double>& w, const std::vector<double>& x, int64_t n) {
  const int64_t k = int64_t(x.size());
  std::vector<double> y(size_t(n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) y[size_t(i)] += w[size_t(i * k + j)] * x[size_t(j)];
  return y;
}

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}

// The reference's activation of one GEMM1 row (silu_mul: gate first, then up; relu2: squared).
std::vector<double> activate(moe_activation act, const std::vector<double>& g, int64_t inter) {
  std::vector<double> y(static_cast<size_t>(inter));
  for (int64_t i = 0; i < inter; ++i) {
    if (act == MOE_ACTIVATION_RELU2) {
      const double r = std::max(g[size_t(i)], 0.0);
      y[size_t(i)] = r * r;
    } else {
      y[size_t(i)] = silu(g[size_t(i)]) * g[size_t(inter + i)];
    }
  }
  return y;
}

// Row r of a [rows, cols] e4m3 buffer with its [cols/128][ld] scales, dequantised.
std::vector<double> dequant_row(const std::vector<uint8_t>& codes, const std::vector<float>& scales,
                                int64_t r, int64_t cols, int64_t ld) {
  std::vector<double> v(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c)
    v[size_t(c)] = e4m3_to_double(codes[size_t(r * cols + c)]) * scales[size_t((c / 128) * ld + r)];
  return v;
}

// What both layer tests need: a random routing and one run of a layer on the test's stream.
class LayerTest : public gpu::test::CudaTest {
 protected:
  // k distinct experts of `experts` per token, weights summing to 1.
  void random_routing(int64_t tokens, int64_t k, int64_t experts, std::vector<int32_t>& ids,
                      std::vector<float>& weights) {
    ids.assign(size_t(tokens * k), 0);
    weights.assign(size_t(tokens * k), 0.0f);
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<int32_t> all(static_cast<size_t>(experts));
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng_);
      float sum = 0;
      for (int64_t j = 0; j < k; ++j) {
        ids[size_t(t * k + j)] = all[size_t(j)];
        sum += weights[size_t(t * k + j)] = uniform(0.1f, 1.0f);
      }
      for (int64_t j = 0; j < k; ++j) weights[size_t(t * k + j)] /= sum;
    }
  }

  // Runs `layer` on `hidden` [T, H] with the routing, workspace and output poisoned first.
  void run_layer(const DeviceLayer& layer, DeviceBuffer<uint16_t>& hidden,
                 DeviceBuffer<int32_t>& ids, DeviceBuffer<float>& weights, int64_t tokens,
                 int64_t k, int64_t h, DeviceBuffer<uint8_t>& ws, DeviceBuffer<uint16_t>& out) {
    ws.poison();
    out.poison();
    moe_run_args a{};
    a.struct_size = sizeof(a);
    auto tensor = [](void* data, moe_dtype dtype, int64_t rows, int64_t cols) {
      moe_tensor x{};
      x.data = data, x.dtype = dtype, x.ndim = 2, x.shape[0] = rows, x.shape[1] = cols;
      return x;
    };
    a.hidden = tensor(hidden.get(), MOE_DTYPE_BF16, tokens, h);
    a.topk_ids = tensor(ids.get(), MOE_DTYPE_I32, tokens, k);
    a.topk_weights = tensor(weights.get(), MOE_DTYPE_F32, tokens, k);
    a.output = tensor(out.get(), MOE_DTYPE_BF16, tokens, h);
    a.workspace = ws.get();
    a.workspace_size = layer.workspace_size(tokens);
    a.stream = stream_;
    layer.run(a);
    sync();
  }
};

class DeepGemmLayerStages : public LayerTest, public ::testing::WithParamInterface<Case> {};

TEST_P(DeepGemmLayerStages, EachStageMatchesItsModelOnThePreviousStagesOutput) {
  const Case c = GetParam();
  Problem prob;
  moe_problem& raw = prob.raw();
  raw.experts = 12;
  raw.top_k = 3;
  raw.hidden = c.hidden;
  raw.intermediate = c.intermediate;
  raw.format = MOE_FORMAT_FP8_BLOCK;
  raw.input_format = MOE_INPUT_FP8_1X128;
  raw.activation = c.activation;
  raw.max_tokens = 512;
  prob.finalize();
  const moe_problem p = prob.c();
  if (!check_support(p).ok()) GTEST_SKIP() << check_support(p).message;
  const int64_t t_count = c.tokens, k = p.top_k, h = p.hidden, in = p.intermediate;
  const int64_t n1 = c.activation == MOE_ACTIVATION_RELU2 ? in : 2 * in;
  const LayerWeights w = random_weights(p, seed_);
  // Every stage's buffer is read back, GEMM1's f32 output included: the separate activation
  // (`auto` fuses it into GEMM1 on 192-row tiles; DeepGemmFusedGemm1 checks that path).
  const DeviceLayer layer(p, w.view(),
                          {{"layout", row_layout_name(c.layout)},
                           {"gemm_tiles", c.tiles},
                           {"gemm1_epilogue", "separate"}});

  // Weights as doubles, per expert: W13 [n1, H], W2 [H, I].
  std::vector<std::vector<double>> w13(size_t(p.experts)), w2(size_t(p.experts));
  for (int64_t e = 0; e < p.experts; ++e) {
    w13[size_t(e)].resize(size_t(n1 * h));
    w2[size_t(e)].resize(size_t(h * in));
    dequantize_fp8_block(w.w13.data<uint8_t>() + e * n1 * h,
                         w.w13_scale.data<float>() + e * (n1 / 128) * (h / 128), 0, n1, h,
                         w13[size_t(e)].data());
    dequantize_fp8_block(w.w2.data<uint8_t>() + e * h * in,
                         w.w2_scale.data<float>() + e * (h / 128) * (in / 128), 0, h, in,
                         w2[size_t(e)].data());
  }

  // Inputs: N(0, 1) hidden states, k distinct experts per token with weights summing to 1.
  const std::vector<uint16_t> hidden = random_bf16(size_t(t_count * h));
  std::vector<int32_t> ids;
  std::vector<float> weights;
  random_routing(t_count, k, p.experts, ids, weights);
  DeviceBuffer<uint16_t> d_hidden(hidden), d_out(size_t(t_count * h));
  DeviceBuffer<int32_t> d_ids(ids);
  DeviceBuffer<float> d_weights(weights);
  DeviceBuffer<uint8_t> d_ws(layer.workspace_size(t_count));
  d_ws.poison(0xff);  // a stage that writes nothing cannot pass on an earlier test's bytes
  run_layer(layer, d_hidden, d_ids, d_weights, t_count, k, h, d_ws, d_out);

  // Read every stage back (offsets into the one workspace download).
  const DeviceLayer::Workspace ws = layer.carve(d_ws.get(), t_count, c.layout, nullptr);
  const std::vector<uint8_t> bytes = d_ws.download();
  const auto* base = d_ws.get();
  auto read = [&](const auto* ptr, size_t n) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(ptr)>>;
    std::vector<T> v(n);
    std::memcpy(v.data(), bytes.data() + (reinterpret_cast<const uint8_t*>(ptr) - base),
                n * sizeof(T));
    return v;
  };
  const gpu::Permutation& perm = ws.perm;
  const int64_t r_max = perm.max_rows, groups = perm.groups;
  const std::vector<int32_t> row_token = read(perm.row_token, size_t(r_max));
  const std::vector<int32_t> slot_row = read(perm.slot_row, size_t(t_count * k));
  std::vector<int64_t> offsets;
  if (c.layout == RowLayout::kContiguous) offsets = read(perm.group_offsets, size_t(groups + 1));
  const std::vector<uint8_t> rows = read(ws.rows, size_t(r_max * h));
  const std::vector<float> row_scales = read(ws.row_scales, size_t((h / 128) * r_max));
  const std::vector<float> gemm1 = read(ws.gemm1, size_t(r_max * n1));
  const std::vector<uint8_t> act = read(ws.act, size_t(r_max * in));
  const std::vector<float> act_scales = read(ws.act_scales, size_t((in / 128) * r_max));
  const std::vector<uint16_t> gemm2 = read(ws.gemm2, size_t(r_max * h));
  const std::vector<uint16_t> out = d_out.download();
  auto group_of = [&](int64_t r) -> int64_t {
    if (c.layout == RowLayout::kMasked) return r / perm.max_m;
    return std::upper_bound(offsets.begin(), offsets.end(), r) - offsets.begin() - 1;
  };

  double worst_gather = 0, worst_gemm1 = 0, worst_act = 0, worst_gemm2 = 0;
  int64_t live = 0, flipped = 0, shown = 0;
  std::vector<std::vector<double>> y2(
      static_cast<size_t>(r_max));  // GEMM2 rows as the device wrote them
  for (int64_t r = 0; r < r_max; ++r) {
    const int32_t t = row_token[size_t(r)];
    if (t < 0 || (c.layout == RowLayout::kContiguous && r >= offsets.back())) continue;
    ++live;
    const int64_t g = group_of(r);
    ASSERT_TRUE(g >= 0 && g < p.experts) << "row " << r;
    // 1. The quantising gather: exactly the reference's 1x128 rule on the token's bf16 values.
    std::vector<double> x(static_cast<size_t>(h));
    for (int64_t i = 0; i < h; ++i) x[size_t(i)] = bf16_to_float(hidden[size_t(t * h + i)]);
    fake_quant_fp8_1x128(x.data(), h);
    const std::vector<double> xq = dequant_row(rows, row_scales, r, h, r_max);
    worst_gather = std::max(worst_gather, rel_l2(xq, x));
    for (int64_t i = 0; i < h; ++i)
      if (xq[size_t(i)] != x[size_t(i)] && shown++ < 5)
        ADD_FAILURE() << "row " << r << " (token " << t << ") column " << i << ": bf16 "
                      << bf16_to_float(hidden[size_t(t * h + i)]) << " quantised to "
                      << xq[size_t(i)] << ", the 1x128 rule gives " << x[size_t(i)];
    // 2. GEMM1 on the gathered codes.
    std::vector<double> g1(static_cast<size_t>(n1));
    for (int64_t i = 0; i < n1; ++i) g1[size_t(i)] = gemm1[size_t(r * n1 + i)];
    worst_gemm1 = std::max(worst_gemm1, rel_l2(g1, matvec(w13[size_t(g)], xq, n1)));
    // 3. The activation on GEMM1's values, re-quantised by the reference's rule. A code may
    // differ next to a midpoint (fp32 activation math against double), so they are counted.
    const std::vector<double> y = activate(c.activation, g1, in);
    std::vector<double> yq = y;
    fake_quant_fp8_1x128(yq.data(), in);
    const std::vector<double> aq = dequant_row(act, act_scales, r, in, r_max);
    worst_act = std::max(worst_act, rel_l2(aq, yq));
    for (int64_t i = 0; i < in; ++i)
      flipped += act[size_t(r * in + i)] !=
                 e4m3_from_double(y[size_t(i)] / act_scales[size_t((i / 128) * r_max + r)]);
    // 4. GEMM2 on the re-quantised codes (bf16 out).
    y2[size_t(r)].resize(size_t(h));
    for (int64_t i = 0; i < h; ++i)
      y2[size_t(r)][size_t(i)] = bf16_to_float(gemm2[size_t(r * h + i)]);
    worst_gemm2 = std::max(worst_gemm2, rel_l2(y2[size_t(r)], matvec(w2[size_t(g)], aq, h)));
  }
  EXPECT_EQ(live, t_count * k);

  // 5. The combine of GEMM2's rows, and 6. the whole layer against a double model of the
  // reference's semantics (the same quantisation rules, exact GEMMs).
  double worst_combine = 0;
  std::vector<double> token_err;
  for (int64_t t = 0; t < t_count; ++t) {
    std::vector<double> got(static_cast<size_t>(h)), sum(size_t(h), 0.0), model(size_t(h), 0.0);
    for (int64_t i = 0; i < h; ++i) got[size_t(i)] = bf16_to_float(out[size_t(t * h + i)]);
    std::vector<double> x(static_cast<size_t>(h));
    for (int64_t i = 0; i < h; ++i) x[size_t(i)] = bf16_to_float(hidden[size_t(t * h + i)]);
    fake_quant_fp8_1x128(x.data(), h);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = ids[size_t(t * k + j)], r = slot_row[size_t(t * k + j)];
      const double wt = weights[size_t(t * k + j)];
      ASSERT_GE(r, 0) << "token " << t << " slot " << j;
      for (int64_t i = 0; i < h; ++i) sum[size_t(i)] += wt * y2[size_t(r)][size_t(i)];
      std::vector<double> y = activate(c.activation, matvec(w13[size_t(e)], x, n1), in);
      fake_quant_fp8_1x128(y.data(), in);
      const std::vector<double> z = matvec(w2[size_t(e)], y, h);
      for (int64_t i = 0; i < h; ++i) model[size_t(i)] += wt * z[size_t(i)];
    }
    worst_combine = std::max(worst_combine, rel_l2(got, sum));
    token_err.push_back(rel_l2(got, model));
  }
  std::vector<double> sorted = token_err;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2], worst = sorted.back();
  std::cout << "  gather " << worst_gather << "  gemm1 " << worst_gemm1 << "  activation "
            << worst_act << " (" << flipped << " of " << live * in << " codes differ)  gemm2 "
            << worst_gemm2 << "  combine " << worst_combine << "  layer: median " << median
            << " worst " << worst << "\n";
  EXPECT_LT(worst_gemm1, 1e-3) << "GEMM1 (f32 out) against double";
  EXPECT_LT(worst_act, 2e-2) << "the activation's re-quantisation (a code next to a midpoint "
                                "may flip, one code step is ~6%)";
  EXPECT_LE(double(flipped), 0.001 * double(live * in)) << "too many re-quantised codes differ";
  EXPECT_LT(worst_gemm2, 6e-3) << "GEMM2 (bf16 out) against double";
  EXPECT_LT(worst_combine, 6e-3) << "the combine of GEMM2's rows";
  EXPECT_LT(median, 6e-3) << "the layer against the reference's semantics (median token)";
  // One token in a few hundred reaches ~2.5e-2: GEMM1's tensor-core noise (~2e-4) moves a few
  // intermediate values across their e4m3 midpoints, each flip a whole code step (bench/NOTES.md).
  EXPECT_LT(worst, 4e-2) << "the layer against the reference's semantics (worst token)";
}

INSTANTIATE_TEST_SUITE_P(
    Layers, DeepGemmLayerStages,
    ::testing::Values(
        Case{MOE_ACTIVATION_SILU_MUL, RowLayout::kContiguous, 200},
        Case{MOE_ACTIVATION_SILU_MUL, RowLayout::kMasked, 33},
        Case{MOE_ACTIVATION_RELU2, RowLayout::kContiguous, 70},
        Case{MOE_ACTIVATION_RELU2, RowLayout::kMasked, 5},
        Case{MOE_ACTIVATION_SILU_MUL, RowLayout::kContiguous, 200, "tokens_ffma"},
        Case{MOE_ACTIVATION_RELU2, RowLayout::kMasked, 33, "tokens_ffma"},
        Case{MOE_ACTIVATION_SILU_MUL, RowLayout::kContiguous, 200, "tokens_ffma192"},
        Case{MOE_ACTIVATION_RELU2, RowLayout::kMasked, 33, "tokens_ffma192"},
        // Ping-pong: K = 1024 in both GEMMs; 10 rows an expert (every tile solo,
        // several a CTA), and 50 (solo and two-consumer tiles mixed).
        Case{MOE_ACTIVATION_SILU_MUL, RowLayout::kContiguous, 40, "tokens_ffma", 1024, 1024},
        Case{MOE_ACTIVATION_SILU_MUL, RowLayout::kMasked, 40, "tokens_ffma", 1024, 1024},
        Case{MOE_ACTIVATION_RELU2, RowLayout::kContiguous, 200, "tokens_ffma", 1024, 1024},
        // H = 1152: GEMM2's 9 N tiles run unpaired (one-CTA clusters) in ping-pong.
        Case{MOE_ACTIVATION_SILU_MUL, RowLayout::kContiguous, 200, "tokens_ffma", 1152, 1024},
        // The own kernel with its operands swapped (`auto` up to 8 rows an expert, as at T=5
        // and 33 above): 50 rows an expert (four 16-token blocks), and K = 1024 (the 12-stage
        // ring wraps in a tile).
        Case{MOE_ACTIVATION_SILU_MUL, RowLayout::kContiguous, 200, "weights_ffma"},
        Case{MOE_ACTIVATION_RELU2, RowLayout::kMasked, 33, "weights_ffma", 1024, 1024},
        // And K split over a CTA pair (3 blocks of GEMM1's K, 2 of GEMM2's).
        Case{MOE_ACTIVATION_SILU_MUL, RowLayout::kMasked, 5, "weights_ffma_split"},
        // CUTLASS's tilings, which `auto` no longer takes at these sizes (up to 176
        // rows an expert run the own kernel).
        Case{MOE_ACTIVATION_SILU_MUL, RowLayout::kContiguous, 200, "tokens"},
        Case{MOE_ACTIVATION_RELU2, RowLayout::kContiguous, 70, "weights"},
        Case{MOE_ACTIVATION_SILU_MUL, RowLayout::kContiguous, 200, "tokens_paired"}),
    case_name);

// gemm1_epilogue: fused against separate on the same weights and inputs: the own kernel's GEMM1
// writes the intermediate's codes and scales itself, and they must be the activation kernel's
// bit for bit (the same f32 sums, activation and quantiser), so the layer's output is too.
struct FusedCase {
  moe_activation activation;
  RowLayout layout;
  int64_t tokens;
  const char* tiles;
  bool bias = false, shared = false;
  int64_t hidden = 384, intermediate = 256;
  bool gelu_tanh = true;
};

class DeepGemmFusedGemm1 : public LayerTest, public ::testing::WithParamInterface<FusedCase> {};

TEST_P(DeepGemmFusedGemm1, CodesScalesAndOutputAreTheSeparateActivationsBitForBit) {
  const FusedCase c = GetParam();
  Problem prob;
  moe_problem& raw = prob.raw();
  raw.experts = 12;
  raw.top_k = 3;
  raw.hidden = c.hidden;
  raw.intermediate = c.intermediate;
  raw.format = MOE_FORMAT_FP8_BLOCK;
  raw.input_format = MOE_INPUT_FP8_1X128;
  raw.activation = c.activation;
  raw.activation_alpha = 1.702f;
  raw.activation_limit = 7.0f;
  raw.gelu_tanh = c.gelu_tanh ? 1 : 0;
  raw.expert_bias = c.bias ? 1 : 0;
  raw.shared_intermediate = c.shared ? raw.intermediate : 0;
  raw.max_tokens = 512;
  prob.finalize();
  const moe_problem p = prob.c();
  if (!check_support(p).ok()) GTEST_SKIP() << check_support(p).message;
  const int64_t t_count = c.tokens, k = p.top_k, h = p.hidden, in = p.intermediate;
  const LayerWeights w = random_weights(p, seed_);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  random_routing(t_count, k, p.experts, ids, weights);
  DeviceBuffer<uint16_t> d_hidden(random_bf16(size_t(t_count * h)));
  DeviceBuffer<int32_t> d_ids(ids);
  DeviceBuffer<float> d_weights(weights);

  // Per slot (routed slots, then the shared expert's), the row's codes and scales: the masked
  // layout hands out a group's rows in atomic order, so rows are compared through their slots.
  const int64_t slots = t_count * k + (c.shared ? t_count : 0);
  struct Result {
    std::vector<uint8_t> codes;  // [slots][I]
    std::vector<float> scales;   // [slots][I/128]
    std::vector<uint16_t> out;
    int64_t gemm1_rows_written = 0;  // slots whose f32 intermediate row lost the poison
  };
  auto run = [&](const char* epilogue) {
    const DeviceLayer layer(p, w.view(),
                            {{"layout", row_layout_name(c.layout)},
                             {"gemm_tiles", c.tiles},
                             {"gemm1_epilogue", epilogue}});
    DeviceBuffer<uint8_t> d_ws(layer.workspace_size(t_count));
    d_ws.poison(0xff);  // gemm1_rows_written below reads the poison
    DeviceBuffer<uint16_t> d_out(size_t(t_count * h));
    run_layer(layer, d_hidden, d_ids, d_weights, t_count, k, h, d_ws, d_out);
    const DeviceLayer::Workspace ws = layer.carve(d_ws.get(), t_count, c.layout, nullptr);
    const std::vector<uint8_t> bytes = d_ws.download();
    auto at = [&](const void* ptr) {
      return bytes.data() + (static_cast<const uint8_t*>(ptr) - d_ws.get());
    };
    const int64_t r_max = ws.perm.max_rows;
    std::vector<int32_t> slot_row(static_cast<size_t>(slots));
    std::memcpy(slot_row.data(), at(ws.perm.slot_row), slot_row.size() * sizeof(int32_t));
    Result res;
    for (int64_t i = 0; i < slots; ++i) {
      const int64_t r = slot_row[size_t(i)];
      EXPECT_TRUE(r >= 0 && r < r_max) << epilogue << ": slot " << i << " row " << r;
      if (r < 0 || r >= r_max) return res;
      // The first f32 of the slot's GEMM1 row: 0xffffffff (a NaN) is the poison, which no GEMM
      // of finite inputs writes.
      const uint8_t* g1 = at(ws.gemm1 + r * 2 * in);
      if (!std::all_of(g1, g1 + sizeof(float), [](uint8_t b) { return b == 0xff; }))
        ++res.gemm1_rows_written;
      const uint8_t* row = at(ws.act) + r * in;
      res.codes.insert(res.codes.end(), row, row + in);
      for (int64_t b = 0; b < in / 128; ++b) {
        float s;
        std::memcpy(&s, at(ws.act_scales + b * r_max + r), sizeof s);
        res.scales.push_back(s);
      }
    }
    res.out = d_out.download();
    return res;
  };
  const Result separate = run("separate"), fused = run("fused");
  EXPECT_EQ(separate.gemm1_rows_written, slots) << "the separate run's f32 intermediate";
  EXPECT_EQ(fused.gemm1_rows_written, 0) << "the fused run wrote the f32 intermediate: not fused";
  ASSERT_EQ(separate.codes.size(), size_t(slots * in));
  ASSERT_EQ(fused.codes.size(), separate.codes.size());
  int64_t differ = 0;
  for (size_t i = 0; i < separate.codes.size(); ++i)
    if (fused.codes[i] != separate.codes[i] && differ++ < 5)
      ADD_FAILURE() << "slot " << i / size_t(in) << " column " << i % size_t(in) << ": code "
                    << int(fused.codes[i]) << ", the activation kernel's "
                    << int(separate.codes[i]);
  EXPECT_EQ(differ, 0) << "codes";
  EXPECT_EQ(std::memcmp(fused.scales.data(), separate.scales.data(),
                        separate.scales.size() * sizeof(float)),
            0)
      << "scales";
  EXPECT_EQ(fused.out, separate.out) << "the layer's output";
}

INSTANTIATE_TEST_SUITE_P(
    Layers, DeepGemmFusedGemm1,
    ::testing::Values(
        FusedCase{MOE_ACTIVATION_SILU_MUL, RowLayout::kContiguous, 200, "tokens_ffma"},
        FusedCase{MOE_ACTIVATION_SILU_MUL, RowLayout::kContiguous, 200, "tokens_ffma192"},
        FusedCase{MOE_ACTIVATION_SILU_MUL, RowLayout::kMasked, 33, "tokens_ffma"},
        FusedCase{MOE_ACTIVATION_SWIGLU_OAI, RowLayout::kContiguous, 90, "tokens_ffma", true},
        FusedCase{MOE_ACTIVATION_SILU_MUL_CLAMP, RowLayout::kMasked, 7, "tokens_ffma192"},
        FusedCase{MOE_ACTIVATION_GELU_MUL, RowLayout::kContiguous, 150, "tokens_ffma", false, true},
        FusedCase{MOE_ACTIVATION_SILU_MUL, RowLayout::kContiguous, 64, "auto", true, true},
        FusedCase{MOE_ACTIVATION_GELU_MUL, RowLayout::kMasked, 20, "tokens_ffma", true, false, 384,
                  256, false},
        // Model-like widths: 32 tiles a row block, so each cluster runs several tiles and both
        // exchange slots turn over; K = 1024 runs the stage ring round.
        FusedCase{MOE_ACTIVATION_SILU_MUL, RowLayout::kContiguous, 300, "tokens_ffma", false, false,
                  1024, 2048},
        FusedCase{MOE_ACTIVATION_SWIGLU_OAI, RowLayout::kContiguous, 500, "tokens_ffma192", true,
                  true, 1024, 2048},
        // Ping-pong (K = 1024): every tile solo, taken in turn by the two consumers.
        FusedCase{MOE_ACTIVATION_SILU_MUL, RowLayout::kContiguous, 40, "tokens_ffma", false, false,
                  1024, 2048},
        FusedCase{MOE_ACTIVATION_GELU_MUL, RowLayout::kMasked, 40, "tokens_ffma", true, true, 1024,
                  2048}),
    [](const ::testing::TestParamInfo<FusedCase>& info) {
      const FusedCase& c = info.param;
      const char* act = c.activation == MOE_ACTIVATION_SWIGLU_OAI       ? "SwigluOai"
                        : c.activation == MOE_ACTIVATION_SILU_MUL_CLAMP ? "SiluMulClamp"
                        : c.activation == MOE_ACTIVATION_GELU_MUL       ? "GeluMul"
                                                                        : "SiluMul";
      return std::string(act) + (c.layout == RowLayout::kMasked ? "Masked" : "Contiguous") + "T" +
             std::to_string(c.tokens) +
             (std::string(c.tiles) == "tokens_ffma192" ? "Own192"
              : std::string(c.tiles) == "auto"         ? "Auto"
                                                       : "Own128") +
             (c.bias ? "Bias" : "") + (c.shared ? "Shared" : "") + (c.gelu_tanh ? "" : "Erf") +
             (c.intermediate > 256 ? "Wide" : "");
    });

}  // namespace
}  // namespace moe::deepgemm
