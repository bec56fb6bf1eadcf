// What cutlass_mega takes and refuses, its options and its GEMM2 split rule, on any machine: the
// refusals name the reason and the value; the split divides I / 64 and gives every CTA an item.
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

TEST(MegaSupport, RefusesWhatItCannotRunWithTheReasonAndTheValue) {
  moe_problem p = bf16_problem();
  p.format = MOE_FORMAT_FP8_BLOCK;
  expect_refusal(p, MOE_REASON_FORMAT, "not fp8_block");
  p = bf16_problem();
  p.input_format = MOE_INPUT_FP8_1X128;
  expect_refusal(p, MOE_REASON_INPUT_FORMAT, "bf16 activations");
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

TEST(MegaOptions, ParsesSplitsAndRefusesTheRest) {
  EXPECT_FALSE(parse_options({}).splits.has_value());
  EXPECT_FALSE(parse_options({{"splits", "auto"}}).splits.has_value());
  EXPECT_EQ(parse_options({{"splits", "3"}}).splits.value_or(0), 3);
  for (const auto& [key, value, words] :
       {std::tuple<const char*, const char*, const char*>{"splits", "0", "splits '0'"},
        {"splits", "x", "splits 'x'"},
        {"tiles", "wide", "unknown option 'tiles'"}}) {
    try {
      parse_options({{key, value}});
      ADD_FAILURE() << "accepted " << key << ": " << value;
    } catch (const moe::Error& e) {
      EXPECT_EQ(e.status(), MOE_STATUS_CONFIG_ERROR);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  }
}

TEST(MegaSplits, DivideIAndGiveEveryCtaAnItem) {
  moe_problem p = default_problem();
  p.hidden = 7168;        // 56 tiles of 128 rows
  p.intermediate = 2048;  // 32 K steps of 64
  const LayerOptions o;
  EXPECT_EQ(gemm2_splits(p, o, 1, 132), 4);    // 56 items x 4 >= 132, 4 divides 32
  EXPECT_EQ(gemm2_splits(p, o, 64, 132), 4);   // one token chunk still
  EXPECT_EQ(gemm2_splits(p, o, 65, 132), 2);   // two chunks: 112 items x 2
  EXPECT_EQ(gemm2_splits(p, o, 512, 132), 1);  // 8 chunks: 448 items
  p.hidden = 2048;                             // 16 tiles
  p.intermediate = 768;                        // 12 K steps: divisors 1 2 3 4 6 12
  EXPECT_EQ(gemm2_splits(p, o, 1, 132), 12);   // wants 9: the next divisor is 12
  LayerOptions three;
  three.splits = 3;
  EXPECT_EQ(gemm2_splits(p, three, 1, 132), 3);
  three.splits = 5;
  try {
    gemm2_splits(p, three, 1, 132);
    ADD_FAILURE() << "splits 5 of 12 steps accepted";
  } catch (const moe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("splits=5 must divide"), std::string::npos) << e.what();
  }
}

TEST(MegaDescribe, SaysWhatRunsAndTheBatchLimit) {
  moe_problem p = bf16_problem();
  const std::string d = describe(p, {});
  EXPECT_NE(d.find("one cooperative launch"), std::string::npos) << d;
  EXPECT_NE(d.find("batches up to 64 tokens"), std::string::npos) << d;
}

}  // namespace
}  // namespace moe::mega
