// The inkling convention: routed experts stacked with interleaved gate/up rows, sinks stored as
// shared_experts.*, router gate.weight [R+S, H] with the sink rows last, selection bias gate.bias
// and gate.global_scale. Export and load round-trip exactly, and TP slabs and EP ranks add up to
// the whole layer, for the bf16 and the Quark MXFP4 release; a hand-built checkpoint pins what
// the loader reads independently of the exporter; every bad tensor is refused by name
// (inkling_mxfp4_test.cpp: what only the MXFP4 release has).
#include <cmath>
#include <filesystem>
#include <limits>

#include "../support/test_env.hpp"
#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/formats.hpp"

namespace moe::test {
namespace {

constexpr int64_t kRouted = 6, kSinks = 2;

// 6 routed experts and 2 sinks, routed as Inkling routes them.
Problem inkling_problem(int64_t experts = kRouted, int64_t intermediate = 32,
                        moe_format format = MOE_FORMAT_BF16) {
  Problem p;
  moe_problem& r = p.raw();
  r.experts = experts;
  r.top_k = 2;
  r.hidden = 64;
  r.intermediate = intermediate;
  r.format = format;
  r.activation = MOE_ACTIVATION_SILU_MUL;
  r.routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  r.routing_bias = 1;
  r.sink_experts = kSinks;
  r.sink_intermediate = 16;
  r.route_scale = 1.5f;
  r.global_scale = 0.8f;
  p.finalize();
  validate_problem(p.c());
  return p;
}

std::string temp_file(const std::string& name) {
  return (std::filesystem::path(testing::TempDir()) / name).string();
}

CheckpointSpec spec_of(const std::string& file) {
  return {temp_file(file + ".safetensors"), "inkling", "model.layers.{layer}.mlp", 3, false, 1, 0};
}

void expect_same_bytes(const HostTensor& got, const HostTensor& want, const char* name) {
  ASSERT_EQ(got.shape(), want.shape()) << name;
  ASSERT_EQ(got.bytes(), want.bytes()) << name;
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.bytes()), 0) << name << " differs";
}

HostTensor router_of(const moe_problem& p) {
  HostTensor router(MOE_DTYPE_BF16, {kRouted + p.sink_experts, p.hidden});
  for (int64_t i = 0; i < router.numel(); ++i)
    router.data<uint16_t>()[i] = float_to_bf16(float(i % 11) * 0.05f - 0.25f);
  return router;
}

HostTensor selection_bias() {
  HostTensor bias(MOE_DTYPE_F32, {kRouted});
  for (int64_t e = 0; e < kRouted; ++e) bias.data<float>()[e] = 0.125f * float(e);
  return bias;
}

// A whole layer of random weights written through the inkling writer.
struct Written {
  Problem problem;
  LayerWeights weights;
  CheckpointSpec spec;
};

Written written(const std::string& file, int64_t intermediate = 32,
                moe_format format = MOE_FORMAT_BF16) {
  Written out{inkling_problem(kRouted, intermediate, format),
              {},
              spec_of(file + "_" + format_name(format))};
  const moe_problem p = out.problem.c();
  out.weights = random_weights(p, 17);
  write_safetensors(out.spec.path,
                    export_layer(out.weights, p, out.spec, router_of(p), selection_bias()));
  return out;
}

// The bf16 release and the Quark MXFP4 one (packed e2m1, flat ue8m0 scales).
class InklingRelease : public testing::TestWithParam<moe_format> {};

INSTANTIATE_TEST_SUITE_P(Formats, InklingRelease,
                         testing::Values(MOE_FORMAT_BF16, MOE_FORMAT_MXFP4),
                         [](const auto& info) { return std::string(format_name(info.param)); });

TEST_P(InklingRelease, ExportThenLoadGivesTheSameCanonicalWeightsAndRouter) {
  const Written w = written("inkling_roundtrip", 32, GetParam());
  const LayerCheckpoint got = load_layer(Checkpoint::open(w.spec.path), w.spec, w.problem.c());
  expect_same_bytes(got.weights.w13, w.weights.w13, "w13");
  expect_same_bytes(got.weights.w2, w.weights.w2, "w2");
  if (GetParam() == MOE_FORMAT_MXFP4) {
    expect_same_bytes(got.weights.w13_scale, w.weights.w13_scale, "w13_scale");
    expect_same_bytes(got.weights.w2_scale, w.weights.w2_scale, "w2_scale");
  }
  expect_same_bytes(got.weights.sink_w13, w.weights.sink_w13, "sink_w13");
  expect_same_bytes(got.weights.sink_w2, w.weights.sink_w2, "sink_w2");
  expect_same_bytes(got.router_weight, router_of(w.problem.c()), "router");
  expect_same_bytes(got.routing_bias, selection_bias(), "routing_bias");
  EXPECT_TRUE(got.router_bias.empty());
}

TEST(Inkling, ExportWritesTheInklingNames) {
  const Written w = written("inkling_names");
  const Checkpoint ck = Checkpoint::open(w.spec.path);
  for (const char* n :
       {"experts.w13_weight", "experts.w2_weight", "shared_experts.shared_w13_weight",
        "shared_experts.shared_w2_weight", "gate.weight", "gate.bias", "gate.global_scale"})
    EXPECT_NE(ck.find(std::string("model.layers.3.mlp.") + n), nullptr) << n;
}

// Row j of gate (+) or up (-) of matrix m: a small integer, exact in bf16.
float tag(int64_t m, int64_t j, bool up) {
  return float(up ? -1 : 1) * float(m * 32 + j + 1);
}

// `count` matrices [2n, h] with rows [g0, u0, g1, u1, ...]; matrix m has tag first + m.
HostTensor interleaved_by_hand(int64_t count, int64_t n, int64_t h, int64_t first) {
  HostTensor t(MOE_DTYPE_BF16, {count, 2 * n, h});
  for (int64_t m = 0; m < count; ++m)
    for (int64_t r = 0; r < 2 * n; ++r)
      for (int64_t k = 0; k < h; ++k)
        t.data<uint16_t>()[(m * 2 * n + r) * h + k] = float_to_bf16(tag(first + m, r / 2, r % 2));
  return t;
}

void expect_halves(const HostTensor& t, int64_t count, int64_t n, int64_t h, int64_t first,
                   const char* name) {
  ASSERT_EQ(t.numel(), count * 2 * n * h) << name;
  for (int64_t m = 0; m < count; ++m)
    for (int64_t r = 0; r < 2 * n; ++r)
      for (int64_t k = 0; k < h; ++k)
        ASSERT_EQ(bf16_to_float(t.data<uint16_t>()[(m * 2 * n + r) * h + k]),
                  tag(first + m, r % n, r >= n))
            << name << " matrix " << m << " row " << r;
}

HostTensor zeros(moe_dtype dtype, std::vector<int64_t> shape) {
  HostTensor t(dtype, std::move(shape));
  t.fill_bytes(0);
  return t;
}

HostTensor scalar(float v) {
  HostTensor t(MOE_DTYPE_F32, {1});
  t.data<float>()[0] = v;
  return t;
}

// Named tensors of a small inkling layer built by hand (not by the exporter), prefix "m.".
std::vector<NamedTensor> by_hand(const moe_problem& p) {
  const int64_t H = p.hidden, I = p.intermediate, Is = p.sink_intermediate;
  return {{"m.experts.w13_weight", interleaved_by_hand(kRouted, I, H, 0)},
          {"m.experts.w2_weight", zeros(MOE_DTYPE_BF16, {kRouted, H, I})},
          {"m.shared_experts.shared_w13_weight", interleaved_by_hand(kSinks, Is, H, kRouted)},
          {"m.shared_experts.shared_w2_weight", zeros(MOE_DTYPE_BF16, {kSinks, H, Is})},
          {"m.gate.weight", zeros(MOE_DTYPE_BF16, {kRouted + kSinks, H})},
          {"m.gate.bias", zeros(MOE_DTYPE_F32, {kRouted})},
          {"m.gate.global_scale", scalar(0.8f)}};
}

CheckpointSpec written_by_hand(const std::string& file, const std::vector<NamedTensor>& ts) {
  CheckpointSpec spec{temp_file(file + ".safetensors"), "inkling", "m", 0, false, 1, 0};
  write_safetensors(spec.path, ts);
  return spec;
}

TEST(Inkling, EvenRowsAreGateAndOddRowsUpForRoutedExpertsAndSinks) {
  const Problem problem = inkling_problem();
  const moe_problem p = problem.c();
  const CheckpointSpec spec = written_by_hand("inkling_by_hand", by_hand(p));
  const LayerWeights got = load_layer(Checkpoint::open(spec.path), spec, p).weights;
  expect_halves(got.w13, kRouted, p.intermediate, p.hidden, 0, "w13");
  expect_halves(got.sink_w13, kSinks, p.sink_intermediate, p.hidden, kRouted, "sink_w13");
}

// Sink columns of `routing` as the EP / TP piece `problem` expects them: ids experts + s on the
// rank that runs the sinks, -1 elsewhere (so the pieces add up to the layer once).
Routing sinks_on(const Routing& routing, const moe_problem& p, bool here) {
  Routing out{routing.ids, routing.weights};
  const int64_t cols = p.top_k + p.sink_experts, tokens = out.ids.shape()[0];
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t s = 0; s < p.sink_experts; ++s)
      out.ids.data<int32_t>()[t * cols + p.top_k + s] = here ? int32_t(p.experts + s) : -1;
  return out;
}

HostTensor reference_output(const moe_problem& p, const LayerWeights& w, const Routing& routing,
                            const HostTensor& hidden) {
  static const Registry r = registry_of({build_plugin_dir()});
  const Layer layer = r.find("reference")->prepare(p, w.view(), {});
  return run_layer(layer, p, hidden, routing, MOE_DTYPE_F64).output;
}

Routing route(const moe_problem& p, const Batch& batch) {
  static const Registry r = registry_of({build_plugin_dir()});
  return route_batch(*r.find("reference"), p, batch);
}

void expect_sum(const std::vector<double>& sum, const HostTensor& whole) {
  for (int64_t i = 0; i < whole.numel(); ++i)
    EXPECT_NEAR(sum[i], whole.data<double>()[i], 1e-12) << i;
}

TEST_P(InklingRelease, TensorParallelSlabsAddUpToTheWholeLayer) {
  const Written full = written("inkling_tp", 64, GetParam());
  const moe_problem p = full.problem.c();
  const Batch batch = random_batch(p, 5, 9, Scenario::kRandom);
  const Routing routing = route(p, batch);
  const HostTensor whole = reference_output(p, full.weights, routing, batch.hidden);
  std::vector<double> sum(whole.numel(), 0.0);
  for (int32_t rank = 0; rank < 2; ++rank) {
    Problem half = full.problem;
    half.raw().intermediate = 32;
    half.finalize();
    CheckpointSpec spec = full.spec;
    spec.tp_size = 2;
    spec.tp_rank = rank;
    const LayerCheckpoint l = load_layer(Checkpoint::open(spec.path), spec, half.c());
    const HostTensor part =
        reference_output(half.c(), l.weights, sinks_on(routing, half.c(), rank == 0), batch.hidden);
    for (int64_t i = 0; i < part.numel(); ++i) sum[i] += part.data<double>()[i];
  }
  expect_sum(sum, whole);
}

TEST_P(InklingRelease, ExpertParallelRanksAddUpAndPaddingExpertsAreNeverRouted) {
  // 6 routed experts; ep_size 4 pads them to 8 (round robin); the sinks stay on rank 0 here.
  const Written full = written("inkling_ep", 32, GetParam());
  const moe_problem p = full.problem.c();
  const Batch batch = random_batch(p, 7, 2, Scenario::kRandom);
  const Routing routing = route(p, batch);
  const HostTensor whole = reference_output(p, full.weights, routing, batch.hidden);
  std::vector<double> sum(whole.numel(), 0.0);
  for (int32_t rank = 0; rank < 4; ++rank) {
    Problem ep = full.problem;
    ep.raw().experts = 8;
    ep.raw().ep_placement = MOE_EP_ROUND_ROBIN;
    ep.raw().ep_size = 4;
    ep.raw().ep_rank = rank;
    ep.finalize();
    const LayerCheckpoint l = load_layer(Checkpoint::open(full.spec.path), full.spec, ep.c());
    EXPECT_EQ(l.real_experts, kRouted);
    const HostTensor logits = router_logits(l, ep.c(), batch.hidden);
    const float inf = std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < 7; ++t) {
      const float* row = logits.data<float>() + t * (8 + kSinks);
      EXPECT_EQ(row[6], -inf);
      EXPECT_EQ(row[7], -inf);
      EXPECT_TRUE(std::isfinite(row[8]) && std::isfinite(row[9]));
    }
    EXPECT_EQ(l.routing_bias.data<float>()[6], -inf);
    EXPECT_EQ(l.routing_bias.data<float>()[7], -inf);
    const HostTensor part =
        reference_output(ep.c(), l.weights, sinks_on(routing, ep.c(), rank == 0), batch.hidden);
    for (int64_t i = 0; i < part.numel(); ++i) sum[i] += part.data<double>()[i];
  }
  expect_sum(sum, whole);
}

TEST(Inkling, RouterSinkRowsComeAfterThePaddedRoutedColumns) {
  const Written full = written("inkling_router");
  const moe_problem p = full.problem.c();
  const LayerCheckpoint whole = load_layer(Checkpoint::open(full.spec.path), full.spec, p);
  Problem ep = full.problem;
  ep.raw().experts = 8;
  ep.raw().ep_placement = MOE_EP_LINEAR;
  ep.raw().ep_size = 4;
  ep.finalize();
  const LayerCheckpoint padded = load_layer(Checkpoint::open(full.spec.path), full.spec, ep.c());
  const Batch batch = random_batch(p, 3, 4, Scenario::kRandom);
  const HostTensor a = router_logits(whole, p, batch.hidden);
  const HostTensor b = router_logits(padded, ep.c(), batch.hidden);
  for (int64_t t = 0; t < 3; ++t) {
    for (int64_t e = 0; e < kRouted; ++e)
      EXPECT_EQ(b.data<float>()[t * 10 + e], a.data<float>()[t * 8 + e]);
    for (int64_t s = 0; s < kSinks; ++s)
      EXPECT_EQ(b.data<float>()[t * 10 + 8 + s], a.data<float>()[t * 8 + kRouted + s]);
  }
}

// by_hand's tensors with one replaced.
std::vector<NamedTensor> replaced(const moe_problem& p, const std::string& name, HostTensor t) {
  std::vector<NamedTensor> ts = by_hand(p);
  for (auto& x : ts)
    if (x.name == name) x.tensor = std::move(t);
  return ts;
}

void expect_refused(const std::string& file, const std::vector<NamedTensor>& ts,
                    const moe_problem& p, moe_status status,
                    std::initializer_list<std::string> parts) {
  const CheckpointSpec spec = written_by_hand(file, ts);
  expect_error([&] { load_layer(Checkpoint::open(spec.path), spec, p); }, status, parts);
}

TEST(Inkling, InterleavedRowsOfOddCountAreRefusedNamingTheTensor) {
  const Problem problem = inkling_problem();
  const moe_problem p = problem.c();
  expect_refused("inkling_odd_w13",
                 replaced(p, "m.experts.w13_weight", zeros(MOE_DTYPE_BF16, {kRouted, 63, 64})), p,
                 MOE_STATUS_SHAPE_MISMATCH,
                 {"checkpoint tensor 'm.experts.w13_weight' has 63 rows per matrix", "interleaved",
                  "must be even"});
  expect_refused(
      "inkling_odd_sinks",
      replaced(p, "m.shared_experts.shared_w13_weight", zeros(MOE_DTYPE_BF16, {kSinks, 31, 64})), p,
      MOE_STATUS_SHAPE_MISMATCH,
      {"checkpoint tensor 'm.shared_experts.shared_w13_weight' has 31 rows per matrix",
       "must be even"});
}

TEST(Inkling, GlobalScaleMustMatchTheProblemAndBeFinitePositive) {
  const Problem problem = inkling_problem();
  const moe_problem p = problem.c();
  expect_refused("inkling_scale_mismatch", replaced(p, "m.gate.global_scale", scalar(0.5f)), p,
                 MOE_STATUS_INVALID_ARGUMENT,
                 {"checkpoint tensor 'm.gate.global_scale' is 0.5, but the problem has "
                  "global_scale: 0.8; set global_scale: 0.5"});
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN()})
    expect_refused("inkling_scale_bad", replaced(p, "m.gate.global_scale", scalar(bad)), p,
                   MOE_STATUS_INVALID_ARGUMENT,
                   {"checkpoint tensor 'm.gate.global_scale'", "must be finite and > 0"});
}

TEST(Inkling, ExportRefusesWhatTheConventionCannotStore) {
  Problem shared = inkling_problem();
  shared.raw().shared_intermediate = 32;
  shared.finalize();
  const CheckpointSpec spec = spec_of("inkling_refused");
  expect_error([&] { export_layer(random_weights(shared.c(), 1), shared.c(), spec, {}, {}); },
               MOE_STATUS_UNSUPPORTED, {"inkling has no weight-1 shared expert"});
  Problem fp8 = inkling_problem();
  fp8.raw().format = MOE_FORMAT_FP8_TENSOR;
  fp8.finalize();
  expect_error([&] { export_layer(random_weights(fp8.c(), 1), fp8.c(), spec, {}, {}); },
               MOE_STATUS_UNSUPPORTED,
               {"inkling checkpoints are written in bf16 or Quark MXFP4, not fp8_tensor"});
}

}  // namespace
}  // namespace moe::test
