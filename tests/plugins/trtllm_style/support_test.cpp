// What trtllm_style takes and refuses, through the C ABI on any machine: bf16 weights on bf16
// activations, fp8_tensor weights on per-tensor e4m3 activations, fp8_block weights on 1x128
// ones, mxfp4 and nvfp4 weights on bf16 ones; the refusals name the reason and the value. Without
// an sm_90 GPU a problem it takes is refused for the device (last check).
#include "../../support/scoped_env.hpp"
#include "../../support/test_env.hpp"
#include "moe/sdk/formats.hpp"

namespace moe::test {
namespace {

class TrtllmSupport : public testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_unique<Registry>(registry_of({build_plugin_dir()}));
    plugin_ = registry_->find("trtllm_style");
    if (plugin_ == nullptr) GTEST_SKIP() << "trtllm_style was not built (no CUDA or CUTLASS)";
  }

  // E=16 k=4 H=256 I=192 fp8_tensor weights on `input` activations.
  Problem fp8(moe_input_format input) const {
    Problem q;
    q.raw().experts = 16;
    q.raw().top_k = 4;
    q.raw().hidden = 256;
    q.raw().intermediate = 192;
    q.raw().max_tokens = 64;
    q.raw().format = MOE_FORMAT_FP8_TENSOR;
    q.raw().input_format = input;
    return q;
  }

  void expect_refusal(Problem q, moe_reason reason, const std::string& words) const {
    q.finalize();
    const Support s = plugin_->supports(q.c());
    EXPECT_FALSE(s.supported);
    EXPECT_EQ(s.reason, reason) << s.message;
    EXPECT_THAT(s.message, testing::HasSubstr(words));
  }

  // Taken: supported on an sm_90 GPU, else refused for the device and nothing earlier.
  void expect_taken(Problem q) const {
    q.finalize();
    const Support s = plugin_->supports(q.c());
    if (!s.supported) {
      EXPECT_EQ(s.reason, MOE_REASON_ARCH) << s.message;
    }
  }

  std::unique_ptr<Registry> registry_;
  std::shared_ptr<Plugin> plugin_;
};

TEST_F(TrtllmSupport, TakesFp8TensorWeightsOnDynamicOrStaticActivations) {
  expect_taken(fp8(MOE_INPUT_FP8_TENSOR_DYNAMIC));
  expect_taken(fp8(MOE_INPUT_FP8_TENSOR_STATIC));
  Problem shared = fp8(MOE_INPUT_FP8_TENSOR_DYNAMIC);
  shared.raw().shared_intermediate = 192;
  shared.raw().expert_bias = 1;
  expect_taken(shared);
}

TEST_F(TrtllmSupport, Fp8TensorWeightsOnOtherActivationsAreRefusedByName) {
  expect_refusal(fp8(MOE_INPUT_BF16), MOE_REASON_INPUT_FORMAT,
                 "fp8_tensor_dynamic or fp8_tensor_static, not bf16");
  expect_refusal(fp8(MOE_INPUT_FP8_1X128), MOE_REASON_INPUT_FORMAT, "not fp8_1x128");
}

TEST_F(TrtllmSupport, Bf16WeightsTakeBf16ActivationsOnly) {
  Problem q = fp8(MOE_INPUT_FP8_TENSOR_DYNAMIC);
  q.raw().format = MOE_FORMAT_BF16;
  expect_refusal(q, MOE_REASON_INPUT_FORMAT,
                 "bf16 weights take bf16 activations only, not fp8_tensor_dynamic");
}

TEST_F(TrtllmSupport, Fp8TensorNeedsAHiddenSizeOf16ByteRowsAndNoSinks) {
  Problem narrow = fp8(MOE_INPUT_FP8_TENSOR_DYNAMIC);
  narrow.raw().hidden = 264;  // a multiple of 8 (bf16's rule) but not of 16
  expect_refusal(narrow, MOE_REASON_SHAPE, "hidden=264 must be a multiple of 16");
  Problem sinks = fp8(MOE_INPUT_FP8_TENSOR_DYNAMIC);
  sinks.raw().sink_experts = 2;
  sinks.raw().sink_intermediate = 192;
  sinks.raw().routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  sinks.raw().routing_bias = 1;
  expect_refusal(sinks, MOE_REASON_SHARED, "sink experts are bf16");
}

// fp8_block: E=16 k=4 H=256 I=256 on `input` activations.
Problem fp8_block(moe_input_format input) {
  Problem q;
  q.raw().experts = 16;
  q.raw().top_k = 4;
  q.raw().hidden = 256;
  q.raw().intermediate = 256;
  q.raw().max_tokens = 64;
  q.raw().format = MOE_FORMAT_FP8_BLOCK;
  q.raw().input_format = input;
  return q;
}

// More routing columns a token than the combine takes: refused by supports (it failed at run,
// after permutation and both GEMMs).
TEST_F(TrtllmSupport, RefusesMoreColumnsATokenThanTheCombineTakes) {
  Problem wide = fp8_block(MOE_INPUT_FP8_1X128);
  wide.raw().experts = 64;
  wide.raw().top_k = 32;
  expect_taken(wide);
  wide.raw().top_k = 33;
  expect_refusal(wide, MOE_REASON_OTHER, "top_k + sink_experts = 33 columns a token");
}

TEST_F(TrtllmSupport, TakesFp8BlockWeightsOn1x128Activations) {
  expect_taken(fp8_block(MOE_INPUT_FP8_1X128));
  expect_taken(fp8_block(MOE_INPUT_DEFAULT));  // fp8_block's default is fp8_1x128
  Problem shared = fp8_block(MOE_INPUT_FP8_1X128);
  shared.raw().shared_intermediate = 256;
  shared.raw().expert_bias = 1;
  shared.raw().activation = MOE_ACTIVATION_SWIGLU_OAI;
  expect_taken(shared);
  Problem relu2 = fp8_block(MOE_INPUT_FP8_1X128);
  relu2.raw().activation = MOE_ACTIVATION_RELU2;
  expect_taken(relu2);
}

TEST_F(TrtllmSupport, Fp8BlockRefusesOtherActivationsAndPartialBlocksAndTakesSinksApart) {
  expect_refusal(fp8_block(MOE_INPUT_FP8_TENSOR_DYNAMIC), MOE_REASON_INPUT_FORMAT,
                 "fp8_1x128, not fp8_tensor_dynamic");
  Problem partial = fp8_block(MOE_INPUT_FP8_1X128);
  partial.raw().intermediate = 192;
  expect_refusal(partial, MOE_REASON_SHAPE, "intermediate=192 to be multiples of 128");
  Problem sinks = fp8_block(MOE_INPUT_FP8_1X128);
  sinks.raw().sink_experts = 2;
  sinks.raw().sink_intermediate = 256;
  sinks.raw().routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  sinks.raw().routing_bias = 1;
  expect_taken(sinks);  // apart, by cuBLAS, which describe says
  sinks.finalize();
  EXPECT_THAT(plugin_->describe_layout(sinks.c()).value_or(""),
              testing::HasSubstr("2 sink experts (bf16, silu_mul, I=256) apart: cuBLAS GEMMs"));
}

// mxfp8 weights run weight-only too: on bf16 activations; their natural mxfp8 ones are refused.
TEST_F(TrtllmSupport, Mxfp8WeightsRunOnBf16Activations) {
  Problem q = fp8(MOE_INPUT_BF16);
  q.raw().format = MOE_FORMAT_MXFP8;
  expect_taken(q);
  Problem natural = fp8(MOE_INPUT_DEFAULT);
  natural.raw().format = MOE_FORMAT_MXFP8;
  expect_refusal(natural, MOE_REASON_INPUT_FORMAT, "mxfp8 weights run weight-only");
}

// mxfp4 and nvfp4 run weight-only: bf16 activations, any even shape (padded to whole tiles), a
// shared expert; quantised activations are refused by name; bf16 sinks run apart, by cuBLAS, which
// describe names.
TEST_F(TrtllmSupport, Fp4WeightsRunOnBf16ActivationsWithSinksApart) {
  for (moe_format f : {MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4}) {
    Problem q = fp8(MOE_INPUT_BF16);
    q.raw().format = f;
    q.raw().hidden = 200;
    q.raw().intermediate = 48;
    expect_taken(q);
    Problem shared = q;
    shared.raw().shared_intermediate = 48;
    shared.raw().expert_bias = 1;
    expect_taken(shared);
    shared.raw().shared_intermediate = 128;  // padded like the routed experts' 48 -> 128
    expect_taken(shared);
    shared.raw().shared_intermediate = 160;
    expect_refusal(shared, MOE_REASON_SHARED, "shared_intermediate=160 must be at most");
    Problem w4a8 = q;
    w4a8.raw().input_format =
        f == MOE_FORMAT_MXFP4 ? MOE_INPUT_MXFP8 : MOE_INPUT_FP8_TENSOR_DYNAMIC;
    expect_refusal(w4a8, MOE_REASON_INPUT_FORMAT, "run weight-only");
    Problem sinks = q;
    sinks.raw().sink_experts = 2;
    sinks.raw().sink_intermediate = 48;
    sinks.raw().routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
    sinks.raw().routing_bias = 1;
    expect_taken(sinks);
    Problem narrow = sinks;  // sinks apart take their own width, next to any activation
    narrow.raw().sink_intermediate = 40;
    narrow.raw().activation = MOE_ACTIVATION_RELU2;
    expect_taken(narrow);
    sinks.finalize();
    EXPECT_THAT(plugin_->describe_layout(sinks.c()).value_or(""),
                testing::HasSubstr("2 sink experts (bf16, silu_mul, I=48) apart: cuBLAS GEMMs"))
        << format_name(f);
  }
}

// The 4-bit and mxfp8 layers' describe text says that TensorRT-LLM's Blackwell layout (scales
// swizzled 128x4) has no sm_90 reader and names the Hopper layout prepared instead; bf16 on the
// weight-only GEMM names last_block's choices.
TEST_F(TrtllmSupport, DescribeNamesTheHopperLayoutThatReplacesBlackwells) {
  auto layout = [&](moe_format f) {
    Problem q = fp8(MOE_INPUT_BF16);
    q.raw().format = f;
    q.finalize();
    return plugin_->describe_layout(q.c()).value_or("");
  };
  for (moe_format f : {MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4, MOE_FORMAT_MXFP8}) {
    const std::string d = layout(f);
    EXPECT_THAT(d, testing::HasSubstr("has no sm_90 reader")) << format_name(f);
    EXPECT_THAT(d, testing::HasSubstr("the Hopper weight-only layout is prepared instead"))
        << format_name(f);
    EXPECT_THAT(d, testing::HasSubstr(f == MOE_FORMAT_NVFP4 ? "e4m3 per 16" : "ue8m0 per 32"))
        << format_name(f);
  }
  EXPECT_THAT(layout(MOE_FORMAT_BF16), testing::HasSubstr("last_block: narrow computes"));
}

// bf16_gemm: auto, as `moe describe` shows it (no options there): the weight-only GEMM on bf16
// tiles when a max_tokens batch averages at most 128 rows an expert, CUTLASS's layout past that
// and for sink experts (which only CUTLASS's path runs).
TEST_F(TrtllmSupport, Bf16GemmAutoFollowsTheRowsPerExpertAtMaxTokens) {
  auto layout = [&](int64_t max_tokens, int64_t sinks) {
    Problem q = fp8(MOE_INPUT_BF16);
    q.raw().format = MOE_FORMAT_BF16;
    q.raw().max_tokens = max_tokens;
    if (sinks > 0) {
      q.raw().sink_experts = sinks;
      q.raw().sink_intermediate = q.raw().intermediate;
      q.raw().routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
    }
    q.finalize();
    return plugin_->describe_layout(q.c()).value_or("");
  };
  // E = 16, k = 4: 512 tokens give 128 rows an expert, 513 more.
  EXPECT_THAT(layout(512, 0), testing::HasSubstr("bf16 on the weight-only GEMM"));
  EXPECT_THAT(layout(513, 0), testing::Not(testing::HasSubstr("bf16 on the weight-only GEMM")));
  EXPECT_THAT(layout(64, 1), testing::Not(testing::HasSubstr("weight-only GEMM")));
}

// bf16_gemm: auto on CUTLASS's layout: a batch of few rows an expert runs the weight-only GEMM on
// those weights in place when GEMM1's rows and the hidden size are whole 128-row tiles, and never
// with sink experts; describe says so and names the bound (16 rows past hidden 4096).
TEST_F(TrtllmSupport, Bf16GemmAutoRunsSmallBatchesInPlaceOnCutlassLayouts) {
  auto layout = [&](int64_t hidden, int64_t intermediate, int64_t sinks) {
    Problem q = fp8(MOE_INPUT_BF16);
    q.raw().format = MOE_FORMAT_BF16;
    q.raw().hidden = hidden;
    q.raw().intermediate = intermediate;
    q.raw().max_tokens = 16384;
    if (sinks > 0) {
      q.raw().sink_experts = sinks;
      q.raw().sink_intermediate = intermediate;
      q.raw().routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
    }
    q.finalize();
    return plugin_->describe_layout(q.c()).value_or("");
  };
  const std::string in_place = "runs the weight-only GEMM on these weights in place";
  EXPECT_THAT(layout(256, 192, 0), testing::HasSubstr("at most 128 rows an expert"));
  EXPECT_THAT(layout(256, 192, 0), testing::HasSubstr(in_place));
  EXPECT_THAT(layout(7168, 2048, 0),
              testing::HasSubstr("at most 16 rows an expert on average but for 1 to 8 runs"));
  EXPECT_THAT(layout(2048, 768, 0),
              testing::HasSubstr("at most 128 rows an expert on average runs"));
  // I = 200: 2 x 208 rows of GEMM1 are not whole tiles; H = 200 neither; sinks never.
  EXPECT_THAT(layout(256, 200, 0), testing::Not(testing::HasSubstr("in place")));
  EXPECT_THAT(layout(200, 192, 0), testing::Not(testing::HasSubstr("in place")));
  EXPECT_THAT(layout(256, 192, 1), testing::Not(testing::HasSubstr("in place")));
}

// fp8_gemm: auto (bench/NOTES.md, session 24): the e4m3 weight-only GEMM at every batch up to
// hidden 4096; past it up to 16 rows an expert at max_tokens, CUTLASS's promoted GEMMs past that.
TEST_F(TrtllmSupport, Fp8GemmAutoFollowsTheHiddenSizeAndRowsPerExpert) {
  auto layout = [&](int64_t hidden, int64_t max_tokens) {
    Problem q = fp8(MOE_INPUT_FP8_TENSOR_DYNAMIC);
    q.raw().hidden = hidden;
    q.raw().max_tokens = max_tokens;
    q.finalize();
    return plugin_->describe_layout(q.c()).value_or("");
  };
  // E = 16, k = 4: 64 tokens give 16 rows an expert, 16384 give 4096.
  EXPECT_THAT(layout(256, 512), testing::HasSubstr("fp8_tensor on the weight-only GEMM's e4m3"));
  EXPECT_THAT(layout(4096, 16384), testing::HasSubstr("fp8_tensor on the weight-only GEMM's e4m3"));
  EXPECT_THAT(layout(7168, 64), testing::HasSubstr("fp8_tensor on the weight-only GEMM's e4m3"));
  EXPECT_THAT(layout(7168, 65), testing::Not(testing::HasSubstr("weight-only GEMM")));
  EXPECT_THAT(layout(4224, 65), testing::Not(testing::HasSubstr("weight-only GEMM")));
}

// Past hidden 4096 (DeepSeek-V3-like layers) auto stops at 16 rows an expert: there CUTLASS's
// GEMMs were faster from 32 (bench/NOTES.md, session 19).
TEST_F(TrtllmSupport, Bf16GemmAutoStopsEarlierForWideHidden) {
  auto layout = [&](int64_t hidden, int64_t max_tokens) {
    Problem q = fp8(MOE_INPUT_BF16);
    q.raw().format = MOE_FORMAT_BF16;
    q.raw().hidden = hidden;
    q.raw().max_tokens = max_tokens;
    q.finalize();
    return plugin_->describe_layout(q.c()).value_or("");
  };
  // E = 16, k = 4: 64 tokens give 16 rows an expert, 65 more.
  EXPECT_THAT(layout(7168, 64), testing::HasSubstr("bf16 on the weight-only GEMM"));
  EXPECT_THAT(layout(7168, 65), testing::Not(testing::HasSubstr("bf16 on the weight-only GEMM")));
  EXPECT_THAT(layout(4096, 512), testing::HasSubstr("bf16 on the weight-only GEMM"));
  // The auto token tile's picks follow the hidden size too (past 4096: 128 from 128 to 256 rows
  // an expert), and describe says which.
  EXPECT_THAT(layout(7168, 64),
              testing::HasSubstr("96 up to 79, 128 up to 256, 192 to 512, 256 above"));
  EXPECT_THAT(layout(4096, 512), testing::HasSubstr("128 up to 119, 192 up to 197"));
  EXPECT_THAT(layout(4096, 512), testing::HasSubstr("192 to 512, 256 above"));
}

}  // namespace
}  // namespace moe::test
