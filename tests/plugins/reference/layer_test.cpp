// The reference layer (docs/design.md §3, §5) on tiny layers whose f64 output is worked out by hand
// here: weights of 0, 1, 2, 0.5, element codes whose values are known, and silu from std::exp.
#include "reference_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/host_tensor.hpp"
#include "moe/sdk/problem.hpp"

namespace {

using moe::HostTensor;
using moe::reference::Layer;

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}

HostTensor bf16(std::vector<int64_t> shape, const std::vector<double>& values) {
  HostTensor t(MOE_DTYPE_BF16, std::move(shape));
  EXPECT_EQ(t.numel(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    t.data<uint16_t>()[i] = moe::float_to_bf16(static_cast<float>(values[i]));
    EXPECT_EQ(moe::bf16_to_float(t.data<uint16_t>()[i]), values[i]) << values[i] << " not bf16";
  }
  return t;
}

// f32, i32 or raw codes (e4m3, ue8m0, e2m1x2 bytes), copied as given.
template <class T>
HostTensor filled(moe_dtype dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  HostTensor t(dtype, std::move(shape));
  EXPECT_EQ(t.bytes(), values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.raw(), values.data(), t.bytes());
  return t;
}

HostTensor f32(std::vector<int64_t> shape, const std::vector<float>& v) {
  return filled(MOE_DTYPE_F32, std::move(shape), v);
}
HostTensor codes(moe_dtype dtype, std::vector<int64_t> shape, const std::vector<uint8_t>& v) {
  return filled(dtype, std::move(shape), v);
}

// Canonical weights; a tensor left default-constructed is absent (a zeroed moe_tensor).
struct Weights {
  HostTensor w13, w13_scale, w13_scale_2, w2, w2_scale, w2_scale_2, b13, b2, a13_scale, a2_scale;
  HostTensor shared_w13, shared_w2, sink_w13, sink_w2;

  moe_weights view() const {
    moe_weights w{};
    w.struct_size = sizeof(moe_weights);
    w.w13 = w13.view(), w.w13_scale = w13_scale.view(), w.w13_scale_2 = w13_scale_2.view();
    w.w2 = w2.view(), w.w2_scale = w2_scale.view(), w.w2_scale_2 = w2_scale_2.view();
    w.b13 = b13.view(), w.b2 = b2.view();
    w.a13_scale = a13_scale.view(), w.a2_scale = a2_scale.view();
    w.shared_w13 = shared_w13.view(), w.shared_w2 = shared_w2.view();
    w.sink_w13 = sink_w13.view(), w.sink_w2 = sink_w2.view();
    return w;
  }
};

moe_problem problem(int64_t experts, int64_t top_k, int64_t hidden, int64_t intermediate) {
  moe_problem p = moe::default_problem();
  p.experts = experts, p.top_k = top_k, p.hidden = hidden, p.intermediate = intermediate;
  return p;
}

moe_problem ready(moe_problem p) {
  moe::normalize_problem(p);
  moe::validate_problem(p);
  return p;
}

// Up to three bf16 silu_mul experts, H=2, I=1 (w13 rows [gate; up], w2 one column):
//   e0: g=[1, 0]  u=[0, 1]     w2=[1, 0]
//   e1: g=[0, 1]  u=[1, 0]     w2=[0, 1]
//   e2: g=[1, 1]  u=[.5, -1]   w2=[2, -.5]
Weights small_weights(int64_t experts) {
  const std::vector<double> w13{1, 0, 0, 1, /**/ 0, 1, 1, 0, /**/ 1, 1, 0.5, -1};
  const std::vector<double> w2{1, 0, /**/ 0, 1, /**/ 2, -0.5};
  Weights w;
  w.w13 = bf16({experts, 2, 2}, {w13.begin(), w13.begin() + experts * 4});
  w.w2 = bf16({experts, 2, 1}, {w2.begin(), w2.begin() + experts * 2});
  return w;
}

// fp8_tensor experts: e4m3 codes, w13 [E, rows, H] and w2 [E, H, I], one f32 scale per expert.
Weights fp8_weights(std::vector<int64_t> w13_shape, const std::vector<uint8_t>& w13,
                    const std::vector<float>& w13_scale, std::vector<int64_t> w2_shape,
                    const std::vector<uint8_t>& w2, const std::vector<float>& w2_scale) {
  Weights w;
  w.w13 = codes(MOE_DTYPE_E4M3, std::move(w13_shape), w13);
  w.w13_scale = f32({static_cast<int64_t>(w13_scale.size())}, w13_scale);
  w.w2 = codes(MOE_DTYPE_E4M3, std::move(w2_shape), w2);
  w.w2_scale = f32({static_cast<int64_t>(w2_scale.size())}, w2_scale);
  return w;
}

struct Batch {
  HostTensor hidden, ids, weights, output;
  moe_run_args args() const {
    moe_run_args a{};
    a.struct_size = sizeof(moe_run_args);
    a.hidden = hidden.view(), a.topk_ids = ids.view(), a.topk_weights = weights.view();
    a.output = output.view();
    return a;
  }
};

// hidden [T, H] (values exact in bf16), ids and weights [T, k + S]; the output starts as NaN.
Batch batch(const moe_problem& p, const std::vector<double>& hidden,
            const std::vector<int32_t>& ids, const std::vector<float>& weights,
            moe_dtype out = MOE_DTYPE_F64) {
  const int64_t tokens = static_cast<int64_t>(hidden.size()) / p.hidden;
  const int64_t width = moe::topk_width(p);
  Batch b{bf16({tokens, p.hidden}, hidden), filled(MOE_DTYPE_I32, {tokens, width}, ids),
          f32({tokens, width}, weights), HostTensor(out, {tokens, p.hidden})};
  if (b.output.bytes() > 0) b.output.fill_bytes(0xFF);  // NaN in f64 and bf16
  return b;
}

std::vector<double> run(const Layer& layer, const moe_problem& p, const std::vector<double>& hidden,
                        const std::vector<int32_t>& ids, const std::vector<float>& weights) {
  const Batch b = batch(p, hidden, ids, weights);
  layer.run(b.args());
  return {b.output.data<double>(), b.output.data<double>() + b.output.numel()};
}

void expect_row(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << "element " << i;
}

// Runs fn and expects a moe::Error of `status` whose message holds every one of `parts`.
template <class Fn>
void expect_error(Fn&& fn, moe_status status, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const moe::Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.status(), status) << message;
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "no \"" << part << "\" in: " << message;
  }
}

TEST(ReferenceLayer, OneTokenOneExpertIsWeightTimesW2SiluGateTimesUp) {
  const moe_problem p = ready(problem(3, 1, 2, 1));
  const Layer layer(p, small_weights(3).view());
  // x = [1.5, .25] to e2 with w = .5: g = 1.75, u = .75 - .25 = .5, y = [2, -.5] * silu(g) * u
  const double a = silu(1.75) * 0.5;
  expect_row(run(layer, p, {1.5, 0.25}, {2}, {0.5f}), {0.5 * 2 * a, 0.5 * -0.5 * a});
}

TEST(ReferenceLayer, TopTwoIsTheWeightedSumAndSlotOrderDoesNotMatter) {
  const moe_problem p = ready(problem(3, 2, 2, 1));
  const Layer layer(p, small_weights(3).view());
  // x = [1, 2]. e0: g = 1, u = 2 -> y0 = [2 silu(1), 0]. e2: g = 3, u = -1.5 -> y2 = [2, -.5] a2.
  const double a0 = 2 * silu(1.0), a2 = -1.5 * silu(3.0);
  const auto out = run(layer, p, {1, 2, /**/ 1, 2}, {2, 0, /**/ 0, 2}, {0.5f, 2, /**/ 2, 0.5f});
  expect_row({out[0], out[1]}, {0.5 * 2 * a2 + 2 * a0, 0.5 * -0.5 * a2});
  EXPECT_EQ(out[0], out[2]);
  EXPECT_EQ(out[1], out[3]);
}

TEST(ReferenceLayer, TokenWithoutExpertsGetsAZeroRow) {
  const moe_problem p = ready(problem(3, 2, 2, 1));
  const Layer layer(p, small_weights(3).view());
  const auto out = run(layer, p, {1, 2, /**/ 1, 2}, {-1, -1, /**/ 1, -1}, {1, 1, /**/ 1, 1});
  // Token 0: zeros (written over the NaN poison). Token 1: e1, g = 2, u = 1 -> [0, silu(2)].
  expect_row(out, {0, 0, 0, silu(2.0)});
}

TEST(ReferenceLayer, ZeroTokensRunsAndWritesNothing) {
  const moe_problem p = ready(problem(3, 2, 2, 1));
  const Layer layer(p, small_weights(3).view());
  const Batch b = batch(p, {}, {}, {});  // hidden [0, 2], ids and weights [0, 2]
  std::vector<double> poison(4, 123.0);
  moe_run_args a = b.args();
  a.output = moe::make_view(poison.data(), MOE_DTYPE_F64, {0, 2});
  EXPECT_NO_THROW(layer.run(a));
  EXPECT_EQ(poison, std::vector<double>(4, 123.0));
}

TEST(ReferenceLayer, ExpertBiasesAreAddedAfterEachGemmInsideTheWeightedExpert) {
  moe_problem raw = problem(3, 1, 2, 1);
  raw.expert_bias = 1;
  const moe_problem p = ready(raw);
  Weights w = small_weights(3);
  w.b13 = bf16({3, 2}, {3, 3, /**/ -1, 0.5, /**/ -3, -3});  // [E, 2I]: [gate bias, up bias]
  w.b2 = f32({3, 2}, {7, 7, /**/ 0.25f, -1, /**/ -7, -7});  // [E, H]
  const Layer layer(p, w.view());
  // x = [1, 2] to e1 with w = 2: g = 2 - 1 = 1, u = 1 + .5 = 1.5, y = [0, 1] a + [.25, -1].
  const double a = silu(1.0) * 1.5;
  expect_row(run(layer, p, {1, 2}, {1}, {2}), {2 * 0.25, 2 * (a - 1)});
}

// e4m3 codes: 0x38 = 1, 0x40 = 2, 0x30 = .5, 0x3C = 1.5, 0x48 = 4, 0xB8 = -1, 0x00 = 0.
TEST(ReferenceLayer, Fp8TensorWeightsAreE4m3TimesThePerExpertScale) {
  moe_problem raw = problem(2, 1, 2, 1);
  raw.format = MOE_FORMAT_FP8_TENSOR;
  raw.input_format = MOE_INPUT_BF16;
  const moe_problem p = ready(raw);
  // w13 e0 (scale 1): g=[1, 0] u=[0, 1]; e1 (scale .5): g=[2, .5]*.5=[1, .25] u=[-1, 1.5]*.5
  // = [-.5, .75]. w2 e0 (scale 1): [1, 1]; e1 (scale 4): [2, .5] * 4 = [8, 2].
  const Weights w = fp8_weights({2, 2, 2}, {0x38, 0, 0, 0x38, /**/ 0x40, 0x30, 0xB8, 0x3C},
                                {1, 0.5f}, {2, 2, 1}, {0x38, 0x38, /**/ 0x40, 0x30}, {1, 4});
  const Layer layer(p, w.view());
  // x = [2, 4]. e1: g = 2 + 1 = 3, u = -1 + 3 = 2. e0: g = 2, u = 4.
  const auto out = run(layer, p, {2, 4, /**/ 2, 4}, {1, /**/ 0}, {1, /**/ 1});
  const double a1 = silu(3.0) * 2, a0 = silu(2.0) * 4;
  expect_row(out, {8 * a1, 2 * a1, /**/ a0, a0});
}

TEST(ReferenceLayer, Fp8TensorStaticRoundsInputsOnTheScaleGrid) {
  moe_problem raw = problem(2, 1, 2, 1);
  raw.format = MOE_FORMAT_FP8_TENSOR;
  raw.input_format = MOE_INPUT_FP8_TENSOR_STATIC;
  raw.activation = MOE_ACTIVATION_RELU2;  // the intermediate stays rational: exact by hand
  const moe_problem p = ready(raw);
  // e0: w13 [1, 0] (reads x[0]), w2 [1, 2].
  Weights w = fp8_weights({2, 1, 2}, {0x38, 0, /**/ 0, 0x38}, {1, 1}, {2, 2, 1},
                          {0x38, 0x40, /**/ 0x38, 0x38}, {1, 1});
  w.a13_scale = f32({1}, {0.5f});
  w.a2_scale = f32({1}, {1});
  const Layer layer(p, w.view());
  const auto out = run(layer, p, {1.15625, -0.3125, /**/ 1.5, 0}, {0, /**/ 0}, {1, /**/ 1});
  // Token 0: 1.15625 / .5 = 2.3125, e4m3 steps by .25 in [2, 4): 2.25, so x = 1.125 (unrounded
  // the output would be 1.15625^2 = 1.337 -> 1.375). relu2: 1.265625; on the a2 grid (step .125
  // in [1, 2)): 1.25. Token 1: 1.5 / .5 = 3 is exact, relu2 = 2.25 is exact.
  expect_row(out, {1.25, 2.5, /**/ 2.25, 4.5});
}

// Two fp4 experts, H = 2, I = 2: w13 [2, 4, 1] bytes, w2 [2, 2, 1] bytes, one scale per row.
// Expert 0 is all 0x22 (1, 1); expert 1's bytes are given, low nibble = element 0.
Weights fp4_weights(moe_dtype scale_dtype, const std::vector<uint8_t>& w13_e1,
                    const std::vector<uint8_t>& w13_scales, const std::vector<uint8_t>& w2_e1,
                    const std::vector<uint8_t>& w2_scales) {
  Weights w;
  w.w13 = codes(MOE_DTYPE_E2M1X2, {2, 4, 1},
                {0x22, 0x22, 0x22, 0x22, w13_e1[0], w13_e1[1], w13_e1[2], w13_e1[3]});
  w.w13_scale = codes(scale_dtype, {2, 4, 1}, w13_scales);
  w.w2 = codes(MOE_DTYPE_E2M1X2, {2, 2, 1}, {0x22, 0x22, w2_e1[0], w2_e1[1]});
  w.w2_scale = codes(scale_dtype, {2, 2, 1}, w2_scales);
  return w;
}

// e2m1 nibbles: 0x0 = 0, 0x1 = .5, 0x2 = 1, 0x3 = 1.5, 0x4 = 2, 0x5 = 3, 0x6 = 4, 0x7 = 6,
// bit 3 = sign. Bytes: 0x52 = (1, 3), 0xA4 = (2, -1), 0x17 = (6, .5), 0x30 = (0, 1.5),
// 0x26 = (4, 1), 0xC2 = (1, -2).
TEST(ReferenceLayer, Mxfp4WeightsArePackedNibblesTimesUe8m0RowScales) {
  moe_problem raw = problem(2, 1, 2, 2);
  raw.format = MOE_FORMAT_MXFP4;
  const moe_problem p = ready(raw);
  // ue8m0: 125 = .25, 126 = .5, 127 = 1, 128 = 2. Expert 1 dequantised:
  //   g0 = (1, 3) * .5 = [.5, 1.5]   g1 = (2, -1) * 1 = [2, -1]
  //   u0 = (6, .5) * 2 = [12, 1]     u1 = (0, 1.5) * .25 = [0, .375]
  //   w2: (4, 1) * .5 = [2, .5]; (1, -2) * 1 = [1, -2]
  const Weights w = fp4_weights(MOE_DTYPE_UE8M0, {0x52, 0xA4, 0x17, 0x30},
                                {127, 127, 127, 127, /**/ 126, 127, 128, 125}, {0x26, 0xC2},
                                {127, 127, /**/ 126, 127});
  const Layer layer(p, w.view());
  // x = [1, .5]: g = [1.25, 1.5], u = [12.5, .1875]
  const double a0 = silu(1.25) * 12.5, a1 = silu(1.5) * 0.1875;
  expect_row(run(layer, p, {1, 0.5}, {1}, {1}), {2 * a0 + 0.5 * a1, a0 - 2 * a1});
}

TEST(ReferenceLayer, Nvfp4WeightsArePackedNibblesTimesE4m3BlockScaleTimesScale2) {
  moe_problem raw = problem(2, 1, 2, 2);
  raw.format = MOE_FORMAT_NVFP4;
  const moe_problem p = ready(raw);
  // Expert 1, w13 scale_2 = .25: g0 = (1, 3) * 2 * .25 = [.5, 1.5]; g1 = (2, -1) * 4 * .25 =
  // [2, -1]; u0 = (6, .5) * 1 * .25 = [1.5, .125]; u1 = (0, 1.5) * 1.5 * .25 = [0, .5625].
  // w2 scale_2 = 2: (4, 1) * .5 * 2 = [4, 1]; (1, -2) * 1 * 2 = [2, -4].
  Weights w = fp4_weights(MOE_DTYPE_E4M3, {0x52, 0xA4, 0x17, 0x30},
                          {0x38, 0x38, 0x38, 0x38, /**/ 0x40, 0x48, 0x38, 0x3C}, {0x26, 0xC2},
                          {0x38, 0x38, /**/ 0x30, 0x38});
  w.w13_scale_2 = f32({2}, {1, 0.25f});
  w.w2_scale_2 = f32({2}, {1, 2});
  const Layer layer(p, w.view());
  // x = [1, .5]: g = [1.25, 1.5], u = [1.5625, .28125]
  const double a0 = silu(1.25) * 1.5625, a1 = silu(1.5) * 0.28125;
  expect_row(run(layer, p, {1, 0.5}, {1}, {1}), {4 * a0 + a1, 2 * a0 - 4 * a1});
}

// The oracle refuses the scales every backend refuses, naming the tensor and the expert: a NaN,
// zero or negative f32 scale, the ue8m0 NaN code, a NaN or negative e4m3 block scale. They gave
// NaN, zero or sign-flipped weights that a comparison then blamed on the backend.
TEST(ReferenceLayer, CorruptWeightScalesAreRefusedNamingTheTensor) {
  moe_problem raw = problem(2, 1, 2, 1);
  raw.format = MOE_FORMAT_FP8_TENSOR;
  raw.input_format = MOE_INPUT_BF16;
  const moe_problem p8 = ready(raw);
  for (const float bad : {0.0f, -1.0f, std::nanf("")}) {
    const Weights w = fp8_weights({2, 2, 2}, {0x38, 0, 0, 0x38, /**/ 0x40, 0x30, 0xB8, 0x3C},
                                  {1, 0.5f}, {2, 2, 1}, {0x38, 0x38, /**/ 0x40, 0x30}, {1, bad});
    expect_error([&] { Layer(p8, w.view()); }, MOE_STATUS_INVALID_ARGUMENT,
                 {"w2_scale[1][0] =", "is not a finite positive scale"});
  }
  raw = problem(2, 1, 2, 2);
  raw.format = MOE_FORMAT_NVFP4;
  const moe_problem pn = ready(raw);
  for (const uint8_t code : {uint8_t(0x7f), uint8_t(0xb8)}) {
    Weights w = fp4_weights(MOE_DTYPE_E4M3, {0x52, 0xA4, 0x17, 0x30},
                            {0x38, 0x38, 0x38, 0x38, /**/ 0x40, code, 0x38, 0x3C}, {0x26, 0xC2},
                            {0x38, 0x38, /**/ 0x30, 0x38});
    w.w13_scale_2 = f32({2}, {1, 0.25f});
    w.w2_scale_2 = f32({2}, {1, 2});
    expect_error([&] { Layer(pn, w.view()); }, MOE_STATUS_INVALID_ARGUMENT,
                 {"w13_scale[1][1] =", "is not a block scale (NaN or negative)"});
  }
}

// fp8_block scales below 1e-10 are raised to it, as every backend raises them (docs/design.md
// §6): a block scale of 1e-12 gives the output of 1e-10, and one above the floor stays its own.
TEST(ReferenceLayer, Fp8BlockScalesBelowTheFloorAreRaisedToIt) {
  moe_problem raw = problem(1, 1, 128, 128);
  raw.format = MOE_FORMAT_FP8_BLOCK;
  const moe_problem p = ready(raw);
  auto output_with_w2_scale = [&](float s) {
    Weights w;
    w.w13 = codes(MOE_DTYPE_E4M3, {1, 256, 128}, std::vector<uint8_t>(256 * 128, 0x38));  // 1.0
    w.w13_scale = f32({1, 2, 1}, {1.0f / 64, 1.0f / 64});
    w.w2 = codes(MOE_DTYPE_E4M3, {1, 128, 128}, std::vector<uint8_t>(128 * 128, 0x38));
    w.w2_scale = f32({1, 1, 1}, {s});
    const Layer layer(p, w.view());
    std::vector<double> hidden(128);
    for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = 0.25 * double(i % 5);
    return run(layer, p, hidden, {0}, {1.0f});
  };
  const std::vector<double> floor = output_with_w2_scale(1e-10f);
  EXPECT_NE(floor[0], 0.0);
  EXPECT_EQ(output_with_w2_scale(1e-12f), floor);
  EXPECT_NE(output_with_w2_scale(1e-9f), floor);
}

TEST(ReferenceLayer, RoundRobinEpSkipsExpertsOfOtherRanks) {
  moe::Problem ep;
  ep.raw() = problem(4, 2, 2, 1);
  ep.raw().ep_placement = MOE_EP_ROUND_ROBIN;
  ep.raw().ep_size = 2;
  ep.raw().ep_rank = 1;
  ep.finalize();
  const moe_problem p = ep.c();
  moe::validate_problem(p);
  ASSERT_EQ(p.local_experts, 2);
  // Local 0 = global 1 (small e0), local 1 = global 3 (small e1).
  const Layer layer(p, small_weights(2).view());
  // x = [1, 2]: global 1 -> [2 silu(1), 0]; global 3 -> [0, silu(2)]; globals 0 and 2 elsewhere.
  const auto out = run(layer, p, {1, 2, /**/ 1, 2, /**/ 1, 2}, {1, 2, /**/ 0, 3, /**/ 0, 2},
                       {1, 1, /**/ 1, 0.5f, /**/ 1, 1});
  expect_row(out, {2 * silu(1.0), 0, /**/ 0, 0.5 * silu(2.0), /**/ 0, 0});
}

// fp8_tensor relu2 routed experts with static input scales 1 (x = 1.21875 rounds to 1.25 on
// the e4m3 grid), and one bf16 silu_mul sink expert: gate = [0, 1], up = [1, 0], w2 = [1, 2].
moe_problem sink_problem() {
  moe_problem raw = problem(2, 1, 2, 1);
  raw.format = MOE_FORMAT_FP8_TENSOR;
  raw.input_format = MOE_INPUT_FP8_TENSOR_STATIC;
  raw.activation = MOE_ACTIVATION_RELU2;
  raw.routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  raw.sink_experts = 1;
  raw.sink_intermediate = 1;
  return ready(raw);
}

Weights sink_weights() {
  // e0: w13 [0, 1] (reads x[1]), w2 [1, 2].
  Weights w = fp8_weights({2, 1, 2}, {0, 0x38, /**/ 0x38, 0}, {1, 1}, {2, 2, 1},
                          {0x38, 0x40, /**/ 0x38, 0x38}, {1, 1});
  w.a13_scale = f32({1}, {1});
  w.a2_scale = f32({1}, {1});
  w.sink_w13 = bf16({1, 2, 2}, {0, 1, /**/ 1, 0});
  w.sink_w2 = bf16({1, 2, 1}, {1, 2});
  return w;
}

TEST(ReferenceLayer, SinkAddsGammaTimesSiluMulOfUnquantisedHidden) {
  const moe_problem p = sink_problem();
  const Layer layer(p, sink_weights().view());
  // x = [1, 1.21875]. Sink (bf16 x): g = 1.21875, u = 1 -> s = silu(1.21875), y = [1, 2] s.
  // Token 0: sink only, gamma .5. Token 1: e0 (sees x[1] = 1.25, relu2 1.5625 -> 1.5 on the a2
  // grid, a tie to even) and the sink with gamma .25. Sink column id = E = 2.
  const auto out =
      run(layer, p, {1, 1.21875, /**/ 1, 1.21875}, {-1, 2, /**/ 0, 2}, {0, 0.5f, /**/ 1, 0.25f});
  const double s = silu(1.21875);
  expect_row(out, {0.5 * s, 0.5 * 2 * s, /**/ 1.5 + 0.25 * s, 3 + 0.25 * 2 * s});
}

TEST(ReferenceLayer, SharedExpertAddsWithWeightOneToEveryToken) {
  moe_problem raw = problem(2, 1, 2, 1);
  raw.shared_intermediate = 1;
  const moe_problem p = ready(raw);
  Weights w = small_weights(2);
  w.shared_w13 = bf16({2, 2}, {1, 1, /**/ 1, 0});  // g = x0 + x1, u = x0
  w.shared_w2 = bf16({2, 1}, {0.5, 1});
  const Layer layer(p, w.view());
  // Token 0 x = [1, 2], e0 with w = .5: .5 [2 silu(1), 0] + shared g = 3, u = 1.
  // Token 1 x = [.5, -1], no routed expert: shared only, g = -.5, u = .5.
  const auto out = run(layer, p, {1, 2, /**/ 0.5, -1}, {0, /**/ -1}, {0.5f, /**/ 1});
  const double s0 = silu(3.0), s1 = silu(-0.5) * 0.5;
  expect_row(out, {silu(1.0) + 0.5 * s0, s0, /**/ 0.5 * s1, s1});
}

TEST(ReferenceLayer, TopkIdOutsideTheExpertRangeThrowsNamingIt) {
  const moe_problem p = ready(problem(3, 2, 2, 1));
  const Layer layer(p, small_weights(3).view());
  for (int32_t bad : {3, -2, 100}) {
    const Batch b = batch(p, {1, 2}, {0, bad}, {1, 1});
    expect_error([&] { layer.run(b.args()); }, MOE_STATUS_INVALID_ARGUMENT,
                 {"topk_ids[0][1]=" + std::to_string(bad)});
  }
}

TEST(ReferenceLayer, SinkColumnHoldingAnotherIdThrows) {
  const moe_problem p = sink_problem();
  const Layer layer(p, sink_weights().view());
  const Batch b = batch(p, {1, 1}, {0, 1}, {1, 1});  // sink column must hold 2 or -1
  expect_error([&] { layer.run(b.args()); }, MOE_STATUS_INVALID_ARGUMENT,
               {"topk_ids[0][1]=1", "sink"});
}

TEST(ReferenceLayer, MoreTokensThanMaxTokensIsCapacityExceededNamingBoth) {
  moe_problem raw = problem(3, 1, 2, 1);
  raw.max_tokens = 2;
  const moe_problem p = ready(raw);
  const Layer layer(p, small_weights(3).view());
  const Batch b = batch(p, {1, 2, 1, 2, 1, 2}, {0, 1, 2}, {1, 1, 1});
  expect_error([&] { layer.run(b.args()); }, MOE_STATUS_CAPACITY_EXCEEDED,
               {"3 tokens", "max_tokens=2"});
}

TEST(ReferenceLayer, HiddenOfWrongWidthIsShapeMismatchNamingHidden) {
  const moe_problem p = ready(problem(3, 1, 2, 1));
  const Layer layer(p, small_weights(3).view());
  Batch b = batch(p, {1, 2}, {0}, {1});
  b.hidden = bf16({1, 3}, {1, 2, 3});
  expect_error([&] { layer.run(b.args()); }, MOE_STATUS_SHAPE_MISMATCH, {"hidden"});
}

TEST(ReferenceLayer, W13OfWrongShapeIsRefusedAtConstructionNamingW13) {
  const moe_problem p = ready(problem(3, 1, 2, 1));
  Weights w = small_weights(3);
  w.w13 = bf16({3, 2, 3}, std::vector<double>(18, 1.0));  // H = 3, the problem says 2
  expect_error([&] { Layer layer(p, w.view()); }, MOE_STATUS_SHAPE_MISMATCH, {"w13"});
}

// Rounds a (normal, finite) double to the nearest bf16 value, ties to even, in one step.
double round_to_bf16(double v) {
  int exponent = 0;
  const double m = std::frexp(v, &exponent);  // v = m 2^exponent, |m| in [.5, 1)
  return std::ldexp(std::nearbyint(std::ldexp(m, 8)), exponent - 8);
}

TEST(ReferenceLayer, Bf16OutputIsTheF64ResultRoundedToBf16) {
  const moe_problem p = ready(problem(3, 2, 2, 1));
  const Layer layer(p, small_weights(3).view());
  const std::vector<double> hidden{1, 2, /**/ 1.5, 0.25};
  const std::vector<int32_t> ids{2, 0, /**/ 2, -1};
  const std::vector<float> weights{0.5f, 2, /**/ 0.5f, 1};
  const Batch b = batch(p, hidden, ids, weights, MOE_DTYPE_BF16);
  layer.run(b.args());
  const double a0 = 2 * silu(1.0), a2 = -1.5 * silu(3.0), a = silu(1.75) * 0.5;
  const std::vector<double> want{a2 + 2 * a0, -0.25 * a2, /**/ a, -0.25 * a};
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(moe::bf16_to_float(b.output.data<uint16_t>()[i]), round_to_bf16(want[i]))
        << "element " << i << " f64 " << want[i];
}

// Rounding f64 -> f32 -> bf16 would turn 1 + 2^-8 + 2^-30 into the f32 1 + 2^-8, a bf16 tie
// that goes to even (1.0); rounded once from the double it is 1 + 2^-7.
TEST(ReferenceLayer, Bf16OutputRoundsOnceNotThroughF32) {
  moe_problem raw = problem(2, 2, 2, 1);
  raw.activation = MOE_ACTIVATION_RELU2;
  const moe_problem p = ready(raw);
  Weights w;
  w.w13 = bf16({2, 1, 2}, {1, 0, /**/ 1, 0});  // both experts: relu(x0)^2 = 1 ...
  w.w2 = bf16({2, 2, 1}, {1, 0, /**/ 1, 0});   // ... into output column 0
  const Layer layer(p, w.view());
  const float w_a = 1.0f + std::ldexp(1.0f, -8), w_b = std::ldexp(1.0f, -30);
  const Batch b = batch(p, {1, 0}, {0, 1}, {w_a, w_b}, MOE_DTYPE_BF16);
  layer.run(b.args());
  EXPECT_EQ(moe::bf16_to_float(b.output.data<uint16_t>()[0]), 1.0 + std::ldexp(1.0, -7));
}

}  // namespace
