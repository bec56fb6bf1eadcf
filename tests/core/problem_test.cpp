// Proves moe/problem.hpp: the documented defaults, normalisation per format and EP placement,
// every validation rule with its message, the expert-parallel id mapping, the enum spellings, and
// that moe::Problem copies own their EP map.
#include "moe/sdk/problem.hpp"
#include "moe/sdk/format_table.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "moe/sdk/error.hpp"

namespace moe {
namespace {

// A valid, normalised bf16 problem: E=8, k=2, H=256, I=192.
moe_problem small_problem() {
  moe_problem p = default_problem();
  p.experts = 8;
  p.top_k = 2;
  p.hidden = 256;
  p.intermediate = 192;
  normalize_problem(p);
  return p;
}

// Sets the EP fields and normalises again (local_experts follows them).
moe_problem& with_ep(moe_problem& p, moe_ep_placement placement, int32_t size, int32_t rank) {
  p.ep_placement = placement;
  p.ep_size = size;
  p.ep_rank = rank;
  normalize_problem(p);
  return p;
}

// E=8 split over ep_size=4 ranks, seen from rank 2.
moe_problem ep_problem(moe_ep_placement placement) {
  moe_problem p = small_problem();
  return with_ep(p, placement, 4, 2);
}

std::vector<int32_t> local_ids(const moe_problem& p, int64_t first, int64_t last) {
  std::vector<int32_t> ids;
  for (int64_t e = first; e <= last; ++e) ids.push_back(local_expert_id(p, e));
  return ids;
}

TEST(DefaultProblem, HasTheDocumentedDefaults) {
  const moe_problem p = default_problem();
  EXPECT_EQ(p.struct_size, sizeof(moe_problem));
  EXPECT_EQ(p.ext, nullptr);
  EXPECT_EQ(p.experts, 0);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.hidden, 0);
  EXPECT_EQ(p.intermediate, 0);
  EXPECT_EQ(p.format, MOE_FORMAT_BF16);
  EXPECT_EQ(p.input_format, MOE_INPUT_DEFAULT);
  EXPECT_EQ(p.activation, MOE_ACTIVATION_SILU_MUL);
  EXPECT_EQ(p.gelu_tanh, 0);
  EXPECT_FLOAT_EQ(p.activation_alpha, 1.702f);
  EXPECT_FLOAT_EQ(p.activation_limit, 7.0f);
  EXPECT_EQ(p.routing, MOE_ROUTING_SOFTMAX_TOPK);
  EXPECT_EQ(p.renormalize, 1);
  EXPECT_EQ(p.score_function, MOE_SCORE_SIGMOID);
  EXPECT_EQ(p.routing_bias, 0);
  EXPECT_EQ(p.num_groups, 1);
  EXPECT_EQ(p.topk_group, 1);
  EXPECT_EQ(p.routed_scaling_factor, 1.0f);
  EXPECT_EQ(p.route_scale, 1.0f);
  EXPECT_EQ(p.global_scale, 1.0f);
  EXPECT_EQ(p.expert_bias, 0);
  EXPECT_EQ(p.shared_intermediate, 0);
  EXPECT_EQ(p.sink_experts, 0);
  EXPECT_EQ(p.sink_intermediate, 0);
  EXPECT_EQ(p.ep_placement, MOE_EP_NONE);
  EXPECT_EQ(p.ep_size, 1);
  EXPECT_EQ(p.ep_rank, 0);
  EXPECT_EQ(p.redundant_experts, 0);
  EXPECT_EQ(p.ep_map, nullptr);
  EXPECT_EQ(p.max_tokens, 16384);
}

TEST(NormalizeProblem, ResolvesTheDefaultInputFormatPerWeightFormat) {
  const struct {
    moe_format format;
    moe_input_format input;
  } cases[] = {
      {MOE_FORMAT_BF16, MOE_INPUT_BF16},
      {MOE_FORMAT_FP8_TENSOR, MOE_INPUT_FP8_TENSOR_DYNAMIC},
      {MOE_FORMAT_FP8_BLOCK, MOE_INPUT_FP8_1X128},
      {MOE_FORMAT_MXFP8, MOE_INPUT_MXFP8},
      {MOE_FORMAT_MXFP4, MOE_INPUT_BF16},
      {MOE_FORMAT_NVFP4, MOE_INPUT_BF16},
  };
  for (const auto& c : cases) {
    moe_problem p = small_problem();
    p.format = c.format;
    p.input_format = MOE_INPUT_DEFAULT;
    normalize_problem(p);
    EXPECT_EQ(p.input_format, c.input) << format_name(c.format);
    EXPECT_NO_THROW(validate_problem(p)) << format_name(c.format);
  }
}

TEST(NormalizeProblem, KeepsAnExplicitInputFormat) {
  moe_problem p = small_problem();
  p.format = MOE_FORMAT_FP8_TENSOR;
  p.input_format = MOE_INPUT_FP8_TENSOR_STATIC;
  normalize_problem(p);
  EXPECT_EQ(p.input_format, MOE_INPUT_FP8_TENSOR_STATIC);
}

TEST(NormalizeProblem, SetsLocalExpertsForEachPlacement) {
  const moe_problem none = small_problem();
  EXPECT_EQ(none.local_experts, 8);
  EXPECT_EQ(none.local_expert_offset, 0);
  const moe_problem linear = ep_problem(MOE_EP_LINEAR);
  EXPECT_EQ(linear.local_experts, 2);
  EXPECT_EQ(linear.local_expert_offset, 4);
  const moe_problem round_robin = ep_problem(MOE_EP_ROUND_ROBIN);
  EXPECT_EQ(round_robin.local_experts, 2);
  EXPECT_EQ(round_robin.local_expert_offset, 0);
}

TEST(ValidateProblem, AcceptsValidProblemsOfEveryKind) {
  EXPECT_NO_THROW(validate_problem(small_problem()));
  EXPECT_NO_THROW(validate_problem(ep_problem(MOE_EP_LINEAR)));
  EXPECT_NO_THROW(validate_problem(ep_problem(MOE_EP_ROUND_ROBIN)));
  moe_problem grouped = small_problem();  // DeepSeek-V3 shape, scaled down
  grouped.routing = MOE_ROUTING_GROUPED_TOPK;
  grouped.routing_bias = 1;
  grouped.num_groups = 4;
  grouped.topk_group = 2;
  grouped.top_k = 4;
  EXPECT_NO_THROW(validate_problem(grouped));
  moe_problem sink = small_problem();
  sink.routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  sink.sink_experts = 2;
  sink.sink_intermediate = 64;
  EXPECT_NO_THROW(validate_problem(sink));
}

// One inconsistent field, applied to small_problem(), and the message it must give.
struct BadProblem {
  const char* name;  // the rule it breaks; the test's name
  void (*edit)(moe_problem&);
  const char* message;
};

// Edits for the table; each returns p so that one more field can follow on the same line.
moe_problem& with_format(moe_problem& p, moe_format format) {
  p.format = format;
  return p;
}
moe_problem& with_activation(moe_problem& p, moe_activation activation) {
  p.activation = activation;
  return p;
}
moe_problem& grouped(moe_problem& p, int64_t num_groups, int64_t topk_group) {
  p.routing = MOE_ROUTING_GROUPED_TOPK;
  p.num_groups = num_groups;
  p.topk_group = topk_group;
  return p;
}
moe_problem& with_sinks(moe_problem& p, int64_t sink_experts, int64_t sink_intermediate) {
  p.sink_experts = sink_experts;
  p.sink_intermediate = sink_intermediate;
  return p;
}
// Rank 2 of 4 under linear placement holds experts 4 and 5.
constexpr int32_t kOneLocalIdTwice[8] = {-1, -1, -1, -1, 0, 1, 0, -1};
constexpr int32_t kOneLocal[8] = {-1, -1, -1, -1, 0, -1, -1, -1};
constexpr int32_t kLocalIdTooLarge[8] = {-1, -1, -1, -1, 0, 2, -1, -1};

using P = moe_problem;
const BadProblem kBadProblems[] = {
    {"StructSizeBelowMinimum", [](P& p) { p.struct_size = 8; },
     "struct_size 8 is below the minimum"},
    {"ExpertsBelowOne", [](P& p) { p.experts = 0; }, "experts=0 must be in [1, 65536]"},
    {"TopKAboveExperts", [](P& p) { p.top_k = 9; }, "top_k=9 must be in [1, experts=8]"},
    {"TopKBelowOne", [](P& p) { p.top_k = 0; }, "top_k=0 must be in [1, experts=8]"},
    {"HiddenBelowOne", [](P& p) { p.hidden = 0; }, "hidden=0 must be >= 1"},
    {"IntermediateBelowOne", [](P& p) { p.intermediate = -1; }, "intermediate=-1 must be >= 1"},
    {"OddHiddenForMxfp4", [](P& p) { with_format(p, MOE_FORMAT_MXFP4).hidden = 255; },
     "mxfp4 packs two values per byte: hidden=255 and intermediate=192 must be even"},
    {"OddHiddenForNvfp4", [](P& p) { with_format(p, MOE_FORMAT_NVFP4).hidden = 257; },
     "nvfp4 packs two values per byte: hidden=257 and intermediate=192 must be even"},
    {"OddIntermediateForNvfp4", [](P& p) { with_format(p, MOE_FORMAT_NVFP4).intermediate = 191; },
     "nvfp4 packs two values per byte: hidden=256 and intermediate=191 must be even"},
    {"OddSharedIntermediateForMxfp4",
     [](P& p) { with_format(p, MOE_FORMAT_MXFP4).shared_intermediate = 3; },
     "shared_intermediate=3 must be even for mxfp4"},
    {"UnresolvedInputFormat", [](P& p) { p.input_format = MOE_INPUT_DEFAULT; },
     "input_format=0 is not resolved to one of default, bf16, fp8_tensor_dynamic, "
     "fp8_tensor_static, fp8_1x128, mxfp8"},
    {"NonPositiveActivationLimit",
     [](P& p) { with_activation(p, MOE_ACTIVATION_SWIGLU_OAI).activation_limit = 0; },
     "activation_limit=0 must be finite and > 0"},
    {"NumGroupsNotDividingExperts", [](P& p) { grouped(p, 3, 1); },
     "num_groups=3 must divide experts=8"},
    {"ZeroNumGroups", [](P& p) { grouped(p, 0, 1); }, "num_groups=0 must divide experts=8"},
    {"TopkGroupAboveNumGroups", [](P& p) { grouped(p, 4, 5); },
     "topk_group=5 must be in [1, num_groups=4]"},
    {"TopKAboveTheKeptGroupsExperts", [](P& p) { grouped(p, 4, 1).top_k = 3; },
     "top_k=3 exceeds the 2 experts in topk_group=1 groups"},
    {"RoutingBiasWithOneExpertPerGroup", [](P& p) { grouped(p, 8, 2).routing_bias = 1; },
     "experts/num_groups=1 must be >= 2"},
    {"NonPositiveRoutedScalingFactor", [](P& p) { grouped(p, 4, 2).routed_scaling_factor = 0; },
     "routed_scaling_factor=0 must be finite and > 0"},
    {"SinkExpertsWithoutSinkRouting", [](P& p) { with_sinks(p, 1, 64); },
     "sink_experts=1 needs routing sigmoid_bias_sink"},
    {"SinkExpertsWithoutSinkIntermediate",
     [](P& p) { with_sinks(p, 2, 0).routing = MOE_ROUTING_SIGMOID_BIAS_SINK; },
     "sink_intermediate=0 must be >= 1 with 2 sink experts"},
    {"NegativeRedundantExperts", [](P& p) { p.redundant_experts = -1; },
     "redundant_experts=-1 must be >= 0"},
    {"MaxTokensBelowOne", [](P& p) { p.max_tokens = 0; }, "max_tokens=0 must be >= 1"},
    {"EpSizeWithoutPlacement", [](P& p) { with_ep(p, MOE_EP_NONE, 2, 0); },
     "ep_size=2 ep_rank=0 need an ep_placement (linear or round_robin)"},
    {"EpSizeBelowOne", [](P& p) { with_ep(p, MOE_EP_LINEAR, 0, 0); }, "ep_size=0 must be >= 1"},
    {"EpSizeNotDividingExperts", [](P& p) { with_ep(p, MOE_EP_LINEAR, 3, 0); },
     "ep_size=3 does not divide experts=8: pad the expert count to a multiple of the EP size"},
    {"EpRankAtEpSize", [](P& p) { with_ep(p, MOE_EP_ROUND_ROBIN, 4, 4); },
     "ep_rank=4 must be in [0, ep_size=4)"},
    {"NegativeEpRank", [](P& p) { with_ep(p, MOE_EP_LINEAR, 4, -1); },
     "ep_rank=-1 must be in [0, ep_size=4)"},
    {"EpMapWithALocalIdTwice",
     [](P& p) { with_ep(p, MOE_EP_LINEAR, 4, 2).ep_map = kOneLocalIdTwice; },
     "ep_map[4] and ep_map[6] are both local expert 0: each local id holds one expert"},
    {"EpMapWithTooFewLocalExperts",
     [](P& p) { with_ep(p, MOE_EP_LINEAR, 4, 2).ep_map = kOneLocal; },
     "ep_map maps 1 experts to this rank, expected local_experts=2"},
    {"EpMapEntryOutsideLocalRange",
     [](P& p) { with_ep(p, MOE_EP_LINEAR, 4, 2).ep_map = kLocalIdTooLarge; },
     "ep_map[5]=2 is outside [-1, local_experts=2)"},
};

void PrintTo(const BadProblem& bad, std::ostream* os) {
  *os << bad.name;
}

class ValidateProblemRejects : public testing::TestWithParam<BadProblem> {};

TEST_P(ValidateProblemRejects, WithAMessageNamingTheField) {
  moe_problem p = small_problem();
  GetParam().edit(p);
  try {
    validate_problem(p);
    ADD_FAILURE() << "expected moe::Error containing '" << GetParam().message << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_INVALID_ARGUMENT) << e.what();
    EXPECT_THAT(e.what(), testing::StartsWith("invalid problem: "));
    EXPECT_THAT(e.what(), testing::HasSubstr(GetParam().message));
  }
}

INSTANTIATE_TEST_SUITE_P(EachRule, ValidateProblemRejects, testing::ValuesIn(kBadProblems),
                         [](const testing::TestParamInfo<BadProblem>& info) {
                           return std::string(info.param.name);
                         });

// A value from a newer header than this build's is refused as unsupported, with the reason code a
// supports() answer gives, never read as some neighbouring value (docs/design.md §2 rule 13).
struct UnknownValue {
  const char* name;
  void (*edit)(moe_problem&);
  moe_reason reason;
  const char* message;
};

const UnknownValue kUnknownValues[] = {
    {"Format", [](P& p) { p.format = int32_t(format_table().size()); }, MOE_REASON_FORMAT,
     "format=6 is not a weight format this build knows (bf16, fp8_tensor, fp8_block, mxfp8, "
     "mxfp4, nvfp4)"},
    {"NegativeFormat", [](P& p) { p.format = -1; }, MOE_REASON_FORMAT,
     "format=-1 is not a weight format this build knows"},
    {"InputFormat", [](P& p) { p.input_format = 6; }, MOE_REASON_INPUT_FORMAT,
     "input_format=6 is not one this build knows (default, bf16"},
    {"Activation", [](P& p) { p.activation = int32_t(known_activations().size()); },
     MOE_REASON_ACTIVATION,
     "activation=5 is not one this build knows (silu_mul, silu_mul_clamp, swiglu_oai, gelu_mul, "
     "relu2)"},
    {"Routing", [](P& p) { p.routing = int32_t(known_routings().size()); }, MOE_REASON_ROUTING,
     "routing=4 is not a routing method this build knows (softmax_topk, sigmoid_topk, "
     "grouped_topk, sigmoid_bias_sink)"},
    {"ScoreFunction", [](P& p) { grouped(p, 4, 2).score_function = 2; }, MOE_REASON_ROUTING,
     "score_function=2 is not sigmoid or softmax"},
    {"EpPlacement", [](P& p) { p.ep_placement = 3; }, MOE_REASON_EP,
     "ep_placement=3 is not one this build knows (none, linear, round_robin)"},
};

class ValidateProblemRefuses : public testing::TestWithParam<UnknownValue> {};

TEST_P(ValidateProblemRefuses, AValueThisBuildDoesNotKnow) {
  moe_problem p = small_problem();
  GetParam().edit(p);
  try {
    validate_problem(p);
    ADD_FAILURE() << "expected moe::Refusal containing '" << GetParam().message << "'";
  } catch (const Refusal& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_UNSUPPORTED) << e.what();
    EXPECT_EQ(e.reason(), GetParam().reason) << e.what();
    EXPECT_THAT(e.what(), testing::HasSubstr(GetParam().message));
  }
}

INSTANTIATE_TEST_SUITE_P(EachEnum, ValidateProblemRefuses, testing::ValuesIn(kUnknownValues),
                         [](const testing::TestParamInfo<UnknownValue>& info) {
                           return std::string(info.param.name);
                         });

TEST(LocalExpertId, LinearPlacementHoldsAContiguousRange) {
  const moe_problem p = ep_problem(MOE_EP_LINEAR);
  EXPECT_EQ(local_ids(p, 0, 7), (std::vector<int32_t>{-1, -1, -1, -1, 0, 1, -1, -1}));
}

TEST(LocalExpertId, RoundRobinPlacementHoldsEveryEpSizeThExpert) {
  const moe_problem p = ep_problem(MOE_EP_ROUND_ROBIN);
  EXPECT_EQ(local_ids(p, 0, 7), (std::vector<int32_t>{-1, -1, 0, -1, -1, -1, 1, -1}));
}

TEST(LocalExpertId, WithoutEpEveryExpertIsLocal) {
  EXPECT_EQ(local_ids(small_problem(), 0, 7), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(LocalExpertId, OutOfRangeIdsAreNotLocal) {
  for (const moe_problem& p :
       {small_problem(), ep_problem(MOE_EP_LINEAR), ep_problem(MOE_EP_ROUND_ROBIN)}) {
    EXPECT_EQ(local_expert_id(p, -1), -1);
    EXPECT_EQ(local_expert_id(p, 8), -1);
    EXPECT_EQ(local_expert_id(p, 1000), -1);
  }
}

TEST(LocalExpertId, AnEpMapTakesPrecedenceOverThePlacement) {
  static const int32_t kMap[8] = {1, -1, -1, -1, -1, -1, -1, 0};
  moe_problem p = ep_problem(MOE_EP_LINEAR);
  p.ep_map = kMap;
  EXPECT_EQ(local_ids(p, -1, 8), (std::vector<int32_t>{-1, 1, -1, -1, -1, -1, -1, -1, 0, -1}));
}

TEST(Problem, FinalizeBuildsTheEpMapOfThePlacement) {
  Problem problem(ep_problem(MOE_EP_ROUND_ROBIN));
  EXPECT_TRUE(problem.ep_map().empty());
  EXPECT_EQ(problem.c().ep_map, nullptr);
  problem.finalize();
  EXPECT_EQ(problem.ep_map(), (std::vector<int32_t>{-1, -1, 0, -1, -1, -1, 1, -1}));
  EXPECT_EQ(problem.c().ep_map, problem.ep_map().data());
  EXPECT_NO_THROW(validate_problem(problem.c()));
  problem.raw().ep_placement = MOE_EP_NONE;
  problem.raw().ep_size = 1;
  problem.raw().ep_rank = 0;
  problem.finalize();
  EXPECT_TRUE(problem.ep_map().empty());
  EXPECT_EQ(problem.c().ep_map, nullptr);
  EXPECT_EQ(problem.c().local_experts, 8);
}

TEST(Problem, ACopyKeepsItsOwnEpMapAfterTheOriginalIsDestroyed) {
  auto original = std::make_unique<Problem>(ep_problem(MOE_EP_LINEAR));
  original->finalize();
  const Problem copy = *original;
  Problem assigned;
  assigned = *original;
  EXPECT_NE(copy.c().ep_map, original->c().ep_map);
  EXPECT_NE(assigned.c().ep_map, original->c().ep_map);
  original.reset();
  const std::vector<int32_t> expected = {-1, -1, -1, -1, 0, 1, -1, -1};
  for (const Problem* p : std::vector<const Problem*>{&copy, &assigned}) {
    const moe_problem c = p->c();
    ASSERT_NE(c.ep_map, nullptr);
    EXPECT_EQ(std::vector<int32_t>(c.ep_map, c.ep_map + c.experts), expected);
    EXPECT_NO_THROW(validate_problem(c));
  }
}

TEST(Problem, ConstructionCopiesABorrowedEpMap) {
  moe_problem raw = ep_problem(MOE_EP_ROUND_ROBIN);
  auto map =
      std::make_unique<std::vector<int32_t>>(std::vector<int32_t>{-1, -1, 0, -1, -1, -1, 1, -1});
  raw.ep_map = map->data();
  const Problem problem(raw);
  map.reset();
  EXPECT_EQ(problem.raw().ep_map, nullptr);
  EXPECT_EQ(problem.ep_map(), (std::vector<int32_t>{-1, -1, 0, -1, -1, -1, 1, -1}));
  EXPECT_EQ(problem.c().ep_map, problem.ep_map().data());
  EXPECT_EQ(problem.c().experts, 8);
}

// Every value of each enum gets a distinct name that parses back to it.
template <class E>
void expect_round_trip(int count, const char* (*name)(E),
                       std::optional<E> (*parse)(std::string_view)) {
  std::vector<std::string> seen;
  for (int v = 0; v < count; ++v) {
    const std::string spelling = name(static_cast<E>(v));
    EXPECT_NE(spelling, "invalid") << v;
    EXPECT_EQ(parse(spelling), std::optional<E>(static_cast<E>(v))) << spelling;
    for (const auto& other : seen) EXPECT_NE(spelling, other);
    seen.push_back(spelling);
  }
  EXPECT_STREQ(name(static_cast<E>(count)), "invalid");
  EXPECT_STREQ(name(static_cast<E>(-1)), "invalid");
}

TEST(EnumNames, EverySpellingParsesBackToItsValue) {
  expect_round_trip<moe_format>(int(format_table().size()), format_name, parse_format);
  expect_round_trip<moe_input_format>(int(known_input_formats().size()), input_format_name,
                                      parse_input_format);
  expect_round_trip<moe_activation>(int(known_activations().size()), activation_name,
                                    parse_activation);
  expect_round_trip<moe_routing>(int(known_routings().size()), routing_name, parse_routing);
  expect_round_trip<moe_score_function>(2, score_function_name, parse_score_function);
  expect_round_trip<moe_ep_placement>(3, ep_placement_name, parse_ep_placement);
  expect_round_trip<RouterDtype>(2, router_dtype_name, parse_router_dtype);
}

TEST(EnumNames, ListsAreTheSpellingsInValueOrder) {
  EXPECT_EQ(format_names(), "bf16, fp8_tensor, fp8_block, mxfp8, mxfp4, nvfp4");
  EXPECT_EQ(input_format_names(),
            "default, bf16, fp8_tensor_dynamic, fp8_tensor_static, fp8_1x128, mxfp8");
  EXPECT_EQ(activation_names(), "silu_mul, silu_mul_clamp, swiglu_oai, gelu_mul, relu2");
  EXPECT_EQ(routing_names(), "softmax_topk, sigmoid_topk, grouped_topk, sigmoid_bias_sink");
  EXPECT_STREQ(score_function_name(MOE_SCORE_SOFTMAX), "softmax");
  EXPECT_STREQ(ep_placement_name(MOE_EP_ROUND_ROBIN), "round_robin");
  EXPECT_STREQ(reason_name(MOE_REASON_MAX_TOKENS), "max_tokens");
  EXPECT_STREQ(reason_name(moe_reason(12)), "invalid");
  EXPECT_STREQ(memory_name(MOE_MEMORY_CUDA_DEVICE), "cuda_device");
  EXPECT_STREQ(memory_name(moe_memory(2)), "invalid");
  EXPECT_EQ(router_dtype_names(), "bf16, fp32");
}

TEST(EnumNames, AnUnknownSpellingParsesToNullopt) {
  for (const char* s : {"", "fp7", "BF16", "bf16 ", "silu", "invalid"}) {
    EXPECT_EQ(parse_format(s), std::nullopt) << s;
    EXPECT_EQ(parse_activation(s), std::nullopt) << s;
    EXPECT_EQ(parse_routing(s), std::nullopt) << s;
    EXPECT_EQ(parse_score_function(s), std::nullopt) << s;
    EXPECT_EQ(parse_ep_placement(s), std::nullopt) << s;
    EXPECT_EQ(parse_router_dtype(s), std::nullopt) << s;
  }
  EXPECT_EQ(parse_router_dtype("f32"), std::nullopt);
  EXPECT_EQ(parse_input_format("fp8_block"), std::nullopt);
  EXPECT_EQ(parse_ep_placement("round-robin"), std::nullopt);
}

TEST(DescribeProblem, IsOneLineWithTheEpSuffix) {
  EXPECT_EQ(describe_problem(small_problem()),
            "E=8 k=2 H=256 I=192 bf16/bf16 silu_mul softmax_topk");
  EXPECT_EQ(describe_problem(ep_problem(MOE_EP_ROUND_ROBIN)),
            "E=8 k=2 H=256 I=192 bf16/bf16 silu_mul softmax_topk ep=2/4 round_robin");
}

}  // namespace
}  // namespace moe
