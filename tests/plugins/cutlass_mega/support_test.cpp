// What cutlass_mega takes and refuses, and that it has no options, on any machine: the refusals
// name the reason and the value.
#include <gtest/gtest.h>

#include <string>

#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"
#include "src/mega_layer.hpp"

namespace moe::mega {
namespace {

moe_problem bf16_problem() {
  moe_problem p = default_problem();
  p.experts = 16;
  p.local_experts = 16;
  p.top_k = 4;
  p.hidden = 256;
  p.intermediate = 192;
  p.max_tokens = 64;
  return p;
}

void expect_refusal(const moe_problem& p, moe_reason reason, const std::string& words) {
  const sdk::Verdict v = check_support(p, false);
  EXPECT_EQ(v.reason, reason) << v.message;
  EXPECT_NE(v.message.find(words), std::string::npos) << v.message;
}

TEST(MegaSupport, TakesBf16DecodeProblemsOfEveryActivation) {
  for (moe_activation a : {MOE_ACTIVATION_SILU_MUL, MOE_ACTIVATION_SILU_MUL_CLAMP,
                           MOE_ACTIVATION_SWIGLU_OAI, MOE_ACTIVATION_GELU_MUL}) {
    moe_problem p = bf16_problem();
    p.activation = a;
    EXPECT_TRUE(check_support(p, false).ok()) << check_support(p, false).message;
  }
  moe_problem p = bf16_problem();
  p.activation = MOE_ACTIVATION_RELU2;
  p.intermediate = 256;
  EXPECT_TRUE(check_support(p, false).ok()) << check_support(p, false).message;
}

moe_problem fp8_problem() {
  moe_problem p = bf16_problem();
  p.format = MOE_FORMAT_FP8_BLOCK;
  p.input_format = MOE_INPUT_FP8_1X128;
  p.intermediate = 256;
  return p;
}

TEST(MegaSupport, TakesFp8BlockWithFp8ActivationsOfEveryActivation) {
  for (moe_activation a :
       {MOE_ACTIVATION_SILU_MUL, MOE_ACTIVATION_SILU_MUL_CLAMP, MOE_ACTIVATION_SWIGLU_OAI,
        MOE_ACTIVATION_GELU_MUL, MOE_ACTIVATION_RELU2}) {
    moe_problem p = fp8_problem();
    p.activation = a;
    EXPECT_TRUE(check_support(p, false).ok()) << check_support(p, false).message;
  }
}

TEST(MegaSupport, RefusesFp8BlockShapesAndActivationFormatsItCannotRun) {
  moe_problem p = fp8_problem();
  p.input_format = MOE_INPUT_BF16;
  expect_refusal(p, MOE_REASON_INPUT_FORMAT, "fp8_1x128 activations only, not bf16");
  p = fp8_problem();
  p.intermediate = 192;  // the bf16 path's 64-column items would take it; scale blocks do not
  expect_refusal(p, MOE_REASON_SHAPE, "intermediate=192 of 128");
  p = fp8_problem();
  p.hidden = 16384;  // 128 scale blocks along K do not fit the item's shared memory
  expect_refusal(p, MOE_REASON_SHAPE, "at most 15360");
}

TEST(MegaSupport, RefusesWhatItCannotRunWithTheReasonAndTheValue) {
  moe_problem p = bf16_problem();
  p.format = MOE_FORMAT_MXFP4;
  expect_refusal(p, MOE_REASON_FORMAT, "not mxfp4");
  p = bf16_problem();
  p.input_format = MOE_INPUT_FP8_1X128;
  expect_refusal(p, MOE_REASON_INPUT_FORMAT, "bf16 activations only, not fp8_1x128");
  p = bf16_problem();
  p.expert_bias = 1;
  expect_refusal(p, MOE_REASON_BIAS, "biases");
  p = bf16_problem();
  p.shared_intermediate = 64;
  expect_refusal(p, MOE_REASON_SHARED, "shared and sink");
  p = bf16_problem();
  p.redundant_experts = 2;
  expect_refusal(p, MOE_REASON_EP, "EPLB");
  p = bf16_problem();
  p.hidden = 192;
  expect_refusal(p, MOE_REASON_SHAPE, "hidden=192");
  p = bf16_problem();
  p.intermediate = 200;
  expect_refusal(p, MOE_REASON_SHAPE, "intermediate=200");
  p = bf16_problem();
  p.activation = MOE_ACTIVATION_RELU2;  // 128 columns per item without a gate
  expect_refusal(p, MOE_REASON_SHAPE, "intermediate=192 of 128");
  p = bf16_problem();
  p.experts = p.local_experts = 1024;
  expect_refusal(p, MOE_REASON_SHAPE, "1024 experts");
  p = bf16_problem();
  p.max_tokens = 2048;  // x 4 slots = 8192 > 4096
  expect_refusal(p, MOE_REASON_MAX_TOKENS, "max_tokens=2048 x top_k=4");
}

TEST(MegaOptions, HasNoneAndRefusesAnyNamingIt) {
  parse_options({});
  try {
    parse_options({{"splits", "3"}});
    ADD_FAILURE() << "accepted an option";
  } catch (const moe::Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_CONFIG_ERROR);
    EXPECT_NE(std::string(e.what()).find("unknown option 'splits'"), std::string::npos) << e.what();
  }
}

TEST(MegaDescribe, SaysWhatRunsAndTheBatchLimit) {
  moe_problem p = bf16_problem();
  const std::string d = describe(p);
  EXPECT_NE(d.find("one cooperative launch"), std::string::npos) << d;
  EXPECT_NE(d.find("batches up to 64 tokens"), std::string::npos) << d;
  const std::string f = describe(fp8_problem());
  EXPECT_NE(f.find("fp8_block weights as given"), std::string::npos) << f;
  EXPECT_NE(f.find("quantised per token per 128 channels inside the kernel"), std::string::npos)
      << f;
}

}  // namespace
}  // namespace moe::mega
