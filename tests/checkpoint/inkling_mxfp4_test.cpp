// What only the Quark MXFP4 release of the inkling convention has: packed e2m1 routed weights,
// ue8m0 scales kept flat as [R*2I, H/32] and [R*H, I/32] whose rows alternate gate/up like the
// weights', and the activation amaxes experts.w13_weight.input_amax / w2_weight.input_amax. A
// checkpoint built here byte by byte (not by the exporter) pins which stored row lands where;
// every malformed tensor is refused naming it. Sinks stay bf16, and a file may hold bf16 layers
// (the first MoE layer) beside MXFP4 ones.
#include <cmath>
#include <filesystem>
#include <limits>

#include "../support/test_env.hpp"
#include "moe/sdk/formats.hpp"

namespace moe::test {
namespace {

constexpr int64_t kR = 4, kS = 1, kH = 64, kI = 32, kIs = 32;

Problem mxfp4_problem(moe_input_format input = MOE_INPUT_DEFAULT,
                      moe_format format = MOE_FORMAT_MXFP4) {
  Problem p;
  moe_problem& r = p.raw();
  r.experts = kR;
  r.top_k = 2;
  r.hidden = kH;
  r.intermediate = kI;
  r.format = format;
  r.input_format = input;
  r.activation = MOE_ACTIVATION_SILU_MUL;
  r.routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  r.routing_bias = 1;
  r.sink_experts = kS;
  r.sink_intermediate = kIs;
  r.global_scale = 1.0f;
  p.finalize();
  validate_problem(p.c());
  return p;
}

// Bytes that differ from row to row: any byte is a pair of e2m1 codes.
HostTensor bytes(std::vector<int64_t> shape, uint32_t salt) {
  HostTensor t(MOE_DTYPE_U8, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<uint8_t>()[i] = uint8_t((uint32_t(i) * 2654435761u + salt) >> 24);
  return t;
}

// ue8m0 codes 2^-10 .. 2^2, never the NaN code 0xff.
HostTensor scale_codes(std::vector<int64_t> shape, uint32_t salt) {
  HostTensor t(MOE_DTYPE_U8, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<uint8_t>()[i] = uint8_t(117 + (uint32_t(i) * 7 + salt) % 13);
  return t;
}

HostTensor zeros(moe_dtype dtype, std::vector<int64_t> shape) {
  HostTensor t(dtype, std::move(shape));
  t.fill_bytes(0);
  return t;
}

HostTensor values(std::vector<float> v) {
  HostTensor t(MOE_DTYPE_F32, {int64_t(v.size())});
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// A Quark MXFP4 inkling layer under prefix "m.", every tensor written here.
std::vector<NamedTensor> quark_layer() {
  return {{"m.experts.w13_weight", bytes({kR, 2 * kI, kH / 2}, 1)},
          {"m.experts.w13_weight_scale", scale_codes({kR * 2 * kI, kH / 32}, 2)},
          {"m.experts.w2_weight", bytes({kR, kH, kI / 2}, 3)},
          {"m.experts.w2_weight_scale", scale_codes({kR * kH, kI / 32}, 4)},
          {"m.experts.w13_weight.input_amax", values({2688.0f})},
          {"m.experts.w2_weight.input_amax", values({448.0f, 896.0f, 224.0f, 448.0f})},
          {"m.shared_experts.shared_w13_weight", zeros(MOE_DTYPE_BF16, {kS, 2 * kIs, kH})},
          {"m.shared_experts.shared_w2_weight", zeros(MOE_DTYPE_BF16, {kS, kH, kIs})},
          {"m.gate.weight", zeros(MOE_DTYPE_BF16, {kR + kS, kH})},
          {"m.gate.bias", zeros(MOE_DTYPE_F32, {kR})},
          {"m.gate.global_scale", values({1.0f})}};
}

const HostTensor& tensor(const std::vector<NamedTensor>& ts, const std::string& name) {
  for (const auto& t : ts)
    if (t.name == name) return t.tensor;
  throw std::runtime_error("no tensor " + name);
}

std::vector<NamedTensor> replaced(const std::string& name, HostTensor t) {
  std::vector<NamedTensor> ts = quark_layer();
  for (auto& x : ts)
    if (x.name == name) x.tensor = std::move(t);
  return ts;
}

LayerCheckpoint load(const std::string& file, const std::vector<NamedTensor>& ts,
                     const moe_problem& p) {
  const CheckpointSpec spec{
      (std::filesystem::path(testing::TempDir()) / (file + ".safetensors")).string(),
      "inkling",
      "m",
      0,
      false,
      1,
      0};
  write_safetensors(spec.path, ts);
  return load_layer(Checkpoint::open(spec.path), spec, p);
}

void expect_refused(const std::string& file, const std::vector<NamedTensor>& ts,
                    const moe_problem& p, moe_status status,
                    std::initializer_list<std::string> parts) {
  expect_error([&] { load(file, ts, p); }, status, parts);
}

// Canonical w13 row r (gate rows first, then up) comes from stored row 2r or 2(r - I) + 1.
int64_t stored_row(int64_t r) {
  return r < kI ? 2 * r : 2 * (r - kI) + 1;
}

void expect_row(const HostTensor& got, int64_t got_row, const HostTensor& stored,
                int64_t stored_row, int64_t row_bytes, const std::string& what) {
  EXPECT_EQ(
      std::memcmp(static_cast<const uint8_t*>(got.raw()) + got_row * row_bytes,
                  static_cast<const uint8_t*>(stored.raw()) + stored_row * row_bytes, row_bytes),
      0)
      << what << " row " << got_row;
}

void expect_quark_layer_read(const LayerWeights& w, const std::vector<NamedTensor>& ts) {
  const HostTensor& w13 = tensor(ts, "m.experts.w13_weight");
  const HostTensor& s13 = tensor(ts, "m.experts.w13_weight_scale");
  ASSERT_EQ(w.w13.shape(), (std::vector<int64_t>{kR, 2 * kI, kH / 2}));
  ASSERT_EQ(w.w13_scale.shape(), (std::vector<int64_t>{kR, 2 * kI, kH / 32}));
  for (int64_t e = 0; e < kR; ++e)
    for (int64_t r = 0; r < 2 * kI; ++r) {
      // Flat scale row e * 2I + j belongs to stored row j of expert e.
      expect_row(w.w13, e * 2 * kI + r, w13, e * 2 * kI + stored_row(r), kH / 2, "w13");
      expect_row(w.w13_scale, e * 2 * kI + r, s13, e * 2 * kI + stored_row(r), kH / 32,
                 "w13_scale");
    }
  for (int64_t row = 0; row < kR * kH; ++row) {
    expect_row(w.w2, row, tensor(ts, "m.experts.w2_weight"), row, kI / 2, "w2");
    expect_row(w.w2_scale, row, tensor(ts, "m.experts.w2_weight_scale"), row, kI / 32, "w2_scale");
  }
}

TEST(InklingMxfp4, WeightAndScaleRowsAreDeinterleavedTogetherAndFlatScalesSplitPerExpert) {
  const Problem problem = mxfp4_problem();
  const std::vector<NamedTensor> ts = quark_layer();
  const LayerCheckpoint got = load("quark_by_hand", ts, problem.c());
  expect_quark_layer_read(got.weights, ts);
  EXPECT_EQ(got.weights.sink_w13.dtype(), MOE_DTYPE_BF16);  // sinks stay bf16
  EXPECT_TRUE(got.conversions.empty());
}

TEST(InklingMxfp4, StackedScalesWithTheirExpertDimensionAreReadAlike) {
  const Problem problem = mxfp4_problem();
  std::vector<NamedTensor> ts = quark_layer();
  for (auto& t : ts)
    if (t.name.ends_with("_weight_scale")) {
      const auto flat = t.tensor.shape();
      HostTensor stacked(MOE_DTYPE_U8, {kR, flat[0] / kR, flat[1]});
      std::memcpy(stacked.raw(), t.tensor.raw(), t.tensor.bytes());
      t.tensor = stacked;
    }
  expect_quark_layer_read(load("quark_stacked_scales", ts, problem.c()).weights, quark_layer());
}

TEST(InklingMxfp4, FlatScaleRowsNotDivisibleByTheExpertCountAreRefusedNamingTheTensor) {
  const Problem problem = mxfp4_problem();
  expect_refused("quark_flat_w13",
                 replaced("m.experts.w13_weight_scale", scale_codes({kR * 2 * kI - 1, 2}, 0)),
                 problem.c(), MOE_STATUS_SHAPE_MISMATCH,
                 {"checkpoint tensor 'm.experts.w13_weight_scale' stores scales flat as [255, 2]",
                  "255 rows are not divisible by the 4 experts"});
  expect_refused("quark_flat_w2",
                 replaced("m.experts.w2_weight_scale", scale_codes({kR * kH + 2, 1}, 0)),
                 problem.c(), MOE_STATUS_SHAPE_MISMATCH,
                 {"checkpoint tensor 'm.experts.w2_weight_scale' stores scales flat as [258, 1]",
                  "258 rows are not divisible by the 4 experts"});
  expect_refused("quark_flat_rows",
                 replaced("m.experts.w13_weight_scale", scale_codes({kR * kI, 2}, 0)), problem.c(),
                 MOE_STATUS_SHAPE_MISMATCH,
                 {"checkpoint tensor 'm.experts.w13_weight_scale' [128, 2] holds 32 rows per "
                  "expert, expected 64"});
}

TEST(InklingMxfp4, InterleavedRowsOfOddCountAreRefusedNamingTheTensor) {
  const Problem problem = mxfp4_problem();
  expect_refused(
      "quark_odd", replaced("m.experts.w13_weight", bytes({kR, 63, kH / 2}, 0)), problem.c(),
      MOE_STATUS_SHAPE_MISMATCH,
      {"checkpoint tensor 'm.experts.w13_weight' has 63 rows per matrix", "must be even"});
}

TEST(InklingMxfp4, StaticActivationScalesAreTheAmaxOver448TheLargestOverExperts) {
  const Problem problem = mxfp4_problem(MOE_INPUT_FP8_TENSOR_STATIC);
  const LayerWeights w = load("quark_static", quark_layer(), problem.c()).weights;
  // input_scale = amax / (448 * 6); e4m3 activations take six times that.
  EXPECT_FLOAT_EQ(w.a13_scale.data<float>()[0], 2688.0f / 448.0f);
  EXPECT_FLOAT_EQ(w.a2_scale.data<float>()[0], 896.0f / 448.0f);
}

TEST(InklingMxfp4, NonFiniteOrNonPositiveInputAmaxIsRefusedNamingTheTensor) {
  const Problem problem = mxfp4_problem(MOE_INPUT_FP8_TENSOR_STATIC);
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {0.0f, -1.0f, inf, std::numeric_limits<float>::quiet_NaN()}) {
    expect_refused("quark_amax13", replaced("m.experts.w13_weight.input_amax", values({bad})),
                   problem.c(), MOE_STATUS_INVALID_ARGUMENT,
                   {"checkpoint tensor 'm.experts.w13_weight.input_amax' is",
                    "an activation amax must be finite and > 0"});
    expect_refused("quark_amax2",
                   replaced("m.experts.w2_weight.input_amax", values({448.0f, 448.0f, bad, 1.0f})),
                   problem.c(), MOE_STATUS_INVALID_ARGUMENT,
                   {"checkpoint tensor 'm.experts.w2_weight.input_amax' is",
                    "an activation amax must be finite and > 0"});
  }
}

TEST(InklingMxfp4, InputAmaxMissingOrOfAnotherShapeIsRefusedUnderStaticActivations) {
  const Problem problem = mxfp4_problem(MOE_INPUT_FP8_TENSOR_STATIC);
  std::vector<NamedTensor> missing = quark_layer();
  std::erase_if(missing,
                [](const NamedTensor& t) { return t.name.ends_with("w2_weight.input_amax"); });
  expect_refused("quark_amax_missing", missing, problem.c(), MOE_STATUS_NOT_FOUND,
                 {"fp8_tensor_static", "'m.experts.w2_weight.input_amax'",
                  "which the checkpoint does not have"});
  expect_refused("quark_amax_shape",
                 replaced("m.experts.w13_weight.input_amax", values({1.0f, 2.0f})), problem.c(),
                 MOE_STATUS_SHAPE_MISMATCH,
                 {"checkpoint tensor 'm.experts.w13_weight.input_amax' has shape [2]",
                  "one value for the layer or one per expert (4)"});
}

TEST(InklingMxfp4, AnMxfp4LayerIsNotReadAsBf16) {
  const Problem problem = mxfp4_problem(MOE_INPUT_DEFAULT, MOE_FORMAT_BF16);
  expect_refused("quark_as_bf16", quark_layer(), problem.c(), MOE_STATUS_DTYPE_MISMATCH,
                 {"checkpoint tensor 'm.experts.w2_weight' is U8, which cannot be converted to "
                  "bf16"});
}

// The release keeps its first MoE layer in bf16: one file, layer 1 bf16 and layer 2 MXFP4, each
// read under its own format, and the bf16 one exactly as stored.
TEST(InklingMxfp4, ABf16LayerBesideMxfp4LayersIsReadAsStored) {
  const Problem bf16 = mxfp4_problem(MOE_INPUT_DEFAULT, MOE_FORMAT_BF16);
  const Problem mxfp4 = mxfp4_problem();
  CheckpointSpec spec{
      (std::filesystem::path(testing::TempDir()) / "quark_mixed.safetensors").string(),
      "inkling",
      "model.layers.{layer}.mlp",
      1,
      false,
      1,
      0};
  const LayerWeights first = random_weights(bf16.c(), 5), second = random_weights(mxfp4.c(), 6);
  const HostTensor router = zeros(MOE_DTYPE_BF16, {kR + kS, kH});
  const HostTensor bias = zeros(MOE_DTYPE_F32, {kR});
  std::vector<NamedTensor> ts = export_layer(first, bf16.c(), spec, router, bias);
  spec.layer = 2;
  for (auto& t : export_layer(second, mxfp4.c(), spec, router, bias)) ts.push_back(t);
  write_safetensors(spec.path, ts);
  const Checkpoint ck = Checkpoint::open(spec.path);
  const LayerCheckpoint two = load_layer(ck, spec, mxfp4.c());
  spec.layer = 1;
  const LayerCheckpoint one = load_layer(ck, spec, bf16.c());
  EXPECT_TRUE(one.conversions.empty());
  ASSERT_EQ(one.weights.w13.bytes(), first.w13.bytes());
  EXPECT_EQ(std::memcmp(one.weights.w13.raw(), first.w13.raw(), first.w13.bytes()), 0);
  ASSERT_EQ(two.weights.w13_scale.bytes(), second.w13_scale.bytes());
  EXPECT_EQ(
      std::memcmp(two.weights.w13_scale.raw(), second.w13_scale.raw(), second.w13_scale.bytes()),
      0);
}

TEST(InklingMxfp4, ExportWritesQuarkNamesWithFlatScales) {
  const Problem problem = mxfp4_problem();
  const CheckpointSpec spec{"unused", "inkling", "m", 0, false, 1, 0};
  const std::vector<NamedTensor> ts =
      export_layer(random_weights(problem.c(), 3), problem.c(), spec, {}, {});
  EXPECT_EQ(tensor(ts, "m.experts.w13_weight").shape(), (std::vector<int64_t>{kR, 2 * kI, kH / 2}));
  EXPECT_EQ(tensor(ts, "m.experts.w13_weight_scale").shape(),
            (std::vector<int64_t>{kR * 2 * kI, kH / 32}));
  EXPECT_EQ(tensor(ts, "m.experts.w2_weight_scale").shape(),
            (std::vector<int64_t>{kR * kH, kI / 32}));
  EXPECT_EQ(tensor(ts, "m.experts.w2_weight_scale").dtype(), MOE_DTYPE_U8);
}

}  // namespace
}  // namespace moe::test
