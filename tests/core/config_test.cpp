// Proves moe/config.hpp: every key of a YAML config lands in Config, the defaults hold, and every
// bad input is a CONFIG_ERROR (or NOT_FOUND) whose message points at "<source>:<line>:<col>".
#include "moe/config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "moe/sdk/error.hpp"

namespace moe {
namespace {

constexpr char kMinimalProblem[] =
    "problem: {experts: 8, top_k: 2, hidden: 256, intermediate: 192}\n";

// Expects `fn` to throw moe::Error with `status` and every one of `parts` in its message.
template <class Fn>
void expect_error(Fn&& fn, moe_status status, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected moe::Error containing '" << *parts.begin() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << status_name(e.status()) << ": " << e.what();
    for (const auto& part : parts) EXPECT_THAT(e.what(), testing::HasSubstr(part));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected moe::Error, got another exception: " << e.what();
  }
}

void expect_config_error(const std::string& text, std::initializer_list<std::string> parts) {
  expect_error([&] { Config::parse(text, "test.yaml"); }, MOE_STATUS_CONFIG_ERROR, parts);
}

// Writes `text` to a fresh file under the test temp dir and returns its path.
std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::trunc) << text;
  return path;
}

constexpr char kFullConfig[] = R"(# every key, every kind of value
backend: reference
fallback: [deepgemm_style, reference]
plugin_dirs: [build/plugins, /opt/moe/plugins]
problem:
  experts: 16
  top_k: 4
  hidden: 512
  intermediate: 256
  format: fp8_block
  input_format: fp8_tensor_dynamic
  activation: gelu_mul
  gelu_tanh: true
  routing: grouped_topk
  renormalize: false
  score_function: softmax
  routing_bias: true
  num_groups: 4
  topk_group: 2
  routed_scaling_factor: 2.5
  expert_bias: true
  shared_intermediate: 128
  sink_experts: 0
  ep_placement: linear
  ep_size: 2
  ep_rank: 1
  redundant_experts: 0
  max_tokens: 4096
options: {tile_m: 128, fast_math: true}
tokens: 64
seed: 1234
)";

TEST(ConfigParse, AFullGroupedConfigFillsItsFields) {
  const Config c = Config::parse(kFullConfig, "test.yaml");
  EXPECT_EQ(c.source, "test.yaml");
  EXPECT_EQ(c.backend, "reference");
  EXPECT_EQ(c.fallback, (std::vector<std::string>{"deepgemm_style", "reference"}));
  EXPECT_EQ(c.plugin_dirs, (std::vector<std::string>{"build/plugins", "/opt/moe/plugins"}));
  EXPECT_EQ(c.options, (Options{{"tile_m", "128"}, {"fast_math", "true"}}));
  EXPECT_EQ(c.tokens, 64);
  EXPECT_EQ(c.seed, 1234u);
  const moe_problem p = c.problem.c();
  EXPECT_EQ(p.experts, 16);
  EXPECT_EQ(p.top_k, 4);
  EXPECT_EQ(p.hidden, 512);
  EXPECT_EQ(p.intermediate, 256);
  EXPECT_EQ(p.format, MOE_FORMAT_FP8_BLOCK);
  EXPECT_EQ(p.input_format, MOE_INPUT_FP8_TENSOR_DYNAMIC);
  EXPECT_EQ(p.activation, MOE_ACTIVATION_GELU_MUL);
  EXPECT_EQ(p.gelu_tanh, 1);
  EXPECT_EQ(p.routing, MOE_ROUTING_GROUPED_TOPK);
  EXPECT_EQ(p.renormalize, 0);
  EXPECT_EQ(p.score_function, MOE_SCORE_SOFTMAX);
  EXPECT_EQ(p.routing_bias, 1);
  EXPECT_EQ(p.num_groups, 4);
  EXPECT_EQ(p.topk_group, 2);
  EXPECT_FLOAT_EQ(p.routed_scaling_factor, 2.5f);
  EXPECT_EQ(p.expert_bias, 1);
  EXPECT_EQ(p.shared_intermediate, 128);
  EXPECT_EQ(p.ep_placement, MOE_EP_LINEAR);
  EXPECT_EQ(p.ep_size, 2);
  EXPECT_EQ(p.ep_rank, 1);
  EXPECT_EQ(p.local_experts, 8);
  EXPECT_EQ(p.local_expert_offset, 8);
  EXPECT_EQ(p.max_tokens, 4096);
  ASSERT_NE(p.ep_map, nullptr);
  for (int64_t e = 0; e < 16; ++e) EXPECT_EQ(p.ep_map[e], e < 8 ? -1 : e - 8) << e;
}

TEST(ConfigParse, SinkExpertFieldsAreRead) {
  const Config c = Config::parse(
      "problem: {experts: 8, top_k: 2, hidden: 256, intermediate: 192,\n"
      "          routing: sigmoid_bias_sink, sink_experts: 2, sink_intermediate: 64,\n"
      "          route_scale: 0.5, global_scale: 0.25}\n",
      "test.yaml");
  EXPECT_EQ(c.problem.raw().routing, MOE_ROUTING_SIGMOID_BIAS_SINK);
  EXPECT_EQ(c.problem.raw().sink_experts, 2);
  EXPECT_EQ(c.problem.raw().sink_intermediate, 64);
  EXPECT_FLOAT_EQ(c.problem.raw().route_scale, 0.5f);
  EXPECT_FLOAT_EQ(c.problem.raw().global_scale, 0.25f);
}

TEST(ConfigParse, ClampedActivationFieldsAreRead) {
  const Config c = Config::parse(
      "problem: {experts: 8, top_k: 2, hidden: 256, intermediate: 192,\n"
      "          activation: swiglu_oai, activation_alpha: 1.5, activation_limit: 9.25}\n",
      "test.yaml");
  EXPECT_FLOAT_EQ(c.problem.raw().activation_alpha, 1.5f);
  EXPECT_FLOAT_EQ(c.problem.raw().activation_limit, 9.25f);
  const Config clamp = Config::parse(
      "problem: {experts: 8, top_k: 2, hidden: 256, intermediate: 192,\n"
      "          activation: silu_mul_clamp, activation_limit: 3.0}\n",
      "test.yaml");
  EXPECT_FLOAT_EQ(clamp.problem.raw().activation_limit, 3.0f);
}

// A key the problem's routing or activation never reads, set to other than its default, is refused
// (its value would be ignored), naming the key, its line and what it applies to; sink routing's
// scales must be positive. Defaults pass: a problem written out with every key reads back.
TEST(ConfigParse, KeysThatDoNotApplyAreRefusedByName) {
  const std::string head = "problem:\n  experts: 8\n  top_k: 2\n  hidden: 64\n  intermediate: 32\n";
  struct Case {
    const char* lines;
    std::vector<std::string> words;
  };
  const Case cases[] = {
      {"  routing: sigmoid_topk\n  score_function: softmax\n",
       {"test.yaml:7:", "score_function applies to routing grouped_topk",
        "this problem routes sigmoid_topk"}},
      {"  routed_scaling_factor: 2.0\n",
       {"test.yaml:6:", "routed_scaling_factor applies to routing grouped_topk",
        "its value would be ignored"}},
      {"  routing: sigmoid_topk\n  num_groups: 2\n  topk_group: 1\n",
       {"test.yaml:7:", "num_groups applies to routing grouped_topk"}},
      {"  route_scale: 2.0\n", {"route_scale applies to routing sigmoid_bias_sink"}},
      {"  routing: sigmoid_bias_sink\n  renormalize: false\n",
       {"test.yaml:7:", "renormalize applies to routings other than sigmoid_bias_sink",
        "this problem routes sigmoid_bias_sink"}},
      {"  routing: grouped_topk\n  num_groups: 2\n  topk_group: 1\n  global_scale: 0.5\n",
       {"test.yaml:9:", "global_scale applies to routing sigmoid_bias_sink",
        "this problem routes grouped_topk"}},
      {"  activation_alpha: 1.5\n",
       {"activation_alpha applies to activation swiglu_oai",
        "this problem's activation is silu_mul"}},
      {"  activation: silu_mul_clamp\n  activation_alpha: 1.5\n",
       {"activation_alpha applies to activation swiglu_oai"}},
      {"  activation_limit: 9\n",
       {"activation_limit applies to activations swiglu_oai and silu_mul_clamp"}},
      {"  activation: relu2\n  gelu_tanh: true\n", {"gelu_tanh applies to activation gelu_mul"}},
      {"  routing: sigmoid_bias_sink\n  sink_experts: 0\n  sink_intermediate: 32\n",
       {"test.yaml:8:", "sink_intermediate applies to sink experts",
        "this problem has no sink experts"}},
      {"  routing: sigmoid_bias_sink\n  route_scale: 0\n",
       {"route_scale=0 must be finite and > 0", "test.yaml:7:"}},
      {"  routing: sigmoid_bias_sink\n  global_scale: -2\n",
       {"global_scale=-2 must be finite and > 0", "test.yaml:7:"}},
      {"  routing: sigmoid_bias_sink\n  route_scale: 1.5\n  global_scale: 0\n",
       {"global_scale=0 must be finite and > 0", "test.yaml:8:"}},
      {"  routing: sigmoid_bias_sink\n  route_scale: 1e60\n",
       {"route_scale=1e60 is outside the range of a float", "test.yaml:7:"}},
      {"  routing: sigmoid_bias_sink\n  route_scale: 1e-60\n",
       {"route_scale=1e-60 is outside the range of a float"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.lines);
    try {
      Config::parse(head + c.lines, "test.yaml");
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), MOE_STATUS_CONFIG_ERROR) << e.what();
      for (const auto& w : c.words) EXPECT_THAT(e.what(), testing::HasSubstr(w));
    }
  }
  // renormalize at its default (true) on sink routing, as a written-out sink problem has it.
  EXPECT_NO_THROW(
      Config::parse(head + "  routing: sigmoid_bias_sink\n  renormalize: true\n", "test.yaml"));
  // Every such key at its default, as moe_host_problem_format and Problem.as_dict() write them.
  EXPECT_NO_THROW(Config::parse(head + "  routing: softmax_topk\n  score_function: sigmoid\n"
                                       "  num_groups: 1\n  topk_group: 1\n"
                                       "  routed_scaling_factor: 1.0\n  route_scale: 1\n"
                                       "  global_scale: 1.0\n  activation_alpha: 1.702\n"
                                       "  activation_limit: 7.0\n  gelu_tanh: false\n"
                                       "  sink_experts: 0\n  sink_intermediate: 0\n",
                                "test.yaml"));
}

// A config's tokens must fit its max_tokens; without tokens the default 16 shrinks to fit.
TEST(ConfigParse, TokensFitMaxTokens) {
  const std::string small =
      "problem: {experts: 8, top_k: 2, hidden: 64, intermediate: 32, max_tokens: 4}\n";
  expect_config_error(small + "tokens: 5\n",
                      {"test.yaml:2:9: tokens=5 is above the problem's max_tokens=4"});
  EXPECT_EQ(Config::parse(small, "test.yaml").tokens, 4);
  EXPECT_EQ(Config::parse(small + "tokens: 3\n", "test.yaml").tokens, 3);
  EXPECT_EQ(Config::parse(kMinimalProblem, "test.yaml").tokens, 16);
}

// The checkpoint section's numbers and flags where they cannot apply.
TEST(ConfigParse, CheckpointLayerTpAndInterleaveMisuseIsRefused) {
  const std::string head = std::string(kMinimalProblem) + "checkpoint:\n  path: x\n";
  expect_config_error(head + "  convention: mixtral\n  layer: -1\n",
                      {"test.yaml:5:10: layer=-1 must be >= 0"});
  expect_config_error(head + "  convention: mixtral\n  tp_size: 0\n",
                      {"test.yaml:5:12: tp_size=0 must be >= 1"});
  expect_config_error(
      head + "  convention: mixtral\n  interleaved_gate_up: true\n",
      {"test.yaml:5:24: interleaved_gate_up is for convention stacked", "mixtral never reads it"});
  EXPECT_NO_THROW(
      Config::parse(head + "  convention: mixtral\n  interleaved_gate_up: false\n", "test.yaml"));
  EXPECT_NO_THROW(
      Config::parse(head + "  convention: stacked\n  interleaved_gate_up: true\n", "test.yaml"));
}

// A validation error points at the line of the key it names, and names the field and its value.
TEST(ConfigParse, ValidationErrorsPointAtTheKeyTheyName) {
  expect_config_error("problem:\n  experts: 8\n  top_k: -1\n  hidden: 64\n  intermediate: 32\n",
                      {"test.yaml:3:", "top_k=-1 must be in [1, experts=8]"});
  expect_config_error(
      "problem:\n  experts: 8\n  top_k: 2\n  hidden: 64\n  intermediate: 2147483647\n",
      {"test.yaml:5:", "intermediate=2147483647 must be <= 1048576"});
}

TEST(ConfigParse, OmittedKeysKeepTheirDefaults) {
  const Config c = Config::parse(kMinimalProblem, "test.yaml");
  EXPECT_EQ(c.backend, "auto");
  EXPECT_TRUE(c.fallback.empty());
  EXPECT_TRUE(c.plugin_dirs.empty());
  EXPECT_TRUE(c.options.empty());
  EXPECT_EQ(c.tokens, 16);
  EXPECT_EQ(c.seed, 1u);
  const moe_problem p = c.problem.c();
  EXPECT_EQ(p.format, MOE_FORMAT_BF16);
  EXPECT_EQ(p.input_format, MOE_INPUT_BF16);  // normalised
  EXPECT_EQ(p.routing, MOE_ROUTING_SOFTMAX_TOPK);
  EXPECT_EQ(p.renormalize, 1);
  EXPECT_EQ(p.local_experts, 8);
  EXPECT_EQ(p.ep_map, nullptr);
  EXPECT_EQ(p.max_tokens, 16384);
  EXPECT_EQ(Config::parse(kMinimalProblem).source, "<string>");
}

TEST(ConfigParse, AFallbackOrPluginDirGivenAsOneStringIsAListOfOne) {
  const Config c =
      Config::parse(std::string("backend: x\nfallback: reference\nplugin_dirs: build/plugins\n") +
                    kMinimalProblem);
  EXPECT_EQ(c.fallback, (std::vector<std::string>{"reference"}));
  EXPECT_EQ(c.plugin_dirs, (std::vector<std::string>{"build/plugins"}));
}

TEST(ConfigParse, OptionValuesAreKeptAsWrittenStringsInOrder) {
  const Config c = Config::parse(std::string(kMinimalProblem) + "backend: x\n" +
                                 "options:\n  zeta: 1\n  alpha: true\n  mid: 0.50\n  name: x y\n");
  EXPECT_EQ(c.options,
            (Options{{"zeta", "1"}, {"alpha", "true"}, {"mid", "0.50"}, {"name", "x y"}}));
}

TEST(ConfigParse, EpSettingsProduceTheEpMap) {
  const Config c = Config::parse(
      "problem: {experts: 8, top_k: 2, hidden: 256, intermediate: 192,\n"
      "          ep_placement: round_robin, ep_size: 2, ep_rank: 1}\n",
      "test.yaml");
  const Config copy = c;  // the map travels with copies
  for (const Config* config : {&c, &copy}) {
    const moe_problem p = config->problem.c();
    EXPECT_EQ(p.local_experts, 4);
    ASSERT_NE(p.ep_map, nullptr);
    EXPECT_EQ(std::vector<int32_t>(p.ep_map, p.ep_map + 8),
              (std::vector<int32_t>{-1, 0, -1, 1, -1, 2, -1, 3}));
  }
  EXPECT_NE(copy.problem.c().ep_map, c.problem.c().ep_map);
}

TEST(ConfigParse, ZeroTokensIsAllowed) {
  EXPECT_EQ(Config::parse(std::string(kMinimalProblem) + "tokens: 0\n").tokens, 0);
}

struct SyntaxError {
  const char* text;
  const char* where;  // "test.yaml:<line>:" of the offending token
};

TEST(ConfigParse, YamlSyntaxErrorsGiveTheirLine) {
  const SyntaxError cases[] = {
      {"backend: auto\nplugin_dirs: [a]]\n", "test.yaml:2:"},
      {"backend: auto\nfallback: [reference]\ntokens: 4\nseed: 2: 3\n", "test.yaml:4:"},
      {"backend: auto\nfallback: [a, b\nseed: 1\n", "test.yaml:3:"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    expect_config_error(c.text, {c.where, "YAML syntax error"});
  }
}

TEST(ConfigParse, RejectsAnUnknownTopLevelKeyWithItsLineAndTheKnownKeys) {
  expect_config_error(std::string(kMinimalProblem) + "tokens: 4\nbakend: auto\n",
                      {"test.yaml:3:1: unknown key 'bakend' in the config; known keys: "
                       "backend, fallback, plugin_dirs, problem, options, tokens, seed"});
}

TEST(ConfigParse, RejectsAnUnknownProblemKeyWithItsLineAndTheKnownKeys) {
  expect_config_error(
      "backend: auto\nproblem:\n  experts: 8\n  top_k: 2\n  hidden: 256\n  intermediate: 192\n"
      "  topk: 2\n",
      {"test.yaml:7:3: unknown key 'topk' in problem; known keys: experts, top_k, hidden,",
       "max_tokens"});
}

TEST(ConfigParse, RejectsAWrongTypeWithTheValuesLine) {
  expect_config_error("problem:\n  experts: abc\n  top_k: 2\n  hidden: 256\n  intermediate: 192\n",
                      {"test.yaml:2:12: experts must be an integer, got 'abc'"});
  expect_config_error(
      "problem: {experts: 8, top_k: 2, hidden: 256, intermediate: 192, renormalize: maybe}\n",
      {"test.yaml:1:78: renormalize must be true or false, got 'maybe'"});
  expect_config_error(
      "problem: {experts: 8, top_k: 2, hidden: 256, intermediate: 192, route_scale: big}\n",
      {"route_scale must be a number, got 'big'"});
  expect_config_error("problem: {experts: [8], top_k: 2, hidden: 256, intermediate: 192}\n",
                      {"test.yaml:1:20: experts must be an integer"});
  expect_config_error(std::string(kMinimalProblem) + "backend: [a, b]\n",
                      {"test.yaml:2:10: backend must be a string"});
  expect_config_error(std::string(kMinimalProblem) + "fallback: {a: b}\n",
                      {"test.yaml:2:11: fallback must be a list of strings"});
}

// A list or mapping as a key is a config error with its place, not a yaml-cpp exception.
TEST(ConfigParse, RejectsANonScalarKeyWithItsLine) {
  expect_config_error(std::string("[a]: 1\n") + kMinimalProblem,
                      {"test.yaml:1:1: a key in the config must be a plain name"});
  expect_config_error(std::string(kMinimalProblem) + "options: {[a]: b}\n", {"test.yaml:2:11:"});
  expect_config_error("problem: {[x]: 1, experts: 8, top_k: 2, hidden: 256, intermediate: 192}\n",
                      {"test.yaml:1:11:"});
}

TEST(ConfigParse, RejectsAnInt32FieldOutOfRange) {
  expect_config_error(
      "problem: {experts: 8, top_k: 2, hidden: 256, intermediate: 192, ep_size: 4294967296}\n",
      {"test.yaml:1:74: ep_size is out of range"});
}

TEST(ConfigParse, RejectsAnUnknownEnumValueListingTheValidSpellings) {
  expect_config_error(
      "problem:\n  experts: 8\n  top_k: 2\n  hidden: 256\n  intermediate: 192\n  format: fp7\n",
      {"test.yaml:6:11: format: 'fp7' is not one of: bf16, fp8_tensor, fp8_block, mxfp8, mxfp4, "
       "nvfp4"});
  expect_config_error(
      "problem: {experts: 8, top_k: 2, hidden: 256, intermediate: 192, ep_placement: ring}\n",
      {"ep_placement: 'ring' is not one of: none, linear, round_robin"});
  expect_config_error(
      "problem: {experts: 8, top_k: 2, hidden: 256, intermediate: 192, activation: silu}\n",
      {"activation: 'silu' is not one of: silu_mul, silu_mul_clamp, swiglu_oai, gelu_mul, relu2"});
}

TEST(ConfigParse, RejectsAConfigWithoutAProblem) {
  expect_config_error("backend: auto\n", {"test.yaml: the config needs 'problem'"});
}

TEST(ConfigParse, RejectsAProblemMissingARequiredKey) {
  expect_config_error("backend: auto\nproblem: {experts: 8, top_k: 2, intermediate: 192}\n",
                      {"test.yaml:2:10: problem needs 'hidden'"});
}

TEST(ConfigParse, RejectsANonMappingConfigOrProblem) {
  expect_config_error("- backend\n", {"test.yaml:1:1: the config must be a mapping"});
  expect_config_error("problem: 5\n", {"test.yaml:1:10: problem must be a mapping"});
  expect_config_error(std::string(kMinimalProblem) + "options: [a]\n",
                      {"test.yaml:2:10: options must be a mapping"});
}

// The validation message at the line and column of the key it names first.
TEST(ConfigParse, AnInvalidProblemCarriesTheValidationMessageAtItsKey) {
  expect_config_error(
      "backend: auto\nproblem: {experts: 8, top_k: 9, hidden: 256, intermediate: 192}\n",
      {"test.yaml:2:30: invalid problem: top_k=9 must be in [1, experts=8]"});
  expect_config_error(
      "backend: auto\nproblem:\n  experts: 6\n  top_k: 2\n  hidden: 256\n  intermediate: 192\n"
      "  ep_placement: linear\n  ep_size: 4\n",
      {"test.yaml:8:12: invalid problem: ep_size=4 does not divide experts=6", "pad the expert"});
  expect_config_error(
      "problem: {experts: 8, top_k: 2, hidden: 256, intermediate: 192, ep_size: 2}\n",
      {"test.yaml:1:74: invalid problem: ep_size=2 ep_rank=0 need an ep_placement"});
}

TEST(ConfigParse, RejectsNegativeTokensAndSeed) {
  expect_config_error(std::string(kMinimalProblem) + "tokens: -1\n",
                      {"test.yaml:2:9: tokens=-1 must be >= 0"});
  expect_config_error(std::string(kMinimalProblem) + "seed: -1\n",
                      {"test.yaml:2:7: seed must be an integer >= 0, got '-1'"});
}

// Integers are decimal, as on the command line: yaml-cpp alone reads 010 as 8 and 0x10 as 16.
TEST(ConfigParse, ReadsIntegersInDecimalOnly) {
  expect_config_error("problem: {experts: 010, top_k: 2, hidden: 256, intermediate: 192}\n",
                      {"test.yaml:1:20: experts must be an integer in decimal digits, got '010'"});
  expect_config_error(
      std::string(kMinimalProblem) + "seed: 0x10\n",
      {"test.yaml:2:7: seed must be an integer >= 0 in decimal digits, got '0x10'"});
  expect_config_error(std::string(kMinimalProblem) + "tokens: 08\n", {"tokens must be", "'08'"});
  expect_config_error(std::string(kMinimalProblem) + "seed: 99999999999999999999\n",
                      {"test.yaml:2:7: seed = 99999999999999999999 is out of range"});
  const Config c =
      Config::parse(std::string(kMinimalProblem) + "tokens: +5\nseed: 0\n", "test.yaml");
  EXPECT_EQ(c.tokens, 5);
  EXPECT_EQ(c.seed, 0u);
}

// options: plain keys for the named backend, sections for a plugin each; under auto only sections
// (the winner is not known when the config is written), and no fallback (auto tries every plugin).
TEST(ConfigParse, ReadsOptionSectionsAndRefusesWhatAutoWouldIgnoreOrMisdeliver) {
  const Config c = Config::parse(std::string(kMinimalProblem) +
                                     "backend: trtllm_style\nfallback: [reference]\n"
                                     "options:\n  gemm_tiles: tokens\n  cutlass_mega: {sms: 64}\n",
                                 "test.yaml");
  EXPECT_EQ(c.options, (Options{{"gemm_tiles", "tokens"}}));
  ASSERT_EQ(c.plugin_options.size(), 1u);
  EXPECT_EQ(c.plugin_options[0].plugin, "cutlass_mega");
  EXPECT_EQ(c.plugin_options[0].options, (Options{{"sms", "64"}}));
  EXPECT_EQ(c.plugin_options[0].where, "test.yaml:6:3");
  EXPECT_NO_THROW(Config::parse(
      std::string(kMinimalProblem) + "backend: auto\noptions: {cutlass_mega: {sms: 64}}\n",
      "test.yaml"));
  expect_config_error(std::string(kMinimalProblem) + "backend: auto\noptions: {sms: 64}\n",
                      {"test.yaml:3:10: options: 'sms' is given to no plugin in particular",
                       "options: {cutlass_mega: {sms: 64}}"});
  expect_config_error(std::string(kMinimalProblem) + "fallback: [reference]\n",
                      {"test.yaml:2:11: fallback: backend: auto already tries every plugin"});
  expect_config_error(
      std::string(kMinimalProblem) + "backend: x\noptions: {cutlass_mega: {sms: 1, sms: 2}}\n",
      {"duplicate key 'sms' in options.cutlass_mega"});
  expect_config_error(std::string(kMinimalProblem) + "backend: x\noptions: {p: {sms: [1]}}\n",
                      {"options.p.sms must be a string"});
}

TEST(ConfigParse, RejectsAnEmptyText) {
  expect_config_error("", {"test.yaml: the config is empty"});
  expect_config_error("# only a comment\n", {"test.yaml: the config is empty"});
}

TEST(ConfigLoadFile, ReadsAFileAndNamesItAsTheSource) {
  const std::string path = write_temp("config_test_full.yaml", kFullConfig);
  const Config c = Config::load_file(path);
  EXPECT_EQ(c.source, path);
  EXPECT_EQ(c.backend, "reference");
  EXPECT_EQ(c.problem.c().experts, 16);
  ASSERT_NE(c.problem.c().ep_map, nullptr);
  std::remove(path.c_str());
}

TEST(ConfigLoadFile, ErrorsNameTheFileAndLine) {
  const std::string path =
      write_temp("config_test_bad.yaml", std::string(kMinimalProblem) + "seed: 1\nbogus: 1\n");
  expect_error([&] { Config::load_file(path); }, MOE_STATUS_CONFIG_ERROR,
               {path + ":3:1: unknown key 'bogus'"});
  std::remove(path.c_str());
}

TEST(ConfigLoadFile, AMissingFileIsNotFoundAndNamesThePath) {
  const std::string path = testing::TempDir() + "/config_test_no_such_file.yaml";
  expect_error([&] { Config::load_file(path); }, MOE_STATUS_NOT_FOUND,
               {"cannot open config file '" + path + "'"});
}

TEST(ConfigLoadFile, AnEmptyFileIsRejected) {
  const std::string path = write_temp("config_test_empty.yaml", "");
  expect_error([&] { Config::load_file(path); }, MOE_STATUS_CONFIG_ERROR,
               {path + ": the config is empty"});
  std::remove(path.c_str());
}

TEST(ConfigParse, RejectsADuplicateKeyNamingIt) {
  expect_config_error(std::string(kMinimalProblem) + "tokens: 4\ntokens: 8\n",
                      {"test.yaml:3:1: duplicate key 'tokens' in the config"});
  expect_config_error(std::string(kMinimalProblem) + "options: {a: 1, a: 2}\n",
                      {"duplicate key 'a' in options"});
}

TEST(ConfigParse, RejectsASecondYamlDocument) {
  expect_config_error(std::string(kMinimalProblem) + "---\nbackend: reference\n",
                      {"a config holds one YAML document"});
}

TEST(ConfigLoad, ADirectoryIsNotAConfigFile) {
  try {
    Config::load_file(testing::TempDir());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), MOE_STATUS_NOT_FOUND);
    EXPECT_THAT(e.what(), testing::HasSubstr("is a directory"));
  }
}

// A device or a pipe is read with a bound: /dev/zero is refused after 16 MiB, naming the file,
// instead of taking the host's memory; a pipe that holds a config reads like a file.
TEST(ConfigLoad, AnEndlessFileIsRefusedAfterTheBound) {
  expect_error([] { Config::load_file("/dev/zero"); }, MOE_STATUS_CONFIG_ERROR,
               {"config file '/dev/zero' holds more than 16 MiB"});
  const std::string fifo = testing::TempDir() + "moe_config_fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::ofstream out(fifo);
    out << kMinimalProblem;
  });
  const Config c = Config::load_file(fifo);
  writer.join();
  std::remove(fifo.c_str());
  EXPECT_EQ(c.problem.c().experts, 8);
}

}  // namespace
}  // namespace moe

namespace moe {
namespace {

// yaml-cpp's LoadAll never ends on these (it yields empty documents forever): the loader must
// stop at the second document and refuse.
TEST(ConfigParse, StrayTopLevelFlowCharactersAreRefusedNotLooped) {
  for (const char* text : {",", "- a\n,", ",]", "}"}) {
    try {
      Config::parse(text, "test.yaml");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), MOE_STATUS_CONFIG_ERROR) << text;
    }
  }
}

TEST(ConfigParse, TensorParallelSizesOutOfRangeAreRefused) {
  try {
    Config::parse(
        "problem: {experts: 8, top_k: 2, hidden: 64, intermediate: 32}\n"
        "checkpoint: {path: x, convention: mixtral, tp_size: 4294967298, tp_rank: 1}\n",
        "test.yaml");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("tp_size=4294967298 is out of range"));
  }
}

TEST(ConfigParse, RouterDtypeIsACheckpointSettingThatDefaultsToBf16) {
  const std::string ckpt = "checkpoint: {path: x, convention: mixtral";
  const auto parse = [&](const std::string& extra) {
    return Config::parse(std::string(kMinimalProblem) + ckpt + extra + "}\n", "test.yaml");
  };
  EXPECT_EQ(parse("").checkpoint->router_dtype, RouterDtype::kBf16);
  EXPECT_EQ(parse(", router_dtype: bf16").checkpoint->router_dtype, RouterDtype::kBf16);
  EXPECT_EQ(parse(", router_dtype: fp32").checkpoint->router_dtype, RouterDtype::kFp32);
}

TEST(ConfigParse, RejectsAnUnknownRouterDtypeListingTheValidSpellings) {
  for (const char* bad : {"fp16", "FP32", "f32", "float32"}) {
    expect_config_error(
        std::string(kMinimalProblem) +
            "checkpoint: {path: x, convention: mixtral, router_dtype: " + bad + "}\n",
        {"test.yaml:2:", std::string("router_dtype: '") + bad + "' is not one of: bf16, fp32"});
  }
}

TEST(ConfigParse, RouterDtypeInTheProblemSaysItBelongsToTheCheckpoint) {
  expect_config_error(
      "problem: {experts: 8, top_k: 2, hidden: 256, intermediate: 192,\n"
      "          router_dtype: fp32}\n",
      {"test.yaml:2:", "router_dtype belongs in the checkpoint section"});
}

}  // namespace
}  // namespace moe
