// checkpoint.router_dtype: the router GEMM's operands in bf16 (the default, as a bf16 model runs
// its gate) or fp32 (the values as given). A near-tie built by hand routes a token to one expert
// under bf16 and to the other under fp32, both in router_logits and through `moe run --inputs`
// (make_run_inputs), whose experts still take bf16 hidden states.
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "../support/test_env.hpp"
#include "moe/sdk/formats.hpp"
#include "run_inputs.hpp"

namespace moe::test {
namespace {

constexpr int64_t kHidden = 64;
constexpr float kUlp = 1.0f / 128;  // bf16 spacing in [1, 2)

// Two experts whose logits are x0 (router row 0 = e0) and 1.5 * x1 (row 1 = 1.5 e1), both rows
// exact in bf16. x0 = 1.5 + 0.55 ulp rounds up to 1.5 + ulp, x1 = 1 + 0.4 ulp rounds down to 1:
// bf16 logits {1.5 + ulp, 1.5} pick expert 0; fp32 logits {1.5 + 0.55 ulp, 1.5 + 0.6 ulp}
// (3.9e-4 apart, like the Qwen3 near-tie of issue 14) pick expert 1.
HostTensor near_tie_router() {
  HostTensor w(MOE_DTYPE_BF16, {2, kHidden});
  w.fill_bytes(0);
  w.data<uint16_t>()[0] = float_to_bf16(1.0f);
  w.data<uint16_t>()[kHidden + 1] = float_to_bf16(1.5f);
  return w;
}

// [1, H] f32; the columns the router ignores hold values bf16 cannot hold either.
HostTensor near_tie_hidden() {
  HostTensor x(MOE_DTYPE_F32, {1, kHidden});
  for (int64_t k = 0; k < kHidden; ++k) x.data<float>()[k] = 0.3f + 0.01f * float(k);
  x.data<float>()[0] = 1.5f + 0.55f * kUlp;
  x.data<float>()[1] = 1.0f + 0.4f * kUlp;
  return x;
}

Problem two_experts() {
  Problem p;
  p.raw().experts = 2;
  p.raw().top_k = 1;
  p.raw().hidden = kHidden;
  p.raw().intermediate = 32;
  p.finalize();
  validate_problem(p.c());
  return p;
}

std::vector<float> logits_of(const HostTensor& hidden, RouterDtype dtype,
                             const HostTensor& router = near_tie_router()) {
  LayerCheckpoint l;
  l.real_experts = 2;
  l.router_weight = router;
  const HostTensor t = router_logits(l, two_experts().c(), hidden, dtype);
  return {t.data<float>()[0], t.data<float>()[1]};
}

int32_t top1(const moe_problem& p, const Batch& batch) {
  static const Registry r = registry_of({build_plugin_dir()});
  return route_batch(*r.find("reference"), p, batch).ids.data<int32_t>()[0];
}

TEST(RouterDtype, ANearTieOfTwoExpertsFlipsBetweenBf16AndFp32) {
  const HostTensor x = near_tie_hidden();
  const std::vector<float> bf16 = logits_of(x, RouterDtype::kBf16);
  const std::vector<float> fp32 = logits_of(x, RouterDtype::kFp32);
  EXPECT_EQ(bf16, (std::vector<float>{1.5f + kUlp, 1.5f}));
  EXPECT_GT(bf16[0], bf16[1]);
  EXPECT_LT(fp32[0], fp32[1]);
  EXPECT_NEAR(fp32[1] - fp32[0], 0.05f * kUlp, 1e-6);
  Batch batch;
  batch.hidden = HostTensor(MOE_DTYPE_BF16, {1, kHidden});
  for (auto [logits, want] : {std::pair{bf16, 0}, std::pair{fp32, 1}}) {
    batch.logits = HostTensor(MOE_DTYPE_F32, {1, 2});
    std::memcpy(batch.logits.raw(), logits.data(), 2 * sizeof(float));
    EXPECT_EQ(top1(two_experts().c(), batch), want);
  }
}

TEST(RouterDtype, Bf16RoundsAnF32RouterWeightAndFp32KeepsIt) {
  HostTensor w(MOE_DTYPE_F32, {2, kHidden});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = 0.0f;
  w.data<float>()[0] = 1.0f + 0.3f * kUlp;  // bf16: 1.0
  HostTensor x(MOE_DTYPE_BF16, {1, kHidden});
  x.fill_bytes(0);
  x.data<uint16_t>()[0] = float_to_bf16(2.0f);
  EXPECT_EQ(logits_of(x, RouterDtype::kBf16, w)[0], 2.0f);
  EXPECT_EQ(logits_of(x, RouterDtype::kFp32, w)[0], 2.0f * (1.0f + 0.3f * kUlp));
}

TEST(RouterDtype, Bf16OperandsGiveTheSameLogitsInBothPrecisions) {
  HostTensor x(MOE_DTYPE_BF16, {1, kHidden});
  for (int64_t k = 0; k < kHidden; ++k) x.data<uint16_t>()[k] = float_to_bf16(0.37f * float(k));
  EXPECT_EQ(logits_of(x, RouterDtype::kBf16), logits_of(x, RouterDtype::kFp32));
}

// The whole `moe run --inputs` path: a stacked checkpoint with the near-tie router, and inputs
// holding the f32 hidden states.
TEST(RouterDtype, MoeRunInputsRouteF32HiddenStatesInTheConfigsPrecision) {
  const std::string dir = testing::TempDir();
  const std::string ckpt = (std::filesystem::path(dir) / "router_dtype.safetensors").string();
  const std::string inputs = (std::filesystem::path(dir) / "router_dtype_in.safetensors").string();
  const Problem p = two_experts();
  CheckpointSpec spec{ckpt, "stacked", "model.layers.{layer}.mlp", 0};
  write_safetensors(ckpt,
                    export_layer(random_weights(p.c(), 3), p.c(), spec, near_tie_router(), {}));
  write_safetensors(inputs, {{"hidden_states", near_tie_hidden()}});
  for (auto [dtype, want] : {std::pair{"bf16", 0}, std::pair{"fp32", 1}}) {
    const Config cfg = Config::parse(fmt::format(
        "problem: {{experts: 2, top_k: 1, hidden: {}, intermediate: 32}}\n"
        "checkpoint: {{path: {}, convention: stacked, prefix: \"model.layers.{{layer}}.mlp\",\n"
        "             router_dtype: {}}}\n",
        kHidden, ckpt, dtype));
    const tool::RunInputs in = tool::make_run_inputs(cfg, 1, 1, inputs);
    EXPECT_EQ(top1(p.c(), in.batch), want) << dtype;
    EXPECT_THAT(in.batch_from, testing::HasSubstr(fmt::format("router ({} GEMM)", dtype)));
    ASSERT_EQ(in.batch.hidden.dtype(), MOE_DTYPE_BF16);  // the experts' input, as the ABI says
    EXPECT_EQ(in.batch.hidden.data<uint16_t>()[0], float_to_bf16(1.5f + 0.55f * kUlp));
  }
}

}  // namespace
}  // namespace moe::test
