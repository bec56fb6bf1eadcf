// What cutlass_mega takes and refuses, and its `sms` option, on any machine: the refusals
// name the reason and the value.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../../support/scoped_env.hpp"
#include "../../support/test_env.hpp"
#include "kernels/split.hpp"
#include "moe/sdk/enum_names.hpp"
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

TEST(MegaSupport, TakesExpertBiasesInEveryFormatAndSaysSo) {
  for (moe_format f : {MOE_FORMAT_BF16, MOE_FORMAT_FP8_BLOCK, MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4}) {
    moe_problem p = bf16_problem();
    p.format = f;
    p.input_format = f == MOE_FORMAT_FP8_BLOCK ? MOE_INPUT_FP8_1X128 : MOE_INPUT_BF16;
    p.intermediate = 256;
    p.activation = MOE_ACTIVATION_SWIGLU_OAI;
    p.expert_bias = 1;
    EXPECT_TRUE(check_support(p, false).ok()) << check_support(p, false).message;
    EXPECT_NE(describe(p).find("expert biases in f32"), std::string::npos) << describe(p);
  }
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

// The shared expert runs as ceil(Is / I) virtual experts with a slot per token each: any width in
// bf16, whole scale blocks otherwise; its slots count against the schedule's.
TEST(MegaSupport, TakesASharedExpertAsVirtualExpertsWithinTheSchedule) {
  moe_problem p = bf16_problem();  // I = 192
  p.shared_intermediate = 200;     // 2 virtual experts, 6 slots a token
  EXPECT_TRUE(check_support(p, false).ok()) << check_support(p, false).message;
  p.max_tokens = 683;  // 683 x 6 > 4096
  expect_refusal(p, MOE_REASON_MAX_TOKENS,
                 "max_tokens=683 x 6 slots (top_k=4 and 2 for sink and shared experts)");
  p = bf16_problem();  // Inkling-like: two sinks of 1.5 routed widths, 4 virtual experts
  p.sink_experts = 2;
  p.sink_intermediate = 288;
  EXPECT_TRUE(check_support(p, false).ok()) << check_support(p, false).message;
  EXPECT_NE(describe(p).find("2 sink experts as 4 virtual experts"), std::string::npos)
      << describe(p);
  // In any other format or activation the sinks (bf16, silu_mul) run apart: a second launch of
  // the bf16 kernel adds their sum into the first's output.
  p.format = MOE_FORMAT_FP8_BLOCK;
  p.input_format = MOE_INPUT_FP8_1X128;
  p.intermediate = 256;
  p.shared_intermediate = 256;
  EXPECT_TRUE(check_support(p, false).ok()) << check_support(p, false).message;
  EXPECT_NE(describe(p).find("in one cooperative launch (two where the sinks run apart, below)"),
            std::string::npos)
      << describe(p);
  EXPECT_NE(describe(p).find("the shared expert as 1 virtual expert of the routed shape; 2 sink "
                             "experts (bf16, silu_mul) in a second launch of the bf16 kernel, as "
                             "4 virtual experts"),
            std::string::npos)
      << describe(p);
  EXPECT_EQ(describe(p).find("2 sink experts as"), std::string::npos) << describe(p);
  for (const moe_format f : {MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4}) {
    p.format = f;
    p.input_format = MOE_INPUT_BF16;
    EXPECT_TRUE(check_support(p, false).ok()) << check_support(p, false).message;
    EXPECT_NE(describe(p).find("2 sink experts (bf16, silu_mul) in a second launch"),
              std::string::npos)
        << describe(p);
  }
  p = fp8_problem();
  p.shared_intermediate = 192;
  expect_refusal(p, MOE_REASON_SHAPE, "shared_intermediate=192 must be a multiple of 128");
  p.shared_intermediate = 2048;
  EXPECT_TRUE(check_support(p, false).ok()) << check_support(p, false).message;
  p.experts = p.local_experts = 505;  // + 8 virtual > 512
  expect_refusal(p, MOE_REASON_SHAPE, "513 experts with the sink and shared ones");
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

TEST(MegaSupport, TakesMxfp4AndNvfp4WithBf16ActivationsOfEveryActivation) {
  for (moe_format f : {MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4})
    for (moe_activation a :
         {MOE_ACTIVATION_SILU_MUL, MOE_ACTIVATION_SILU_MUL_CLAMP, MOE_ACTIVATION_SWIGLU_OAI,
          MOE_ACTIVATION_GELU_MUL, MOE_ACTIVATION_RELU2}) {
      moe_problem p = bf16_problem();
      p.format = f;
      p.intermediate = 256;
      p.activation = a;
      EXPECT_TRUE(check_support(p, false).ok()) << check_support(p, false).message;
    }
}

// 4-bit weights take e4m3 activations the kernel quantises (mxfp8, e4m3 per tensor, static or
// from the batch's amax), with a shared expert too; bf16 weights do not.
TEST(MegaSupport, TakesE4m3ActivationsOnFp4Weights) {
  for (moe_format f : {MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4})
    for (moe_input_format in :
         {MOE_INPUT_MXFP8, MOE_INPUT_FP8_TENSOR_STATIC, MOE_INPUT_FP8_TENSOR_DYNAMIC}) {
      moe_problem p = bf16_problem();
      p.format = f;
      p.intermediate = 256;
      p.input_format = in;
      p.shared_intermediate = 384;
      EXPECT_TRUE(check_support(p, false).ok()) << check_support(p, false).message;
    }
  moe_problem p = bf16_problem();
  p.input_format = MOE_INPUT_MXFP8;
  expect_refusal(p, MOE_REASON_INPUT_FORMAT, "bf16 weights take bf16 activations only, not mxfp8");
}

TEST(MegaSupport, RefusesFp4ShapesActivationFormatsAndOtherFormats) {
  moe_problem p = bf16_problem();
  p.format = MOE_FORMAT_NVFP4;
  p.intermediate = 192;  // a stage is 128 deep along GEMM2's K
  expect_refusal(p, MOE_REASON_SHAPE, "intermediate=192 of 128");
  p.intermediate = 256;
  p.input_format = MOE_INPUT_FP8_1X128;  // its 128-channel blocks span two GEMM1 items
  expect_refusal(p, MOE_REASON_INPUT_FORMAT,
                 "nvfp4 weights take bf16, mxfp8, fp8_tensor_static or fp8_tensor_dynamic "
                 "activations, not fp8_1x128");
  p = bf16_problem();
  p.format = MOE_FORMAT_MXFP8;
  expect_refusal(p, MOE_REASON_FORMAT, "not mxfp8");
}

TEST(MegaSupport, RefusesWhatItCannotRunWithTheReasonAndTheValue) {
  moe_problem p = bf16_problem();
  p.format = MOE_FORMAT_FP8_TENSOR;
  expect_refusal(p, MOE_REASON_FORMAT, "not fp8_tensor");
  p = bf16_problem();
  p.input_format = MOE_INPUT_FP8_1X128;
  expect_refusal(p, MOE_REASON_INPUT_FORMAT, "bf16 activations only, not fp8_1x128");
  p = bf16_problem();
  p.sink_experts = 1;
  p.sink_intermediate = 64;
  p.activation = MOE_ACTIVATION_GELU_MUL;  // sinks are silu_mul: one launch runs one activation,
  EXPECT_TRUE(check_support(p, false).ok()) << check_support(p, false).message;  // so two here
  EXPECT_NE(describe(p).find("1 sink experts (bf16, silu_mul) in a second launch"),
            std::string::npos)
      << describe(p);
  p.activation = MOE_ACTIVATION_SILU_MUL;
  p.sink_intermediate = 192 * 33;  // 33 virtual experts
  expect_refusal(p, MOE_REASON_SHARED, "33 virtual experts of intermediate=192, at most 32");
  p = bf16_problem();
  p.redundant_experts = 2;
  expect_refusal(p, MOE_REASON_EP, "EPLB");
  p = bf16_problem();
  std::vector<int32_t> map(size_t(p.experts));
  for (int64_t e = 0; e < p.experts; ++e) map[size_t(e)] = int32_t(e);
  p.ep_map = map.data();  // the identity is every expert where it is
  EXPECT_TRUE(check_support(p, false).ok()) << check_support(p, false).message;
  std::swap(map[0], map[1]);  // a permutation on one rank: valid, but not the schedule's
  expect_refusal(p, MOE_REASON_EP, "ep_map[0]=1: cutlass_mega reads expert e's weights");
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
  expect_refusal(p, MOE_REASON_MAX_TOKENS, "max_tokens=2048 x 4 slots (top_k=4)");
}

// GEMM2's K split: only a wave that leaves SMs idle is split (Mixtral at T = 1: 2 experts x 32
// slices on 132 SMs), into as many parts as still fit one wave; enough items are not (Qwen3 and
// DeepSeek-V3 at T = 1, Mixtral at T = 8), and the split never exceeds the workspace's copies or
// leaves a part fewer than two stages.
TEST(MegaSplit, SplitsAlongKOnlyWhereOneWaveLeavesSMsIdle) {
  using kernels::k_split;
  static_assert(k_split(64, 224, 132, 8) == 2);  // Mixtral T = 1: 128 parts, one wave
  static_assert(k_split(16, 224, 132, 8) == 8);  // 128 parts, the workspace's limit
  static_assert(k_split(448, 32, 132, 8) == 1);  // DeepSeek-V3 T = 1: several waves already
  static_assert(k_split(128, 12, 132, 8) == 1);  // Qwen3 T = 1: one full wave
  using kernels::k_split_waves, kernels::kSplitMinSteps;
  // MOE_MEGA_SPLIT2=waves: Mixtral T = 8, 224 items on 132 CTAs (2 waves of 1): four parts, 7
  // waves of a quarter (1.75); fp8_block's 56 stages and bf16's 112 alike
  static_assert(k_split_waves(224, 56, 132, 8, kSplitMinSteps) == 4);
  static_assert(k_split_waves(224, 112, 132, 8, kSplitMinSteps) == 4);
  static_assert(k_split_waves(224, 56, 132, 2, kSplitMinSteps) == 1);   // two copies: no gain
  static_assert(k_split_waves(224, 24, 132, 8, kSplitMinSteps) == 1);   // 4: 6 stages a part
  static_assert(k_split_waves(448, 16, 132, 8, kSplitMinSteps) == 2);   // DeepSeek-V3 T = 1, bf16
  static_assert(k_split_waves(448, 8, 132, 8, kSplitMinSteps) == 1);    // its 8 fp8 stages
  static_assert(k_split_waves(264, 112, 132, 8, kSplitMinSteps) == 1);  // two full waves
  static_assert(k_split_waves(64, 224, 132, 8, kSplitMinSteps) == 2);   // one wave: k_split's
  // MOE_MEGA_SPLIT2=fill: within one wave too. Mixtral T = 2, 96 items of 112 bf16 stages: four
  // parts, 3 waves of a quarter (two or three parts: as many waves as parts, no gain)
  static_assert(k_split_waves(96, 112, 132, 8, kSplitMinSteps, true) == 4);
  static_assert(k_split_waves(96, 112, 132, 8, kSplitMinSteps) == 1);
  static_assert(k_split_waves(96, 56, 132, 8, kSplitMinSteps, true) ==
                4);  // fp8_block: 14 stages a part
  static_assert(k_split_waves(96, 24, 132, 8, kSplitMinSteps, true) == 1);    // 4 parts: 6 stages
  static_assert(k_split_waves(64, 224, 132, 8, kSplitMinSteps, true) == 2);   // k_split's is best
  static_assert(k_split_waves(128, 12, 132, 8, kSplitMinSteps, true) == 1);   // Qwen3 T = 1: full
  static_assert(k_split_waves(16, 32, 24, 8, kSplitMinSteps, true) == 3);     // the GPU test's
  static_assert(k_split_waves(224, 112, 132, 8, kSplitMinSteps, true) == 4);  // past a wave: waves'
  static_assert(k_split(100, 12, 132, 8) == 1);   // two parts would not fit one wave
  static_assert(k_split(256, 224, 132, 8) == 1);  // Mixtral T = 8
  static_assert(k_split(64, 224, 132, 1) == 1);   // the workspace holds one copy
  static_assert(k_split(1, 5, 132, 8) == 2);      // parts keep two stages at least
  static_assert(k_split(1, 3, 132, 8) == 1);
  EXPECT_EQ(k_split(0, 16, 132, 8), 1);  // no items: nothing to split
}

// The GEMM2 results' workspace never shrinks as the batch grows (a workspace sized for
// max_tokens serves every smaller batch; the floor of 32 MiB / copy once made T=65 need more
// than T=100 on DeepSeek-V3's H), and it always holds the copies the kernel is told of.
TEST(MegaWorkspace, ResultBytesGrowWithTheBatchAndHoldTheirCopies) {
  moe_problem p = bf16_problem();
  p.hidden = 7168;
  p.top_k = 9;
  int64_t last = 0;
  for (int64_t t = 1; t <= 455; ++t) {
    const int64_t bytes = result_bytes(p, t), copy = t * p.top_k * p.hidden * 4;
    const int32_t copies = result_copies(p, t);
    EXPECT_GE(bytes, last) << t << " tokens";
    EXPECT_TRUE(copies >= 1 && copies <= 8) << t << " tokens";
    EXPECT_LE(copies * copy, bytes) << t << " tokens";
    last = bytes;
  }
  EXPECT_EQ(result_copies(p, 1), 8);
  EXPECT_EQ(result_copies(p, 455), 1);
}

TEST(MegaOptions, SmsIsAutoOrACountAndAnythingElseIsRefusedNamingIt) {
  EXPECT_EQ(parse_options({}).sms, 0);
  EXPECT_EQ(parse_options({{"sms", "auto"}}).sms, 0);
  EXPECT_EQ(parse_options({{"sms", "96"}}).sms, 96);
  EXPECT_EQ(parse_options({{"sms", "1"}}).sms, 1);
  EXPECT_EQ(parse_options({{"sms", "96"}, {"sms", "auto"}}).sms, 0);  // the last one counts
  const std::vector<std::pair<Options, std::string>> refused = {
      {{{"splits", "3"}}, "unknown option 'splits' (known: sms)"},
      {{{"sms", "0"}}, "sms '0' is not auto or an integer in [1, 1024]"},
      {{{"sms", "-4"}}, "sms '-4'"},
      {{{"sms", "1025"}}, "sms '1025'"},
      {{{"sms", "64.5"}}, "sms '64.5'"},
      {{{"sms", "12 "}}, "sms '12 '"},
      {{{"sms", ""}}, "sms ''"},
      {{{"sms", "all"}}, "sms 'all'"},
  };
  for (const auto& [options, message] : refused)
    test::expect_error([&] { parse_options(options); }, MOE_STATUS_CONFIG_ERROR, {message});
}

// The stage rules (docs/design.md §13): bf16 two chunks where H and I are multiples of 128; 4-bit
// four chunks from 8 slots an expert on average or 64 tokens (the fewer), where H and I are
// multiples of 512 and the activations are bf16; describe says both.
TEST(MegaStages, TwoBf16ChunksAndFour4BitChunksFromEightSlotsAnExpert) {
  moe_problem p = bf16_problem();  // I = 192
  EXPECT_FALSE(bf16_two_chunks(p));
  EXPECT_NE(describe(p).find("as given (w13 [E, 2I, H], w2 [E, H, I]), by TMA"), std::string::npos)
      << describe(p);
  p.intermediate = 256;
  EXPECT_TRUE(bf16_two_chunks(p));
  EXPECT_NE(describe(p).find("two adjacent chunks (32 KB) a pipeline stage"), std::string::npos)
      << describe(p);
  EXPECT_EQ(four_chunk_tokens(p), 0) << "bf16";
  struct Shape {
    int64_t experts, top_k, hidden, intermediate, from;
  };
  for (moe_format f : {MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4}) {
    for (const Shape& s : {Shape{8, 2, 4096, 14336, 32},   // Mixtral: 32 tokens
                           Shape{256, 8, 7168, 2048, 64},  // DeepSeek-V3: 64 tokens
                           Shape{16, 4, 512, 512, 32},     // the GPU test's
                           Shape{64, 6, 4096, 1536, 64},   // ceil(8 x 64 / 6) = 86
                           Shape{128, 8, 2048, 768, 0},    // Qwen3-30B-A3B: I = 768
                           Shape{16, 4, 256, 512, 0}}) {   // H = 256
      p.format = f;
      p.experts = p.local_experts = s.experts;
      p.top_k = s.top_k;
      p.hidden = s.hidden;
      p.intermediate = s.intermediate;
      p.input_format = MOE_INPUT_BF16;
      EXPECT_EQ(four_chunk_tokens(p), s.from) << s.experts << " experts, H " << s.hidden;
      if (s.from > 0) {
        EXPECT_NE(describe(p).find(fmt::format("four from {} tokens", s.from)), std::string::npos)
            << describe(p);
        p.input_format = MOE_INPUT_MXFP8;  // e4m3 activations: measured on two chunks only
        EXPECT_EQ(four_chunk_tokens(p), 0) << "mxfp8 activations";
      }
    }
  }
}

// The instance a layer prepared now runs (docs/design.md §13): every format's default on shapes
// that take the multi-chunk stages and on shapes that do not (fp8_block's two tiles by wgmma,
// by mma.sync with MOE_MEGA_FP8_WGMMA=0), 4-bit weights on e4m3 activations
// (two chunks, never four by the batch), each measurement switch read at prepare (every other one
// unset, so the machine's environment cannot decide a row), and the retired
// MOE_MEGA_FP8_STAGE=256 (the default now); describe names fp8_block's stage, its 32-slot items and
// its mma.
TEST(MegaStages, EachFormatsInstanceAndItsSwitches) {
  using detail::Kind;
  using test::ScopedEnv;
  struct Expected {
    moe_format format;
    int64_t hidden, intermediate;
    const char* var;  // a switch set at prepare, or null
    const char* value;
    Kind kind, large_kind;
    int64_t large_from;
    moe_input_format input = MOE_INPUT_BF16;  // fp8_block's: always fp8_1x128
  };
  const char* const fp4_stage = "MOE_MEGA_FP4_STAGE";
  for (const Expected& e :
       {Expected{MOE_FORMAT_BF16, 256, 256, nullptr, nullptr, Kind::kBf16x2, Kind::kBf16, 0},
        Expected{MOE_FORMAT_BF16, 256, 192, nullptr, nullptr, Kind::kBf16, Kind::kBf16, 0},
        Expected{MOE_FORMAT_BF16, 256, 256, "MOE_MEGA_BF16_STAGE", "64", Kind::kBf16, Kind::kBf16,
                 0},
        Expected{MOE_FORMAT_FP8_BLOCK, 512, 256, nullptr, nullptr, Kind::kFp8BlockWgmma2,
                 Kind::kBf16, 0},
        Expected{MOE_FORMAT_FP8_BLOCK, 512, 384, nullptr, nullptr, Kind::kFp8BlockF16, Kind::kBf16,
                 0},
        Expected{MOE_FORMAT_FP8_BLOCK, 512, 256, "MOE_MEGA_FP8_WGMMA", "0", Kind::kFp8BlockF16x2,
                 Kind::kBf16, 0},
        Expected{MOE_FORMAT_FP8_BLOCK, 512, 384, "MOE_MEGA_FP8_WGMMA", "0", Kind::kFp8BlockF16,
                 Kind::kBf16, 0},
        Expected{MOE_FORMAT_FP8_BLOCK, 512, 256, "MOE_MEGA_FP8_STAGE", "128", Kind::kFp8BlockF16,
                 Kind::kBf16, 0},
        Expected{MOE_FORMAT_FP8_BLOCK, 512, 256, "MOE_MEGA_FP8_TOKENS", "e4m3", Kind::kFp8Block,
                 Kind::kBf16, 0},
        Expected{MOE_FORMAT_FP8_BLOCK, 512, 384, "MOE_MEGA_FP8_WGMMA", "1", Kind::kFp8BlockWgmma,
                 Kind::kBf16, 0},
        Expected{MOE_FORMAT_FP8_BLOCK, 512, 256, "MOE_MEGA_FP8_WGMMA", "1", Kind::kFp8BlockWgmma,
                 Kind::kBf16, 0},
        Expected{MOE_FORMAT_FP8_BLOCK, 512, 256, "MOE_MEGA_FP8_WGMMA", "2", Kind::kFp8BlockWgmma2,
                 Kind::kBf16, 0},
        Expected{MOE_FORMAT_FP8_BLOCK, 512, 384, "MOE_MEGA_FP8_WGMMA", "2", Kind::kFp8BlockWgmma,
                 Kind::kBf16, 0},
        Expected{MOE_FORMAT_BF16, 256, 256, "MOE_MEGA_FP8_WGMMA", "1", Kind::kBf16x2, Kind::kBf16,
                 0},
        Expected{MOE_FORMAT_MXFP4, 512, 512, "MOE_MEGA_FP4_WGMMA", "1", Kind::kMxfp4Wgmma,
                 Kind::kBf16, 0},
        Expected{MOE_FORMAT_NVFP4, 512, 256, "MOE_MEGA_FP4_WGMMA", "1", Kind::kNvfp4Wgmma,
                 Kind::kBf16, 0},
        Expected{MOE_FORMAT_NVFP4, 384, 256, "MOE_MEGA_FP4_WGMMA", "1", Kind::kNvfp4, Kind::kBf16,
                 0},
        Expected{MOE_FORMAT_MXFP4, 512, 512, "MOE_MEGA_FP4_WGMMA", "1", Kind::kMxfp4Wgmma,
                 Kind::kBf16, 0, MOE_INPUT_MXFP8},
        Expected{MOE_FORMAT_MXFP4, 512, 512, nullptr, nullptr, Kind::kMxfp4x2, Kind::kMxfp4x4, 32},
        Expected{MOE_FORMAT_NVFP4, 512, 256, nullptr, nullptr, Kind::kNvfp4x2, Kind::kBf16, 0},
        Expected{MOE_FORMAT_NVFP4, 384, 256, nullptr, nullptr, Kind::kNvfp4, Kind::kBf16, 0},
        Expected{MOE_FORMAT_MXFP4, 512, 512, fp4_stage, "128", Kind::kMxfp4, Kind::kBf16, 0},
        Expected{MOE_FORMAT_MXFP4, 512, 512, fp4_stage, "256", Kind::kMxfp4x2, Kind::kBf16, 0},
        Expected{MOE_FORMAT_NVFP4, 512, 512, fp4_stage, "512", Kind::kNvfp4x4, Kind::kBf16, 0},
        Expected{MOE_FORMAT_BF16, 256, 256, "MOE_MEGA_FP8_STAGE", "128", Kind::kBf16x2, Kind::kBf16,
                 0},
        Expected{MOE_FORMAT_FP8_BLOCK, 512, 256, "MOE_MEGA_FP8_STAGE", "256", Kind::kFp8BlockWgmma2,
                 Kind::kBf16, 0},
        Expected{MOE_FORMAT_NVFP4, 512, 512, nullptr, nullptr, Kind::kNvfp4x2, Kind::kNvfp4x4, 32},
        Expected{MOE_FORMAT_MXFP4, 512, 256, fp4_stage, "512", Kind::kMxfp4x2, Kind::kBf16, 0},
        Expected{MOE_FORMAT_MXFP4, 512, 512, nullptr, nullptr, Kind::kMxfp4x2, Kind::kBf16, 0,
                 MOE_INPUT_MXFP8},
        Expected{MOE_FORMAT_NVFP4, 512, 512, nullptr, nullptr, Kind::kNvfp4x2, Kind::kBf16, 0,
                 MOE_INPUT_FP8_TENSOR_STATIC},
        Expected{MOE_FORMAT_NVFP4, 512, 512, fp4_stage, "512", Kind::kNvfp4x4, Kind::kBf16, 0,
                 MOE_INPUT_FP8_TENSOR_DYNAMIC}}) {
    moe_problem p = bf16_problem();  // 16 experts, top 4: four chunks from 32 tokens
    p.format = e.format;
    p.input_format = e.format == MOE_FORMAT_FP8_BLOCK ? MOE_INPUT_FP8_1X128 : e.input;
    p.hidden = e.hidden;
    p.intermediate = e.intermediate;
    const std::string what =
        fmt::format("{} on {} H {} I {} {}={}", format_name(e.format),
                    input_format_name(static_cast<moe_input_format>(p.input_format)), e.hidden,
                    e.intermediate, e.var ? e.var : "-", e.value ? e.value : "");
    const ScopedEnv unset[] = {
        {"MOE_MEGA_BF16_STAGE", std::nullopt}, {"MOE_MEGA_FP8_TOKENS", std::nullopt},
        {"MOE_MEGA_FP8_WGMMA", std::nullopt},  {"MOE_MEGA_FP8_STAGE", std::nullopt},
        {"MOE_MEGA_FP4_STAGE", std::nullopt},  {"MOE_MEGA_CHUNKS", std::nullopt},
        {"MOE_MEGA_FP4_WGMMA", std::nullopt}};
    std::optional<ScopedEnv> env;
    if (e.var) env.emplace(e.var, e.value);
    const KindChoice c = choose_kinds(p);
    EXPECT_EQ(int(c.kind), int(e.kind)) << what;
    EXPECT_EQ(c.large_from, e.large_from) << what;
    if (e.large_from > 0) {
      EXPECT_EQ(int(c.large_kind), int(e.large_kind)) << what;
    }
  }
  moe_problem p = fp8_problem();  // H = 256, I = 256: two tiles, 32-slot items
  EXPECT_TRUE(fp8_two_tiles(p));
  std::string d = describe(p);
  EXPECT_NE(d.find("two 128-deep tiles (32 KB) a pipeline stage"), std::string::npos) << d;
  EXPECT_NE(d.find("per (expert, 32 slots"), std::string::npos) << d;
  EXPECT_NE(d.find("the e4m3 codes multiplied by wgmma"), std::string::npos) << d;
  p.intermediate = 384;
  EXPECT_FALSE(fp8_two_tiles(p));
  d = describe(p);
  EXPECT_NE(d.find("one 128-deep tile (16 KB) a pipeline stage"), std::string::npos) << d;
  EXPECT_NE(d.find("the codes multiplied as their exact f16 values"), std::string::npos) << d;
  EXPECT_NE(d.find("per (expert, 64 slots"), std::string::npos) << d;
}

// fp8_block: each CTA quantises batches of up to 2048 / H tokens itself by default (Qwen3-30B-A3B's
// one token), 16384 / H with MOE_MEGA_FP8_OWN_ROWS=1, none with =0; never in another format.
TEST(MegaOwnRows, BatchesOfUpTo2048ValuesByDefault16384WithTheSwitch) {
  using test::ScopedEnv;
  moe_problem p = fp8_problem();
  {
    const ScopedEnv unset("MOE_MEGA_FP8_OWN_ROWS", std::nullopt);
    for (const auto& [hidden, tokens] : {std::pair{2048, 1},    // Qwen3-30B-A3B
                                         std::pair{4096, 0},    // Mixtral
                                         std::pair{7168, 0},    // DeepSeek-V3
                                         std::pair{256, 8}}) {  // the GPU test's
      p.hidden = hidden;
      EXPECT_EQ(own_rows_tokens(p), tokens) << "default, H " << hidden;
    }
    const ScopedEnv off("MOE_MEGA_FP8_OWN_ROWS", "0");
    EXPECT_EQ(own_rows_tokens(p), 0) << "MOE_MEGA_FP8_OWN_ROWS=0";
  }
  const ScopedEnv on("MOE_MEGA_FP8_OWN_ROWS", "1");
  for (const auto& [hidden, tokens] : {std::pair{2048, 8},     // Qwen3-30B-A3B
                                       std::pair{4096, 4},     // Mixtral
                                       std::pair{7168, 2},     // DeepSeek-V3
                                       std::pair{256, 64}}) {  // the GPU test's
    p.hidden = hidden;
    EXPECT_EQ(own_rows_tokens(p), tokens) << "H " << hidden;
  }
  p.format = MOE_FORMAT_BF16;
  p.input_format = MOE_INPUT_BF16;
  EXPECT_EQ(own_rows_tokens(p), 0) << "bf16";
}

// Routing in the launch (ABI 1.6's routing in run): batches of up to kRouteInLaunchTokens tokens
// by default, 64 with MOE_MEGA_ROUTE=fused64, none with =apart; only where the kernel's routing
// takes the problem: at most 256 experts (candidates in registers), no sink routing, and a batch
// whose ids and scratch fit the ring's shared memory.
TEST(MegaRouteInLaunch, DecodeBatchesOfProblemsTheKernelRoutes) {
  using test::ScopedEnv;
  const ScopedEnv unset("MOE_MEGA_ROUTE", std::nullopt);
  moe_problem p = bf16_problem();
  p.routing = MOE_ROUTING_SOFTMAX_TOPK;
  EXPECT_EQ(route_in_launch_tokens(p), kRouteInLaunchTokens);
  for (moe_format f : {MOE_FORMAT_FP8_BLOCK, MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4}) {
    moe_problem q = p;
    q.format = f;
    q.input_format = f == MOE_FORMAT_FP8_BLOCK ? MOE_INPUT_FP8_1X128 : MOE_INPUT_BF16;
    q.hidden = q.intermediate = 512;
    EXPECT_EQ(route_in_launch_tokens(q), kRouteInLaunchTokens) << format_name(f);
  }
  // DeepSeek-V3's grouped sigmoid top-8 of 256 in 8 groups: the most experts it keeps.
  moe_problem ds = p;
  ds.experts = ds.local_experts = 256;
  ds.top_k = 8;
  ds.routing = MOE_ROUTING_GROUPED_TOPK;
  ds.score_function = MOE_SCORE_SIGMOID;
  ds.num_groups = 8;
  ds.topk_group = 4;
  ds.routing_bias = 1;
  EXPECT_EQ(route_in_launch_tokens(ds), kRouteInLaunchTokens);
  ds.experts = ds.local_experts = 264;  // past the registers' 256
  ds.num_groups = 8;
  EXPECT_EQ(route_in_launch_tokens(ds), 0);
  moe_problem sinks = p;  // Inkling's routing is not the kernel's to route
  sinks.routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  sinks.routing_bias = 1;
  sinks.sink_experts = 2;
  sinks.sink_intermediate = 192;
  EXPECT_EQ(route_in_launch_tokens(sinks), 0);
  {
    const ScopedEnv fused64("MOE_MEGA_ROUTE", "fused64");
    EXPECT_EQ(route_in_launch_tokens(p), 64);
  }
  const ScopedEnv apart("MOE_MEGA_ROUTE", "apart");
  EXPECT_EQ(route_in_launch_tokens(p), 0);
}

TEST(MegaRouteInLaunch, TheBatchMustFitTheRingBesideEveryWarpsScratch) {
  using detail::Kind, detail::route_fits;
  EXPECT_TRUE(route_fits(Kind::kBf16x2, 128, 1, 8, 8));
  EXPECT_TRUE(route_fits(Kind::kFp8BlockWgmma2, 256, 8, 8, 64));
  EXPECT_TRUE(route_fits(Kind::kMxfp4x4, 256, 8, 8, 8));
  EXPECT_FALSE(route_fits(Kind::kBf16x2, 257, 1, 8, 8));       // past the registers
  EXPECT_FALSE(route_fits(Kind::kBf16x2, 128, 1, 33, 8));      // more columns than lanes
  EXPECT_FALSE(route_fits(Kind::kBf16x2, 128, 129, 8, 8));     // more groups than experts
  EXPECT_FALSE(route_fits(Kind::kMxfp4x4, 256, 8, 32, 4096));  // ids past the ring
  EXPECT_FALSE(route_fits(Kind::kBf16x2, 128, 1, 8, -1));
}

// MOE_MEGA_FP8_PREFETCH at prepare: late0, late1 and late set Params::prefetch_late's phase-0 bit,
// phase-1b bit and both; unset, an unknown value or another format set none.
TEST(MegaPrefetchLate, EachValueSetsItsPhasesBitsOnlyForFp8Block) {
  using test::ScopedEnv;
  moe_problem p = fp8_problem();
  for (const auto& [value, bits] : {std::pair<std::optional<std::string>, int32_t>{std::nullopt, 0},
                                    {"late0", 1},
                                    {"late1", 2},
                                    {"late", 3},
                                    {"early", 0}}) {
    const ScopedEnv env("MOE_MEGA_FP8_PREFETCH", value);
    EXPECT_EQ(prefetch_late_bits(p), bits) << value.value_or("unset");
  }
  const ScopedEnv both("MOE_MEGA_FP8_PREFETCH", "late");
  p.format = MOE_FORMAT_BF16;
  p.input_format = MOE_INPUT_BF16;
  EXPECT_EQ(prefetch_late_bits(p), 0) << "bf16";
}

// Each instance's stage (the timeline's K step and prepared bytes, kernels/config.cuh): one bf16
// or e4m3 tile of 16 KB (wgmma's too), one, two or four 4-bit chunks (8704 bytes mx, 9216 nv), two
// bf16 or two e4m3 tiles.
TEST(MegaStages, EachInstancesStageKAndBytes) {
  using detail::Kind;
  struct Expected {
    Kind kind;
    int k, bytes;
  };
  for (const Expected& e :
       {Expected{Kind::kBf16, 64, 16384}, Expected{Kind::kBf16x2, 128, 32768},
        Expected{Kind::kFp8Block, 128, 16384}, Expected{Kind::kFp8BlockF16, 128, 16384},
        Expected{Kind::kMxfp4, 128, 8704}, Expected{Kind::kNvfp4, 128, 9216},
        Expected{Kind::kMxfp4x2, 256, 17408}, Expected{Kind::kNvfp4x2, 256, 18432},
        Expected{Kind::kMxfp4x4, 512, 34816}, Expected{Kind::kNvfp4x4, 512, 36864},
        Expected{Kind::kFp8BlockF16x2, 256, 32768}, Expected{Kind::kFp8BlockWgmma, 128, 16384},
        Expected{Kind::kMxfp4Wgmma, 256, 17408}, Expected{Kind::kNvfp4Wgmma, 256, 18432},
        Expected{Kind::kFp8BlockWgmma2, 256, 32768}}) {
    const detail::StageGeometry g = detail::stage_geometry(e.kind);
    EXPECT_EQ(g.k, e.k) << int(e.kind);
    EXPECT_EQ(g.weight_bytes, e.bytes) << int(e.kind);
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
