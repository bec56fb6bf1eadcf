// Checkpoint adapters: every convention round-trips canonical weights exactly (export ->
// safetensors file -> load_layer), TP and EP pieces add up to the whole layer, and every bad
// checkpoint is refused with a message naming the tensor.
#include <filesystem>
#include <fstream>
#include <limits>

#include "../support/test_env.hpp"

namespace moe::test {
namespace {

struct Case {
  std::string convention;
  moe_format format;
  bool gated = true, biases = false, shared = false, sinks = false, interleaved = false,
       routing_bias = false, static_scales = false;
};

Problem problem_for(const Case& c) {
  Problem p;
  moe_problem& r = p.raw();
  r.experts = 4;
  r.top_k = 2;
  r.hidden = 64;
  r.intermediate = c.format == MOE_FORMAT_FP8_BLOCK ? 128 : c.format == MOE_FORMAT_MXFP4 ? 64 : 48;
  r.format = c.format;
  r.activation = c.gated ? MOE_ACTIVATION_SILU_MUL : MOE_ACTIVATION_RELU2;
  r.expert_bias = c.biases;
  r.shared_intermediate = c.shared ? (c.format == MOE_FORMAT_FP8_BLOCK ? 128 : 32) : 0;
  if (c.sinks) {
    r.routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
    r.sink_experts = 2;
    r.sink_intermediate = 16;
  }
  r.routing_bias = c.routing_bias;
  if (c.static_scales) r.input_format = MOE_INPUT_FP8_TENSOR_STATIC;
  p.finalize();
  validate_problem(p.c());
  return p;
}

std::string temp_file(const std::string& name) {
  return (std::filesystem::path(testing::TempDir()) / name).string();
}

// Values of a tensor as doubles (bf16 and f32 biases compare by value).
std::vector<double> values(const HostTensor& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.dtype() == MOE_DTYPE_F32 ? t.data<float>()[i] : bf16_to_float(t.data<uint16_t>()[i]);
  return v;
}

void expect_same_bytes(const HostTensor& a, const HostTensor& b, const char* name) {
  ASSERT_EQ(a.shape(), b.shape()) << name;
  ASSERT_EQ(a.bytes(), b.bytes()) << name;
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.bytes()), 0) << name << " differs";
}

class RoundTrip : public testing::TestWithParam<Case> {};

TEST_P(RoundTrip, ExportThenLoadGivesTheSameCanonicalWeights) {
  const Case& c = GetParam();
  const Problem problem = problem_for(c);
  const moe_problem p = problem.c();
  const LayerWeights w = random_weights(p, 11);
  CheckpointSpec spec{"", c.convention, "model.layers.{layer}.mlp", 5, c.interleaved, 1, 0};
  HostTensor router(MOE_DTYPE_BF16, {p.experts + p.sink_experts, p.hidden});
  router.fill_bytes(0x3F);
  HostTensor bias;
  if (c.routing_bias) {
    bias = HostTensor(MOE_DTYPE_F32, {p.experts});
    for (int64_t e = 0; e < p.experts; ++e) bias.data<float>()[e] = 0.25f * float(e);
  }
  spec.path = temp_file("roundtrip_" + c.convention + "_" + format_name(c.format) + ".safetensors");
  write_safetensors(spec.path, export_layer(w, p, spec, router, bias));
  const LayerCheckpoint got = load_layer(Checkpoint::open(spec.path), spec, p);
  expect_same_bytes(got.weights.w13, w.w13, "w13");
  expect_same_bytes(got.weights.w13_scale, w.w13_scale, "w13_scale");
  expect_same_bytes(got.weights.w13_scale_2, w.w13_scale_2, "w13_scale_2");
  expect_same_bytes(got.weights.w2, w.w2, "w2");
  expect_same_bytes(got.weights.w2_scale, w.w2_scale, "w2_scale");
  expect_same_bytes(got.weights.w2_scale_2, w.w2_scale_2, "w2_scale_2");
  expect_same_bytes(got.weights.shared_w13, w.shared_w13, "shared_w13");
  expect_same_bytes(got.weights.shared_w2, w.shared_w2, "shared_w2");
  expect_same_bytes(got.weights.sink_w13, w.sink_w13, "sink_w13");
  expect_same_bytes(got.weights.a13_scale, w.a13_scale, "a13_scale");
  EXPECT_EQ(values(got.weights.b13), values(w.b13));
  EXPECT_EQ(values(got.weights.b2), values(w.b2));
  expect_same_bytes(got.router_weight, router, "router");
  EXPECT_EQ(values(got.routing_bias), values(bias));
}

INSTANTIATE_TEST_SUITE_P(
    EveryConvention, RoundTrip,
    testing::Values(Case{"mixtral", MOE_FORMAT_BF16}, Case{"mixtral", MOE_FORMAT_FP8_TENSOR},
                    Case{"mixtral", MOE_FORMAT_MXFP8}, Case{"mixtral", MOE_FORMAT_NVFP4},
                    Case{"mixtral", MOE_FORMAT_BF16, false},
                    Case{"deepseek", MOE_FORMAT_FP8_BLOCK, true, false, true, false, false, true},
                    Case{"deepseek", MOE_FORMAT_MXFP4, true, false, true},
                    Case{"qwen_moe", MOE_FORMAT_BF16, true, false, true},
                    Case{"gpt_oss", MOE_FORMAT_BF16, true, true},
                    Case{"gpt_oss", MOE_FORMAT_MXFP4, true, true},
                    Case{"gpt_oss", MOE_FORMAT_BF16, true, true, false, false, false, true},
                    Case{"stacked", MOE_FORMAT_NVFP4, true, true, true},
                    Case{"stacked", MOE_FORMAT_MXFP4, true, false, false, false, true},
                    Case{"stacked", MOE_FORMAT_BF16, true, false, false, true, false, true},
                    Case{"stacked", MOE_FORMAT_FP8_TENSOR, true, false, false, false, false, false,
                         true}),
    [](const testing::TestParamInfo<Case>& i) {
      const Case& c = i.param;
      return c.convention + "_" + format_name(c.format) + (c.gated ? "" : "_relu2") +
             (c.biases ? "_bias" : "") + (c.shared ? "_shared" : "") + (c.sinks ? "_sinks" : "") +
             (c.interleaved ? "_interleaved" : "") + (c.routing_bias ? "_selection_bias" : "") +
             (c.static_scales ? "_static" : "");
    });

// A checkpoint written from random canonical weights, for the tests below.
struct Written {
  Problem problem;
  LayerWeights weights;
  CheckpointSpec spec;
};

Written written(const std::string& name, Case c, int64_t intermediate = 0) {
  Written out{problem_for(c), {}, {}};
  if (intermediate) {
    out.problem.raw().intermediate = intermediate;
    out.problem.finalize();
  }
  out.weights = random_weights(out.problem.c(), 3);
  out.spec = CheckpointSpec{temp_file(name + ".safetensors"), c.convention, "m", 0, false, 1, 0};
  HostTensor router(MOE_DTYPE_F32, {out.problem.raw().experts, out.problem.raw().hidden});
  for (int64_t i = 0; i < router.numel(); ++i) router.data<float>()[i] = float(i % 7) * 0.1f;
  write_safetensors(out.spec.path,
                    export_layer(out.weights, out.problem.c(), out.spec, router, {}));
  return out;
}

// f64 output of the reference on `w` for a fixed batch.
HostTensor reference_output(const moe_problem& p, const LayerWeights& w, const Routing& routing,
                            const HostTensor& hidden) {
  static const Registry r = registry_of({build_plugin_dir()});
  const Layer layer = r.find("reference")->prepare(p, w.view(), {});
  return run_layer(layer, p, hidden, routing, MOE_DTYPE_F64).output;
}

TEST(Checkpoint, TensorParallelSlabsAddUpToTheWholeLayer) {
  const Written full = written("tp_full", {"mixtral", MOE_FORMAT_BF16, true, false}, 64);
  const moe_problem p = full.problem.c();
  const Batch batch = random_batch(p, 5, 9, Scenario::kRandom);
  static const Registry r = registry_of({build_plugin_dir()});
  const Routing routing = route_batch(*r.find("reference"), p, batch);
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
    const HostTensor part = reference_output(half.c(), l.weights, routing, batch.hidden);
    for (int64_t i = 0; i < part.numel(); ++i) sum[i] += part.data<double>()[i];
  }
  for (int64_t i = 0; i < whole.numel(); ++i)
    EXPECT_NEAR(sum[i], whole.data<double>()[i], 1e-12) << i;
}

TEST(Checkpoint, TensorParallelSizeThatDoesNotDivideIsRefused) {
  const Written full = written("tp_bad", {"mixtral", MOE_FORMAT_BF16}, 48);
  Problem third = full.problem;
  third.raw().intermediate = 16;
  third.finalize();
  CheckpointSpec spec = full.spec;
  spec.tp_size = 5;
  expect_error([&] { load_layer(Checkpoint::open(spec.path), spec, third.c()); },
               MOE_STATUS_SHAPE_MISMATCH,
               {"tp_size=5 does not divide the checkpoint's intermediate size 48"});
}

TEST(Checkpoint, Fp8BlockSlabThatCutsAScaleBlockIsRefused) {
  const Written full = written("tp_fp8", {"deepseek", MOE_FORMAT_FP8_BLOCK}, 128);
  Problem half = full.problem;
  half.raw().intermediate = 64;
  half.finalize();
  CheckpointSpec spec = full.spec;
  spec.tp_size = 2;
  expect_error([&] { load_layer(Checkpoint::open(spec.path), spec, half.c()); },
               MOE_STATUS_INVALID_ARGUMENT, {"cut through a 128x128 fp8_block scale block"});
}

// `base` with `experts` global experts placed over `size` ranks, as rank `rank` sees it.
Problem ep_problem(Problem base, int64_t experts, moe_ep_placement placement, int32_t size,
                   int32_t rank = 0) {
  base.raw().experts = experts;
  base.raw().ep_placement = placement;
  base.raw().ep_size = size;
  base.raw().ep_rank = rank;
  base.finalize();
  return base;
}

TEST(Checkpoint, ExpertParallelRanksAddUpAndPaddingExpertsAreZeroAndNeverRouted) {
  // 6 experts in the checkpoint; ep_size 4 pads them to 8 (round robin).
  Case c{"mixtral", MOE_FORMAT_BF16};
  Written full = written("ep_full", c);
  Problem six = full.problem;
  six.raw().experts = 6;
  six.finalize();
  full.weights = random_weights(six.c(), 4);
  HostTensor router(MOE_DTYPE_F32, {6, six.raw().hidden});
  router.fill_bytes(0);
  write_safetensors(full.spec.path, export_layer(full.weights, six.c(), full.spec, router, {}));
  const Batch batch = random_batch(six.c(), 7, 2, Scenario::kRandom);
  static const Registry r = registry_of({build_plugin_dir()});
  const Routing routing = route_batch(*r.find("reference"), six.c(), batch);
  const HostTensor whole = reference_output(six.c(), full.weights, routing, batch.hidden);
  std::vector<double> sum(whole.numel(), 0.0);
  for (int32_t rank = 0; rank < 4; ++rank) {
    const Problem ep = ep_problem(six, 8, MOE_EP_ROUND_ROBIN, 4, rank);
    const LayerCheckpoint l = load_layer(Checkpoint::open(full.spec.path), full.spec, ep.c());
    EXPECT_EQ(l.real_experts, 6);
    if (rank >= 2) {  // local expert 1 is global 4 + rank >= 6: padding, all zero
      const auto* w2 = l.weights.w2.data<uint16_t>() + 1 * 64 * 48;
      for (int64_t i = 0; i < 64 * 48; ++i) ASSERT_EQ(w2[i], 0) << "rank " << rank;
    }
    const HostTensor logits = router_logits(l, ep.c(), batch.hidden);
    for (int64_t t = 0; t < 7; ++t)
      for (int64_t e = 6; e < 8; ++e)
        EXPECT_EQ(logits.data<float>()[t * 8 + e], -std::numeric_limits<float>::infinity());
    const HostTensor part = reference_output(ep.c(), l.weights, routing, batch.hidden);
    for (int64_t i = 0; i < part.numel(); ++i) sum[i] += part.data<double>()[i];
  }
  for (int64_t i = 0; i < whole.numel(); ++i)
    EXPECT_NEAR(sum[i], whole.data<double>()[i], 1e-12) << i;
}

// A dense checkpoint quantised to fp8_block at load takes any intermediate size (docs/design.md
// §3.4), padding experts included: their [gate; up] was once stacked from quantised halves, which
// asks whole 128-row blocks of the gate (I = 96 failed on the rank holding padding).
TEST(Checkpoint, PaddingExpertsOfADenseCheckpointLoadInFp8BlockAtAnyIntermediate) {
  const Written full = written("ep_fp8_pad", {"mixtral", MOE_FORMAT_BF16}, 96);
  for (int32_t rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE(rank);
    // 4 experts in the file, 6 with ep_size 3: rank 2 holds 4 and 5
    Problem ep = ep_problem(full.problem, 6, MOE_EP_LINEAR, 3, rank);
    ep.raw().format = MOE_FORMAT_FP8_BLOCK;
    ep.raw().input_format = MOE_INPUT_DEFAULT;
    ep.finalize();
    const LayerCheckpoint l = load_layer(Checkpoint::open(full.spec.path), full.spec, ep.c());
    const HostTensor& w13 = l.weights.w13;
    ASSERT_EQ(w13.shape(), (std::vector<int64_t>{2, 2 * 96, 64}));
    ASSERT_EQ(l.weights.w13_scale.shape(), (std::vector<int64_t>{2, 2, 1}));
    const auto* codes = static_cast<const uint8_t*>(w13.raw());
    const size_t per_expert = w13.bytes() / 2;
    const bool padding = rank == 2;
    size_t nonzero = 0;
    for (size_t i = 0; i < w13.bytes(); ++i) nonzero += codes[i] != 0;
    if (padding)
      EXPECT_EQ(nonzero, 0u) << "padding experts must be zero";
    else
      EXPECT_GT(nonzero, per_expert) << "real experts hold the checkpoint's weights";
  }
}

TEST(Checkpoint, ExpertCountNotPaddedForTheEpSizeIsRefusedWithTheNeededCount) {
  Written full = written("ep_bad", {"mixtral", MOE_FORMAT_BF16});
  // 4 experts in the file: 6 with ep_size 3, not 9
  const Problem ep = ep_problem(full.problem, 9, MOE_EP_LINEAR, 3);
  expect_error([&] { load_layer(Checkpoint::open(full.spec.path), full.spec, ep.c()); },
               MOE_STATUS_SHAPE_MISMATCH,
               {"the checkpoint has 4 experts, padded to a multiple of ep_size=3: the problem "
                "needs experts: 6"});
}

TEST(Checkpoint, GroupedRoutingRefusesPaddingExpertsThatWouldMoveItsGroups) {
  Written full = written("ep_grouped", {"mixtral", MOE_FORMAT_BF16});
  // 4 experts in the file, 6 with ep_size 3: groups of 3, not 2
  Problem ep = ep_problem(full.problem, 6, MOE_EP_LINEAR, 3);
  ep.raw().routing = MOE_ROUTING_GROUPED_TOPK;
  ep.raw().num_groups = 2;
  ep.raw().topk_group = 1;
  ep.finalize();
  expect_error([&] { load_layer(Checkpoint::open(full.spec.path), full.spec, ep.c()); },
               MOE_STATUS_CONFIG_ERROR,
               {"grouped_topk routing cannot take padding experts",
                "4 experts are not a multiple of ep_size=3", "padding them to 6",
                "regroup them 3 a group instead of 2", "an ep_size that divides 4"});
  ep.raw().ep_size = 2;  // 4 experts split evenly: no padding, the model's groups
  ep.raw().experts = 4;
  ep.finalize();
  EXPECT_NO_THROW(load_layer(Checkpoint::open(full.spec.path), full.spec, ep.c()));
}

// A checkpoint of `tensors` with one of them changed by `edit`.
std::string edited(const std::string& name, const Written& w,
                   const std::function<void(std::vector<NamedTensor>&)>& edit) {
  std::vector<NamedTensor> tensors = export_layer(w.weights, w.problem.c(), w.spec, {}, {});
  edit(tensors);
  const std::string path = temp_file(name + ".safetensors");
  write_safetensors(path, tensors);
  return path;
}

NamedTensor& tensor_named(std::vector<NamedTensor>& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

void expect_load_error(const Written& w, const std::string& path, moe_status status,
                       std::initializer_list<std::string> parts) {
  CheckpointSpec spec = w.spec;
  spec.path = path;
  expect_error([&] { load_layer(Checkpoint::open(path), spec, w.problem.c()); }, status, parts);
}

TEST(Checkpoint, MissingTensorIsNamedWithThePattern) {
  const Written w = written("missing", {"mixtral", MOE_FORMAT_BF16});
  const std::string path = edited("missing", w, [](std::vector<NamedTensor>& ts) {
    ts.erase(std::remove_if(ts.begin(), ts.end(),
                            [](const NamedTensor& t) { return t.name == "m.experts.2.w3.weight"; }),
             ts.end());
  });
  expect_load_error(w, path, MOE_STATUS_NOT_FOUND,
                    {"checkpoint tensor 'm.experts.2.w3.weight' is missing",
                     "convention mixtral, prefix 'm', layer 0"});
}

TEST(Checkpoint, WrongShapeAndWrongDtypeAreNamed) {
  const Written w = written("shape", {"mixtral", MOE_FORMAT_BF16});
  const std::string bad_shape = edited("shape", w, [](std::vector<NamedTensor>& ts) {
    tensor_named(ts, "m.experts.1.w1.weight").tensor = HostTensor(MOE_DTYPE_BF16, {48, 63});
  });
  expect_load_error(w, bad_shape, MOE_STATUS_SHAPE_MISMATCH,
                    {"'m.experts.1.w1.weight' has shape [48, 63], expected [48, 64]"});
  const std::string bad_dtype = edited("dtype", w, [](std::vector<NamedTensor>& ts) {
    tensor_named(ts, "m.experts.0.w2.weight").tensor = HostTensor(MOE_DTYPE_I32, {64, 48});
  });
  // F32 and F16 are converted at load (tests/checkpoint/dtype_test.cpp); I32 cannot be.
  expect_load_error(w, bad_dtype, MOE_STATUS_DTYPE_MISMATCH,
                    {"'m.experts.0.w2.weight' is I32, which cannot be converted to bf16"});
}

TEST(Checkpoint, ZeroScaleIsRefusedAsAMisroutedTensor) {
  const Written w = written("zero_scale", {"deepseek", MOE_FORMAT_FP8_BLOCK});
  const std::string path = edited("zero_scale", w, [](std::vector<NamedTensor>& ts) {
    tensor_named(ts, "m.experts.3.down_proj.weight_scale_inv").tensor.fill_bytes(0);
  });
  expect_load_error(w, path, MOE_STATUS_INVALID_ARGUMENT,
                    {"'m.experts.3.down_proj' holds 0", "missing or misrouted tensor"});
}

// Block-scale codes are checked as the backends check them, in every convention: the e4m3 NaN
// and negative codes of nvfp4, the ue8m0 NaN code 0xff of mxfp4; and a stacked convention's f32
// scales as the per-projection ones (they were taken as stored: NaN gave a mismatch, 0 and -1 a
// wrong layer).
TEST(Checkpoint, CorruptScaleCodesAndStackedScalesAreRefused) {
  const Written nv = written("nv_codes", {"mixtral", MOE_FORMAT_NVFP4});
  for (const uint8_t code : {uint8_t(0x7f), uint8_t(0xb8)}) {  // NaN, -1.0
    const std::string path = edited("nv_codes", nv, [&](std::vector<NamedTensor>& ts) {
      tensor_named(ts, "m.experts.0.w1.weight_scale").tensor.data<uint8_t>()[5] = code;
    });
    expect_load_error(nv, path, MOE_STATUS_INVALID_ARGUMENT,
                      {"checkpoint tensor 'm.experts.0.w1.weight_scale'[5]",
                       "is not a block scale (NaN or negative)"});
  }
  const Written mx = written("mx_codes", {"stacked", MOE_FORMAT_MXFP4});
  const std::string nan_code = edited("mx_codes", mx, [](std::vector<NamedTensor>& ts) {
    tensor_named(ts, "m.w2_scale").tensor.data<uint8_t>()[3] = 0xff;
  });
  expect_load_error(mx, nan_code, MOE_STATUS_INVALID_ARGUMENT,
                    {"checkpoint expert 0 down scale[3] is the ue8m0 NaN code 0xff"});
  const Written f8 = written("f8_stacked", {"stacked", MOE_FORMAT_FP8_TENSOR});
  for (const float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    const std::string path = edited("f8_stacked", f8, [&](std::vector<NamedTensor>& ts) {
      tensor_named(ts, "m.w13_scale").tensor.data<float>()[2] = bad;
    });
    expect_load_error(f8, path, MOE_STATUS_INVALID_ARGUMENT,
                      {"checkpoint expert 2", "is not a finite positive scale"});
  }
}

// Weights converted at load must be finite: a NaN was carried into its block's scale, or refused
// by a quantiser without the tensor's name.
TEST(Checkpoint, ANonFiniteWeightConvertedAtLoadIsRefused) {
  const Written w = written("nan_f32", {"mixtral", MOE_FORMAT_BF16});
  const std::string path = edited("nan_f32", w, [](std::vector<NamedTensor>& ts) {
    HostTensor f(MOE_DTYPE_F32, {64, 48});
    for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = 0.01f * float(i % 13);
    f.data<float>()[1 * 48 + 2] = std::numeric_limits<float>::infinity();
    tensor_named(ts, "m.experts.3.w2.weight").tensor = std::move(f);
  });
  expect_load_error(w, path, MOE_STATUS_INVALID_ARGUMENT,
                    {"checkpoint expert 3 down: weight [1, 2] is inf",
                     "weights converted at load must be finite"});
}

// A static input scale is checked per expert: the layer takes the largest, which hid a NaN or a
// negative one; zero (an expert calibration never reached) is taken.
TEST(Checkpoint, ABadStaticInputScaleIsRefusedNamingItsTensor) {
  // Written without static scales (mixtral's exporter writes none), each projection's
  // input_scale added by hand, read as a static-scale layer.
  Case c{"mixtral", MOE_FORMAT_FP8_TENSOR};
  const Written plain = written("input_scale", c);
  c.static_scales = true;
  Written w = plain;
  w.problem = problem_for(c);
  auto with_scales = [](std::vector<NamedTensor>& ts, float expert1_w1) {
    for (int e = 0; e < 4; ++e)
      for (const char* q : {"w1", "w2", "w3"}) {
        HostTensor s(MOE_DTYPE_F32, {1});
        s.data<float>()[0] = e == 1 && std::string(q) == "w1" ? expert1_w1 : 0.05f;
        ts.push_back({fmt::format("m.experts.{}.{}.input_scale", e, q), std::move(s)});
      }
  };
  const std::string good = edited("input_scale", plain, [&](auto& ts) { with_scales(ts, 0.1f); });
  CheckpointSpec spec = w.spec;
  spec.path = good;
  const LayerCheckpoint l = load_layer(Checkpoint::open(good), spec, w.problem.c());
  EXPECT_EQ(l.weights.a13_scale.data<float>()[0], 0.1f);  // the largest
  for (const float bad : {-2.0f, std::numeric_limits<float>::quiet_NaN()}) {
    const std::string path = edited("input_scale", plain, [&](auto& ts) { with_scales(ts, bad); });
    expect_load_error(w, path, MOE_STATUS_INVALID_ARGUMENT,
                      {"checkpoint tensor 'm.experts.1.w1.input_scale' is",
                       "a static input scale must be finite and >= 0"});
  }
  // Zero: an expert calibration never reached; the layer takes the others' largest.
  const std::string zero = edited("input_scale", plain, [&](auto& ts) { with_scales(ts, 0.0f); });
  spec.path = zero;
  const LayerCheckpoint z = load_layer(Checkpoint::open(zero), spec, w.problem.c());
  EXPECT_EQ(z.weights.a13_scale.data<float>()[0], 0.05f);
}

TEST(Checkpoint, ANonFiniteSelectionBiasIsRefused) {
  const Written w =
      written("sel_nan", {"deepseek", MOE_FORMAT_BF16, true, false, false, false, false, true});
  HostTensor bias(MOE_DTYPE_F32, {4});
  for (int64_t i = 0; i < 4; ++i) bias.data<float>()[i] = 0.1f * float(i);
  bias.data<float>()[2] = std::numeric_limits<float>::quiet_NaN();
  write_safetensors(w.spec.path, export_layer(w.weights, w.problem.c(), w.spec, {}, bias));
  expect_error(
      [&] { load_layer(Checkpoint::open(w.spec.path), w.spec, w.problem.c()); },
      MOE_STATUS_INVALID_ARGUMENT,
      {"'m.gate.e_score_correction_bias' holds nan at index 2", "a selection bias must be finite"});
}

// An index names its shards relative to its directory: one that leaves it (.., an absolute path)
// is refused, not read from elsewhere; a path that exists but cannot be followed (a symbolic link
// loop) is named with the system's reason, not as missing.
TEST(Checkpoint, ShardsOutsideTheDirectoryAndUnreadablePathsAreNamed) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::TempDir()) / "moe_index_outside";
  fs::remove_all(dir);
  fs::create_directories(dir / "ck");
  const Written w = written("index_outside", {"mixtral", MOE_FORMAT_BF16});
  fs::copy_file(w.spec.path, dir / "elsewhere.safetensors");
  for (const std::string shard :
       {std::string("../elsewhere.safetensors"), (dir / "elsewhere.safetensors").string()}) {
    std::ofstream(dir / "ck" / "model.safetensors.index.json")
        << R"({"weight_map": {"m.experts.0.w1.weight": ")" << shard << R"("}})";
    expect_error([&] { Checkpoint::open((dir / "ck").string()); }, MOE_STATUS_INVALID_ARGUMENT,
                 {"is in shard '" + shard + "', a path outside the checkpoint's directory"});
  }
  fs::create_symlink("loop_b", dir / "loop_a");
  fs::create_symlink("loop_a", dir / "loop_b");
  expect_error([&] { Checkpoint::open((dir / "loop_a").string()); }, MOE_STATUS_IO_ERROR,
               {"loop_a' cannot be read:"});
}

TEST(Checkpoint, NonPositiveNvfp4GlobalScaleIsRefused) {
  const Written w = written("nv_s2", {"mixtral", MOE_FORMAT_NVFP4});
  const std::string path = edited("nv_s2", w, [](std::vector<NamedTensor>& ts) {
    tensor_named(ts, "m.experts.0.w3.weight_scale_2").tensor.data<float>()[0] = -1.0f;
  });
  expect_load_error(w, path, MOE_STATUS_INVALID_ARGUMENT,
                    {"'m.experts.0.w3.weight_scale_2' is -1", "finite and > 0"});
}

TEST(Checkpoint, Nvfp4GateAndUpScalesFoldExactlyOrAreRefused) {
  const Written w = written("nv_fold", {"mixtral", MOE_FORMAT_NVFP4});
  // up's global scale doubled and its block scales halved: the same values, foldable.
  const std::string ok = edited("nv_fold_ok", w, [](std::vector<NamedTensor>& ts) {
    auto& s2 = tensor_named(ts, "m.experts.1.w3.weight_scale_2").tensor;
    s2.data<float>()[0] *= 2.0f;
    auto& s = tensor_named(ts, "m.experts.1.w3.weight_scale").tensor;
    for (int64_t i = 0; i < s.numel(); ++i)
      s.data<uint8_t>()[i] = e4m3_from_double(e4m3_to_double(s.data<uint8_t>()[i]) / 2.0);
  });
  CheckpointSpec spec = w.spec;
  spec.path = ok;
  const LayerCheckpoint l = load_layer(Checkpoint::open(ok), spec, w.problem.c());
  EXPECT_EQ(l.weights.w13_scale_2.data<float>()[1], w.weights.w13_scale_2.data<float>()[1]);
  // A ratio of 1.3 cannot be folded into e4m3 block scales exactly.
  const std::string bad = edited("nv_fold_bad", w, [](std::vector<NamedTensor>& ts) {
    tensor_named(ts, "m.experts.2.w3.weight_scale_2").tensor.data<float>()[0] *= 1.3f;
  });
  expect_load_error(w, bad, MOE_STATUS_UNSUPPORTED,
                    {"cannot fold the up half's NVFP4 weight_scale_2", "is not an e4m3 value",
                     "Requantise the checkpoint"});
}

TEST(Checkpoint, QuarkFlatScalesNotDivisibleByTheExpertCountAreRefused) {
  const Written w = written("quark", {"stacked", MOE_FORMAT_MXFP4});
  const std::string path = edited("quark", w, [](std::vector<NamedTensor>& ts) {
    auto& s = tensor_named(ts, "m.w13_scale").tensor;  // [4, 128, 2] -> flat [383, 2]
    s = HostTensor(MOE_DTYPE_U8, {383, 2});
  });
  expect_load_error(w, path, MOE_STATUS_SHAPE_MISMATCH,
                    {"'m.w13_scale' stores scales flat as [383, 2]",
                     "383 rows are not divisible by the 4 experts"});
}

TEST(Checkpoint, SelectionBiasAndProblemMustAgree) {
  const Written w =
      written("sel", {"deepseek", MOE_FORMAT_BF16, true, false, false, false, false, true});
  Problem no_bias = w.problem;
  no_bias.raw().routing_bias = 0;
  std::vector<NamedTensor> ts =
      export_layer(w.weights, w.problem.c(), w.spec, {}, HostTensor(MOE_DTYPE_F32, {4}));
  write_safetensors(w.spec.path, ts);
  expect_error([&] { load_layer(Checkpoint::open(w.spec.path), w.spec, no_bias.c()); },
               MOE_STATUS_INVALID_ARGUMENT,
               {"has a selection bias 'm.gate.e_score_correction_bias': set routing_bias: true"});
}

// gpt_oss stores gated bf16 or mxfp4 experts only: anything else is refused, not read past the
// end of w13 / w2.
TEST(Checkpoint, GptOssExportRefusesActivationsWithoutAGateAndOtherFormats) {
  const std::pair<Case, std::string> refused[] = {
      {{"gpt_oss", MOE_FORMAT_BF16, false}, "gpt_oss experts are gated, not activation relu2"},
      {{"gpt_oss", MOE_FORMAT_NVFP4}, "gpt_oss checkpoints are bf16 or mxfp4, not nvfp4"},
  };
  for (const auto& [c, message] : refused) {
    const Problem problem = problem_for(c);
    const CheckpointSpec spec{"", "gpt_oss", "m", 0, false, 1, 0};
    expect_error([&] { export_layer(random_weights(problem.c(), 1), problem.c(), spec, {}, {}); },
                 MOE_STATUS_UNSUPPORTED, {message});
  }
}

TEST(Checkpoint, UnknownConventionIsRefusedAlikeByExportAndLoad) {
  const Written w = written("unknown", {"mixtral", MOE_FORMAT_BF16});
  CheckpointSpec spec = w.spec;
  spec.convention = "mixtral8x7b";
  const std::string message =
      "checkpoint convention 'mixtral8x7b' is not one of mixtral, deepseek, qwen_moe, gpt_oss, "
      "stacked";
  expect_error([&] { export_layer(w.weights, w.problem.c(), spec, {}, {}); },
               MOE_STATUS_CONFIG_ERROR, {message});
  expect_error([&] { load_layer(Checkpoint::open(spec.path), spec, w.problem.c()); },
               MOE_STATUS_CONFIG_ERROR, {message});
}

TEST(Checkpoint, InputScaleFromAmaxFollowsTheFormulaAndRefusesBadAmax) {
  EXPECT_FLOAT_EQ(input_scale_from_amax(2688.0f, "x"), 1.0f);  // 448 * 6
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), NAN}) {
    expect_error([&] { input_scale_from_amax(bad, "l.w1.input_amax"); },
                 MOE_STATUS_INVALID_ARGUMENT, {"'l.w1.input_amax'", "finite and > 0"});
  }
}

TEST(Checkpoint, RouterLogitsAddTheRouterBiasAndPlaceSinksAfterPaddedExperts) {
  LayerCheckpoint l;
  l.real_experts = 2;
  l.router_weight = HostTensor(MOE_DTYPE_F32, {3, 2});  // 2 routed + 1 sink
  const float w[] = {1, 0, 0, 1, 1, 1};
  std::memcpy(l.router_weight.raw(), w, sizeof(w));
  l.router_bias = HostTensor(MOE_DTYPE_F32, {3});
  const float b[] = {0.5f, 0, -1};
  std::memcpy(l.router_bias.raw(), b, sizeof(b));
  moe_problem p = default_problem();
  p.experts = 4;  // 2 real + 2 padding
  p.hidden = 2;
  p.sink_experts = 1;
  HostTensor hidden(MOE_DTYPE_BF16, {1, 2});
  hidden.data<uint16_t>()[0] = float_to_bf16(2.0f);
  hidden.data<uint16_t>()[1] = float_to_bf16(3.0f);
  const HostTensor logits = router_logits(l, p, hidden);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> want = {2.5f, 3.0f, -inf, -inf, 4.0f};
  EXPECT_EQ(std::vector<float>(logits.data<float>(), logits.data<float>() + 5), want);
}

// A shared expert or sink experts the checkpoint stores but the problem leaves out would load as a
// layer without them (every token's output short of their part): refused, naming a tensor.
TEST(Checkpoint, SharedAndSinkExpertsTheProblemLeavesOutAreRefused) {
  for (const auto& [convention, stored] : {std::pair{"deepseek", "m.shared_experts."},
                                           {"qwen_moe", "m.shared_expert."},
                                           {"stacked", "m.shared_w"}}) {
    SCOPED_TRACE(convention);
    const Written w = written(fmt::format("shared_left_{}", convention),
                              {convention, MOE_FORMAT_BF16, true, false, /*shared=*/true});
    Problem without = w.problem;
    without.raw().shared_intermediate = 0;
    without.finalize();
    expect_error([&] { load_layer(Checkpoint::open(w.spec.path), w.spec, without.c()); },
                 MOE_STATUS_CONFIG_ERROR,
                 {fmt::format("the checkpoint stores a shared expert ('{}", stored),
                  "the problem has shared_intermediate: 0"});
  }
  const Written sinks =
      written("sinks_left", {"stacked", MOE_FORMAT_BF16, true, false, false, /*sinks=*/true});
  Problem without = sinks.problem;
  without.raw().routing = MOE_ROUTING_SOFTMAX_TOPK;
  without.raw().sink_experts = 0;
  without.raw().sink_intermediate = 0;
  without.finalize();
  expect_error([&] { load_layer(Checkpoint::open(sinks.spec.path), sinks.spec, without.c()); },
               MOE_STATUS_CONFIG_ERROR,
               {"the checkpoint stores sink experts ('m.sink_w", "sink_experts: 0"});
}

// Experts after a gap (a shard left out of the index) were dropped: the count stopped at the
// gap. The first missing expert is named, and the tensor after it.
TEST(Checkpoint, AGapInThePerProjectionExpertsIsNamed) {
  const Written w = written("gap", {"mixtral", MOE_FORMAT_BF16});
  const std::string path = edited("gap", w, [](std::vector<NamedTensor>& ts) {
    ts.erase(
        std::remove_if(ts.begin(), ts.end(),
                       [](const NamedTensor& t) { return t.name.rfind("m.experts.1.", 0) == 0; }),
        ts.end());
  });
  expect_load_error(w, path, MOE_STATUS_NOT_FOUND,
                    {"checkpoint tensor 'm.experts.1.w2.weight' is missing: experts 0-0 have one",
                     "belongs to expert 2 after the gap"});
}

// Scales stored as BF16 or F16 (Qwen3's FP8 checkpoints store weight_scale_inv in BF16) are
// widened to f32 exactly: the layer loads with the stored values.
TEST(Checkpoint, HalfPrecisionScalesAreWidenedExactly) {
  const Written w = written("bf16_scales", {"deepseek", MOE_FORMAT_FP8_BLOCK});
  const std::string path = edited("bf16_scales", w, [](std::vector<NamedTensor>& ts) {
    for (auto& t : ts) {
      if (t.name.size() < 16 || t.name.compare(t.name.size() - 16, 16, "weight_scale_inv") != 0)
        continue;
      HostTensor half(MOE_DTYPE_BF16, t.tensor.shape());
      for (int64_t i = 0; i < half.numel(); ++i)
        half.data<uint16_t>()[i] = float_to_bf16(t.tensor.data<float>()[i]);
      t.tensor = half;
    }
  });
  CheckpointSpec spec = w.spec;
  spec.path = path;
  const LayerCheckpoint l = load_layer(Checkpoint::open(path), spec, w.problem.c());
  const HostTensor& got = l.weights.w2_scale;
  ASSERT_EQ(got.shape(), w.weights.w2_scale.shape());
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_EQ(got.data<float>()[i],
              bf16_to_float(float_to_bf16(w.weights.w2_scale.data<float>()[i])))
        << i;
  const Written t = written("f16_scalar", {"mixtral", MOE_FORMAT_FP8_TENSOR});
  const std::string scalar = edited("f16_scalar", t, [](std::vector<NamedTensor>& ts) {
    auto& s = tensor_named(ts, "m.experts.1.w2.weight_scale").tensor;
    HostTensor half(MOE_DTYPE_F16, s.shape());
    half.data<uint16_t>()[0] = 0x2000;  // 2^-7
    s = half;
  });
  spec = t.spec;
  spec.path = scalar;
  const LayerCheckpoint f = load_layer(Checkpoint::open(scalar), spec, t.problem.c());
  EXPECT_EQ(f.weights.w2_scale.data<float>()[1], 0.0078125f);
}

// A stacked NVFP4 global scale is checked like a per-projection one (it was taken as stored).
TEST(Checkpoint, AStackedNvfp4GlobalScaleMustBeFiniteAndPositive) {
  const Written w = written("st_nv_s2", {"stacked", MOE_FORMAT_NVFP4});
  for (const float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(bad);
    const std::string path = edited("st_nv_s2", w, [&](std::vector<NamedTensor>& ts) {
      tensor_named(ts, "m.w2_scale_2").tensor.data<float>()[1] = bad;
    });
    expect_load_error(w, path, MOE_STATUS_INVALID_ARGUMENT,
                      {"checkpoint tensor 'm.w2_scale_2'[1] is", "must be finite and > 0"});
  }
}

// A checkpoint of another format is named by its dtype, not by the sizes its packing implies.
TEST(Checkpoint, AnotherFormatsCheckpointIsRefusedForItsDtypeFirst) {
  const Written w = written("nv_as_bf16", {"mixtral", MOE_FORMAT_NVFP4});
  for (const moe_format f : {MOE_FORMAT_BF16, MOE_FORMAT_FP8_BLOCK}) {
    Problem other = w.problem;
    other.raw().format = f;
    other.raw().input_format = MOE_INPUT_DEFAULT;
    other.finalize();
    expect_error([&] { load_layer(Checkpoint::open(w.spec.path), w.spec, other.c()); },
                 MOE_STATUS_DTYPE_MISMATCH,
                 {"'m.experts.0.w2.weight' is U8, which cannot be converted to"});
  }
}

// A scale under neither of the format's two names is named by both.
TEST(Checkpoint, AScaleUnderNeitherNameNamesBoth) {
  const Written w = written("no_scale", {"deepseek", MOE_FORMAT_FP8_BLOCK});
  const std::string path = edited("no_scale", w, [](std::vector<NamedTensor>& ts) {
    ts.erase(std::remove_if(ts.begin(), ts.end(),
                            [](const NamedTensor& t) {
                              return t.name == "m.experts.2.gate_proj.weight_scale_inv";
                            }),
             ts.end());
  });
  expect_load_error(w, path, MOE_STATUS_NOT_FOUND,
                    {"'m.experts.2.gate_proj.weight_scale_inv' and "
                     "'m.experts.2.gate_proj.weight_scale' are both missing"});
}

}  // namespace
}  // namespace moe::test
