// interleaved_gate_up: every fused gate/up tensor of the stacked convention (routed w13, the
// shared expert's shared_w13 and the sinks' sink_w13) is stored with interleaved rows
// [g0, u0, g1, u1, ...] and loaded as halves [gate; up]. Export and load round-trip exactly for
// every combination of interleaving, shared expert and sinks, and a hand-built checkpoint whose
// de-interleaved form is known pins what the loader reads, independently of the exporter.
#include <filesystem>

#include "../support/test_env.hpp"
#include "moe/sdk/formats.hpp"

namespace moe::test {
namespace {

struct Combo {
  moe_format format;
  bool interleaved, shared, sinks;
};

Problem problem_of(const Combo& c) {
  Problem p;
  moe_problem& r = p.raw();
  r.experts = 4;
  r.top_k = 2;
  r.hidden = 64;
  r.intermediate = 32;
  r.format = c.format;
  r.activation = MOE_ACTIVATION_SILU_MUL;
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

void expect_same_bytes(const HostTensor& got, const HostTensor& want, const char* name) {
  ASSERT_EQ(got.shape(), want.shape()) << name;
  ASSERT_EQ(got.bytes(), want.bytes()) << name;
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.bytes()), 0) << name << " differs";
}

class InterleaveRoundTrip : public testing::TestWithParam<Combo> {};

TEST_P(InterleaveRoundTrip, ExportThenLoadGivesTheSameCanonicalTensors) {
  const Combo& c = GetParam();
  const Problem problem = problem_of(c);
  const moe_problem p = problem.c();
  const LayerWeights w = random_weights(p, 23);
  const std::string file = fmt::format("interleave_{}_{}{}{}.safetensors", format_name(c.format),
                                       int(c.interleaved), int(c.shared), int(c.sinks));
  const CheckpointSpec spec{
      temp_file(file), "stacked", "layers.{layer}.moe", 2, c.interleaved, 1, 0};
  write_safetensors(spec.path, export_layer(w, p, spec, {}, {}));
  const LayerWeights got = load_layer(Checkpoint::open(spec.path), spec, p).weights;
  expect_same_bytes(got.w13, w.w13, "w13");
  expect_same_bytes(got.w13_scale, w.w13_scale, "w13_scale");
  expect_same_bytes(got.w13_scale_2, w.w13_scale_2, "w13_scale_2");
  expect_same_bytes(got.w2, w.w2, "w2");
  expect_same_bytes(got.w2_scale, w.w2_scale, "w2_scale");
  expect_same_bytes(got.shared_w13, w.shared_w13, "shared_w13");
  expect_same_bytes(got.shared_w13_scale, w.shared_w13_scale, "shared_w13_scale");
  expect_same_bytes(got.shared_w13_scale_2, w.shared_w13_scale_2, "shared_w13_scale_2");
  expect_same_bytes(got.shared_w2, w.shared_w2, "shared_w2");
  expect_same_bytes(got.shared_w2_scale, w.shared_w2_scale, "shared_w2_scale");
  expect_same_bytes(got.sink_w13, w.sink_w13, "sink_w13");
  expect_same_bytes(got.sink_w2, w.sink_w2, "sink_w2");
}

std::vector<Combo> every_combination() {
  std::vector<Combo> out;
  for (moe_format f : {MOE_FORMAT_BF16, MOE_FORMAT_FP8_TENSOR, MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4})
    for (bool interleaved : {false, true})
      for (bool shared : {false, true})
        for (bool sinks : {false, true}) out.push_back({f, interleaved, shared, sinks});
  return out;
}

INSTANTIATE_TEST_SUITE_P(StackedConvention, InterleaveRoundTrip,
                         testing::ValuesIn(every_combination()),
                         [](const testing::TestParamInfo<Combo>& i) {
                           const Combo& c = i.param;
                           return std::string(format_name(c.format)) +
                                  (c.interleaved ? "_interleaved" : "_halves") +
                                  (c.shared ? "_shared" : "") + (c.sinks ? "_sinks" : "");
                         });

// Row j of gate (+) or up (-) of matrix `m`: a small integer, exact in bf16, that says which row
// of which matrix it is (m * 32 + j + 1 <= 255 for m < 8, j < 31).
float tag(int64_t m, int64_t j, bool up) {
  return float(up ? -1 : 1) * float(m * 32 + j + 1);
}

// `count` fused matrices [2n, H] of bf16 rows, interleaved [g0, u0, g1, u1, ...]; matrix m has
// tag offset `first + m`.
HostTensor interleaved_by_hand(std::vector<int64_t> shape, int64_t count, int64_t n, int64_t h,
                               int64_t first) {
  HostTensor t(MOE_DTYPE_BF16, std::move(shape));
  for (int64_t m = 0; m < count; ++m)
    for (int64_t r = 0; r < 2 * n; ++r)
      for (int64_t k = 0; k < h; ++k)
        t.data<uint16_t>()[(m * 2 * n + r) * h + k] = float_to_bf16(tag(first + m, r / 2, r % 2));
  return t;
}

// What de-interleaving must give: rows [0, n) gate, [n, 2n) up, of the same tags.
void expect_halves(const HostTensor& t, int64_t count, int64_t n, int64_t h, int64_t first,
                   const char* name) {
  ASSERT_EQ(t.numel(), count * 2 * n * h) << name;
  for (int64_t m = 0; m < count; ++m)
    for (int64_t r = 0; r < 2 * n; ++r) {
      const float want = tag(first + m, r % n, r >= n);
      for (int64_t k = 0; k < h; ++k)
        ASSERT_EQ(bf16_to_float(t.data<uint16_t>()[(m * 2 * n + r) * h + k]), want)
            << name << " matrix " << m << " row " << r << " column " << k;
    }
}

TEST(InterleavedGateUp, EveryFusedTensorIsSplitIntoGateAndUpHalvesOnLoad) {
  const Problem problem = problem_of({MOE_FORMAT_BF16, true, true, true});
  const moe_problem p = problem.c();
  const int64_t E = p.experts, H = p.hidden, I = p.intermediate, Is = p.shared_intermediate,
                S = p.sink_experts, Ik = p.sink_intermediate;
  HostTensor w2(MOE_DTYPE_BF16, {E, H, I}), shared_w2(MOE_DTYPE_BF16, {H, Is}),
      sink_w2(MOE_DTYPE_BF16, {S, H, Ik});
  for (HostTensor* t : {&w2, &shared_w2, &sink_w2}) t->fill_bytes(0);
  const std::string path = temp_file("interleaved_by_hand.safetensors");
  // Tags 0..3 routed experts, 4 the shared expert, 5..6 the sinks.
  write_safetensors(path, {{"m.w13", interleaved_by_hand({E, 2 * I, H}, E, I, H, 0)},
                           {"m.w2", w2},
                           {"m.shared_w13", interleaved_by_hand({2 * Is, H}, 1, Is, H, E)},
                           {"m.shared_w2", shared_w2},
                           {"m.sink_w13", interleaved_by_hand({S, 2 * Ik, H}, S, Ik, H, E + 1)},
                           {"m.sink_w2", sink_w2}});
  const CheckpointSpec spec{path, "stacked", "m", 0, true, 1, 0};
  const LayerWeights got = load_layer(Checkpoint::open(path), spec, p).weights;
  expect_halves(got.w13, E, I, H, 0, "w13");
  expect_halves(got.shared_w13, 1, Is, H, E, "shared_w13");
  expect_halves(got.sink_w13, S, Ik, H, E + 1, "sink_w13");
}

TEST(InterleavedGateUp, Fp8BlockSharedExpertIsRefusedAlikeByExportAndLoad) {
  // A 128-row scale block spans gate and up rows once they are interleaved: neither side can
  // store or split them exactly, and both say so naming the tensor.
  Problem problem = problem_of({MOE_FORMAT_FP8_BLOCK, true, true, false});
  problem.raw().intermediate = 128;
  problem.raw().shared_intermediate = 128;
  problem.finalize();
  const moe_problem p = problem.c();
  const LayerWeights w = random_weights(p, 5);
  CheckpointSpec spec{
      temp_file("fp8_block_interleaved.safetensors"), "stacked", "m", 0, true, 1, 0};
  expect_error([&] { export_layer(w, p, spec, {}, {}); }, MOE_STATUS_UNSUPPORTED,
               {"w13", "fp8_block scales cannot follow interleaved rows"});
  spec.interleaved_gate_up = false;
  write_safetensors(spec.path, export_layer(w, p, spec, {}, {}));
  spec.interleaved_gate_up = true;
  expect_error([&] { load_layer(Checkpoint::open(spec.path), spec, p); }, MOE_STATUS_UNSUPPORTED,
               {"m.w13: interleaved gate/up rows share 128-row fp8_block scale blocks"});
}

}  // namespace
}  // namespace moe::test
