// Checkpoint dtypes: expert weights stored as F32, F16 or BF16 load under every convention into
// the problem's format, rounded to nearest even into bf16 or quantised with the rules of
// docs/design.md §3.2 as one canonical matrix (w13 = [gate; up]). Each case writes a checkpoint
// with the repo's safetensors writer and compares what loads with the conversion done by hand;
// a dtype that cannot be converted is refused naming the tensor.
#include <bit>
#include <filesystem>
#include <functional>

#include "../support/test_env.hpp"
#include "moe/sdk/format_table.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/weights.hpp"

namespace moe::test {
namespace {

struct Case {
  std::string convention;
  moe_format format;
  moe_dtype stored;
  bool shared = false, sinks = false, biases = false, interleaved = false;
};

Problem problem_of(const Case& c, moe_format format) {
  Problem p;
  moe_problem& r = p.raw();
  r.experts = 4;
  r.top_k = 2;
  r.hidden = 64;
  r.intermediate = 64;
  r.format = format;
  r.activation = c.convention == "gpt_oss" ? MOE_ACTIVATION_SWIGLU_OAI : MOE_ACTIVATION_SILU_MUL;
  r.expert_bias = c.biases;
  r.shared_intermediate = c.shared ? 32 : 0;
  if (c.sinks) {
    r.routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
    r.sink_experts = 2;
    r.sink_intermediate = 16;
  }
  p.finalize();
  validate_problem(p.c());
  return p;
}

std::string temp_file(const std::string& name) {
  return (std::filesystem::path(testing::TempDir()) / name).string();
}

// The value a bf16 value `v` of the canonical layer is stored as. Elementwise and a function of
// the value alone, so it commutes with every layout a convention applies (transposes,
// interleaving): the by-hand expectation is computed on canonical tensors. F32: v * (1 + 3/512),
// exact in f32 and not in bf16. F16: v * 1.25, exact in f16 (11 significant bits) for
// |v| >= 2^-14, smaller values flushed to 0 so they stay exact.
float stored_value(float v, moe_dtype stored) {
  if (stored == MOE_DTYPE_F32) return v * (1.0f + 3.0f / 512.0f);
  if (stored == MOE_DTYPE_F16) return std::fabs(v) < 0x1p-14f ? 0.0f : v * 1.25f;
  return v;
}

// An exact f16 value's bits (normal, or zero).
uint16_t f16_bits(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  const uint16_t sign = uint16_t((b >> 16) & 0x8000);
  if ((b & 0x7FFFFFFF) == 0) return sign;
  const uint32_t exp = (b >> 23) & 0xFF, man = b & 0x7FFFFF;
  EXPECT_EQ(man & 0x1FFF, 0u) << x << " is not an f16 value";
  return uint16_t(sign | ((exp - 112) << 10) | (man >> 13));
}

// A tensor of bf16 values (BF16, or F32 as some writers store biases) re-stored as `stored` with
// stored_value; any other tensor as it is.
HostTensor restore(const HostTensor& t, moe_dtype stored) {
  auto value = [&](int64_t i) {
    return t.dtype() == MOE_DTYPE_BF16 ? bf16_to_float(t.data<uint16_t>()[i]) : t.data<float>()[i];
  };
  if (t.dtype() != MOE_DTYPE_BF16 && t.dtype() != MOE_DTYPE_F32) return t;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (bf16_to_float(float_to_bf16(value(i))) != value(i)) return t;
  HostTensor out(stored, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = stored_value(value(i), stored);
    if (stored == MOE_DTYPE_F32) out.data<float>()[i] = v;
    if (stored == MOE_DTYPE_F16) out.data<uint16_t>()[i] = f16_bits(v);
    if (stored == MOE_DTYPE_BF16) out.data<uint16_t>()[i] = float_to_bf16(v);
  }
  return out;
}

// Values of canonical matrix `index` [rows, cols] of a bf16 stack (index -1: unstacked), as the
// checkpoint stores them.
std::vector<float> stored_matrix(const HostTensor& bf16, int64_t index, int64_t rows, int64_t cols,
                                 moe_dtype stored) {
  std::vector<float> out(size_t(rows * cols));
  const uint16_t* src = bf16.data<uint16_t>() + std::max<int64_t>(index, 0) * rows * cols;
  for (int64_t i = 0; i < rows * cols; ++i) out[i] = stored_value(bf16_to_float(src[i]), stored);
  return out;
}

struct Quantised {
  HostTensor q, scale;
  float scale_2 = 1.0f;
};

// The conversion by hand: bf16 and fp8_tensor from the element codecs and §3.2's formula, the
// block formats through the format table's quantiser (the one conformance weights are made with).
Quantised by_hand(moe_format f, const std::vector<float>& w, int64_t rows, int64_t cols) {
  const MatrixLayout l = matrix_layout(f, rows, cols);
  Quantised out{HostTensor(l.dtype, {rows, l.stored_cols}), {}, 1.0f};
  if (f == MOE_FORMAT_BF16) {
    for (int64_t i = 0; i < rows * cols; ++i) out.q.data<uint16_t>()[i] = float_to_bf16(w[i]);
    return out;
  }
  if (f == MOE_FORMAT_FP8_TENSOR) {
    double amax = 1e-10;
    for (float v : w) amax = std::max(amax, double(std::fabs(v)));
    const float scale = float(amax / 448.0);
    out.scale = HostTensor(MOE_DTYPE_F32, {1});
    out.scale.data<float>()[0] = scale;
    for (int64_t i = 0; i < rows * cols; ++i)
      out.q.data<uint8_t>()[i] = e4m3_from_double(double(w[i]) / double(scale));
    return out;
  }
  out.scale = HostTensor(l.scale_dtype, {l.scale_rows, l.scale_cols});
  quantize_matrix(f, w.data(), rows, cols, out.q.raw(), out.scale.raw(), &out.scale_2);
  return out;
}

// Slot `index` (-1: the whole tensor) of `got` holds `want`'s bytes.
void expect_slot(const HostTensor& got, int64_t index, const HostTensor& want,
                 const std::string& n) {
  if (want.empty()) return;
  const size_t at = size_t(std::max<int64_t>(index, 0)) * want.bytes();
  ASSERT_GE(got.bytes(), at + want.bytes()) << n;
  EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(got.raw()) + at, want.raw(), want.bytes()), 0)
      << n << " differs from the conversion by hand";
}

void expect_matrix(moe_format f, const HostTensor& bf16, const HostTensor& q,
                   const HostTensor& scale, const HostTensor& scale_2, int64_t index, int64_t rows,
                   int64_t cols, moe_dtype stored, const std::string& n) {
  const Quantised want = by_hand(f, stored_matrix(bf16, index, rows, cols, stored), rows, cols);
  expect_slot(q, index, want.q, n);
  expect_slot(scale, index, want.scale, n + " scale");
  if (!scale_2.empty()) {
    EXPECT_EQ(scale_2.data<float>()[std::max<int64_t>(index, 0)], want.scale_2) << n;
  }
}

std::vector<double> values(const HostTensor& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.dtype() == MOE_DTYPE_F32 ? t.data<float>()[i] : bf16_to_float(t.data<uint16_t>()[i]);
  return v;
}

std::vector<double> stored_values(const HostTensor& bf16, moe_dtype stored) {
  std::vector<double> v(bf16.numel());
  for (int64_t i = 0; i < bf16.numel(); ++i)
    v[i] = stored_value(bf16_to_float(bf16.data<uint16_t>()[i]), stored);
  return v;
}

const char* st_name(moe_dtype d) {
  return d == MOE_DTYPE_F32 ? "F32" : d == MOE_DTYPE_F16 ? "F16" : "BF16";
}

class CheckpointDtype : public testing::TestWithParam<Case> {};

TEST_P(CheckpointDtype, LoadsAsTheConversionByHand) {
  const Case& c = GetParam();
  const Problem source_problem = problem_of(c, MOE_FORMAT_BF16), problem = problem_of(c, c.format);
  const moe_problem pb = source_problem.c(), p = problem.c();
  const LayerWeights w = random_weights(pb, 41);  // bf16: the values every case starts from
  HostTensor router(MOE_DTYPE_BF16, {p.experts + p.sink_experts, p.hidden});
  for (int64_t i = 0; i < router.numel(); ++i)
    router.data<uint16_t>()[i] = float_to_bf16(float(i % 13) * 0.0625f - 0.375f);
  CheckpointSpec spec{temp_file(fmt::format("dtype_{}_{}_{}.safetensors", c.convention,
                                            format_name(c.format), st_name(c.stored))),
                      c.convention,
                      "model.layers.{layer}.mlp",
                      3,
                      c.interleaved,
                      1,
                      0};
  std::vector<NamedTensor> tensors = export_layer(w, pb, spec, router, {});
  for (NamedTensor& t : tensors) t.tensor = restore(t.tensor, c.stored);
  write_safetensors(spec.path, tensors);

  const LayerCheckpoint got = load_layer(Checkpoint::open(spec.path), spec, p);
  const LayerWeights& g = got.weights;
  const int64_t r13 = 2 * p.intermediate, is = p.shared_intermediate;
  for (int64_t e = 0; e < p.experts; ++e) {
    expect_matrix(c.format, w.w13, g.w13, g.w13_scale, g.w13_scale_2, e, r13, p.hidden, c.stored,
                  fmt::format("expert {} w13", e));
    expect_matrix(c.format, w.w2, g.w2, g.w2_scale, g.w2_scale_2, e, p.hidden, p.intermediate,
                  c.stored, fmt::format("expert {} w2", e));
  }
  if (c.shared) {
    expect_matrix(c.format, w.shared_w13, g.shared_w13, g.shared_w13_scale, g.shared_w13_scale_2,
                  -1, 2 * is, p.hidden, c.stored, "shared_w13");
    expect_matrix(c.format, w.shared_w2, g.shared_w2, g.shared_w2_scale, g.shared_w2_scale_2, -1,
                  p.hidden, is, c.stored, "shared_w2");
  }
  if (c.sinks) {  // always bf16
    const int64_t n = w.sink_w13.numel();
    const Quantised s13 =
        by_hand(MOE_FORMAT_BF16, stored_matrix(w.sink_w13, -1, 1, n, c.stored), 1, n);
    expect_slot(g.sink_w13, -1, s13.q, "sink_w13");
  }
  if (c.biases) {
    EXPECT_EQ(values(g.b13), stored_values(w.b13, c.stored));
  }
  EXPECT_EQ(values(got.router_weight), stored_values(router, c.stored));

  // What was converted, for `moe run` and `moe describe` to say.
  const bool converts = c.stored != MOE_DTYPE_BF16 || c.format != MOE_FORMAT_BF16;
  ASSERT_EQ(got.conversions.empty(), !converts) << describe_conversions(got.conversions);
  if (!converts) return;
  EXPECT_EQ(got.conversions[0].from, st_name(c.stored));
  bool to_format = false;
  for (const auto& k : got.conversions) to_format |= k.to == format_name(c.format);
  EXPECT_TRUE(to_format) << describe_conversions(got.conversions);
  EXPECT_THAT(describe_conversions(got.conversions),
              testing::HasSubstr(
                  fmt::format("{} tensors -> {} (", st_name(c.stored), format_name(c.format))));
  EXPECT_EQ(describe_conversions(preview_conversions(Checkpoint::open(spec.path), spec, p), false)
                .empty(),
            false);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  auto add = [&](const Case& base, std::initializer_list<moe_format> formats) {
    for (moe_format format : formats)
      for (moe_dtype stored : {MOE_DTYPE_F32, MOE_DTYPE_F16, MOE_DTYPE_BF16}) {
        Case c = base;
        c.format = format;
        c.stored = stored;
        out.push_back(c);
      }
  };
  add({"mixtral", {}, {}}, {MOE_FORMAT_BF16, MOE_FORMAT_FP8_TENSOR});
  add({"deepseek", {}, {}, true}, {MOE_FORMAT_FP8_BLOCK, MOE_FORMAT_NVFP4});
  add({"qwen_moe", {}, {}, true}, {MOE_FORMAT_BF16, MOE_FORMAT_MXFP8});
  // gpt_oss stores interleaved gate/up columns: quantised at load even into fp8_block, whose
  // 128-row scale blocks could not be split out of a quantised interleaved checkpoint.
  add({"gpt_oss", {}, {}, false, false, true},
      {MOE_FORMAT_BF16, MOE_FORMAT_MXFP4, MOE_FORMAT_FP8_BLOCK});
  add({"stacked", {}, {}, true, true, true, true}, {MOE_FORMAT_MXFP8, MOE_FORMAT_NVFP4});
  add({"stacked", {}, {}, true, true, false, false}, {MOE_FORMAT_BF16, MOE_FORMAT_FP8_BLOCK});
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryConvention, CheckpointDtype, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& i) {
                           const Case& c = i.param;
                           return fmt::format("{}_{}_as_{}{}{}", c.convention, st_name(c.stored),
                                              format_name(c.format), c.sinks ? "_sinks" : "",
                                              c.interleaved ? "_interleaved" : "");
                         });

// A mixtral checkpoint of random F32 projections (stored_value of bf16 ones), edited by `edit`.
std::string f32_mixtral(const std::string& name, const Problem& problem,
                        const std::function<void(std::vector<NamedTensor>&)>& edit) {
  Problem pb = problem;
  pb.raw().format = MOE_FORMAT_BF16;
  pb.finalize();
  const LayerWeights w = random_weights(pb.c(), 7);
  const CheckpointSpec spec{"", "mixtral", "m", 0, false, 1, 0};
  std::vector<NamedTensor> tensors = export_layer(w, pb.c(), spec, {}, {});
  for (NamedTensor& t : tensors) t.tensor = restore(t.tensor, MOE_DTYPE_F32);
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

TEST(DtypeAtLoad, F32ToBf16RoundsToNearestWithTiesToEven) {
  const Problem problem = small_problem(MOE_FORMAT_BF16);
  // bf16 keeps 7 fraction bits: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
  const float ties[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(1.0f + 0x1p-8f),
                        1.0f + 0x1p-8f + 0x1p-20f, 1.0f + 0x1p-9f};
  const uint16_t want[] = {0x3F80, 0x3F82, 0xBF80, 0x3F81, 0x3F80};
  const std::string path = f32_mixtral("ties", problem, [&](std::vector<NamedTensor>& ts) {
    HostTensor& w1 = tensor_named(ts, "m.experts.0.w1.weight").tensor;
    for (int i = 0; i < 5; ++i) w1.data<float>()[i] = ties[i];
  });
  const CheckpointSpec spec{path, "mixtral", "m", 0, false, 1, 0};
  const LayerCheckpoint got = load_layer(Checkpoint::open(path), spec, problem.c());
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(got.weights.w13.data<uint16_t>()[i], want[i]) << "value " << ties[i];
  ASSERT_EQ(got.conversions.size(), 1u);
  EXPECT_EQ(describe_conversions(got.conversions),
            "12 F32 tensors -> bf16 (rounded to nearest even)");
}

TEST(DtypeAtLoad, Int8WithoutScalesIsRefusedNamingTheTensor) {
  for (moe_format f : {MOE_FORMAT_BF16, MOE_FORMAT_FP8_TENSOR, MOE_FORMAT_MXFP8}) {
    const Problem problem = small_problem(f);
    const std::string path = f32_mixtral("int8", problem, [](std::vector<NamedTensor>& ts) {
      tensor_named(ts, "m.experts.2.w3.weight").tensor = HostTensor(MOE_DTYPE_I8, {32, 64});
    });
    const CheckpointSpec spec{path, "mixtral", "m", 0, false, 1, 0};
    expect_error(
        [&] { load_layer(Checkpoint::open(path), spec, problem.c()); }, MOE_STATUS_DTYPE_MISMATCH,
        {fmt::format("checkpoint tensor 'm.experts.2.w3.weight' is I8, which cannot be "
                     "converted to {}",
                     format_name(f)),
         "or converted at load from F32, F16 or BF16", "convention mixtral, prefix 'm', layer 0"});
  }
}

TEST(DtypeAtLoad, StackedInt32AndGptOssF64AreRefusedNamingTheTensor) {
  Case c{"stacked", MOE_FORMAT_NVFP4, MOE_DTYPE_F32};
  const Problem stacked = problem_of(c, MOE_FORMAT_NVFP4);
  const std::string path = temp_file("stacked_i32.safetensors");
  write_safetensors(path, {{"m.w13", HostTensor(MOE_DTYPE_I32, {4, 128, 64})},
                           {"m.w2", HostTensor(MOE_DTYPE_F32, {4, 64, 64})}});
  const CheckpointSpec spec{path, "stacked", "m", 0, false, 1, 0};
  expect_error([&] { load_layer(Checkpoint::open(path), spec, stacked.c()); },
               MOE_STATUS_DTYPE_MISMATCH,
               {"checkpoint tensor 'm.w13' is I32, which cannot be converted to nvfp4: expert "
                "weights are read as packed e2m1 bytes (U8) with the format's scales"});

  c.convention = "gpt_oss";
  const Problem gpt = problem_of(c, MOE_FORMAT_FP8_TENSOR);
  const std::string gpath = temp_file("gpt_oss_f64.safetensors");
  write_safetensors(gpath, {{"m.experts.gate_up_proj", HostTensor(MOE_DTYPE_F64, {4, 64, 128})},
                            {"m.experts.down_proj", HostTensor(MOE_DTYPE_F64, {4, 64, 64})},
                            {"m.router.weight", HostTensor(MOE_DTYPE_BF16, {4, 64})}});
  const CheckpointSpec gspec{gpath, "gpt_oss", "m", 0, false, 1, 0};
  expect_error([&] { load_layer(Checkpoint::open(gpath), gspec, gpt.c()); }, MOE_STATUS_UNSUPPORTED,
               {"checkpoint tensor 'm.experts.gate_up_proj' is F64: gpt_oss stores fp8_tensor "
                "weights as F32, F16 or BF16 (converted at load)"});
}

TEST(DtypeAtLoad, GateAndUpStoredDifferentlyAreRefused) {
  // A quantised gate beside an F32 up: one half would be quantised again, the other not.
  const Problem problem = small_problem(MOE_FORMAT_FP8_TENSOR);
  const LayerWeights w = random_weights(problem.c(), 9);
  const CheckpointSpec spec{temp_file("mixed.safetensors"), "mixtral", "m", 0, false, 1, 0};
  std::vector<NamedTensor> tensors = export_layer(w, problem.c(), spec, {}, {});
  tensor_named(tensors, "m.experts.1.w3.weight").tensor = HostTensor(MOE_DTYPE_F32, {32, 64});
  tensor_named(tensors, "m.experts.1.w3.weight").tensor.fill_bytes(0);
  write_safetensors(spec.path, tensors);
  expect_error([&] { load_layer(Checkpoint::open(spec.path), spec, problem.c()); },
               MOE_STATUS_UNSUPPORTED,
               {"expert 1: gate and up are stored differently, one in fp8_tensor's own dtype and "
                "the other as a dense float tensor converted at load"});
}

}  // namespace
}  // namespace moe::test
