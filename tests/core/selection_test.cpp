// Backend selection: named, fallback and auto (with decode rules, ABI 1.3), each explaining
// itself.
#include <fmt/format.h>

#include <stdexcept>

#include "../support/test_env.hpp"

namespace moe::test {
namespace {

Config config_for(const std::string& backend, std::vector<std::string> fallback,
                  moe_format format) {
  Config c;
  c.source = "test.yaml";
  c.backend = backend;
  c.fallback = std::move(fallback);
  c.problem = small_problem(format);
  return c;
}

// fixture_works: priority 1, supports everything; fixture_picky: priority 5, bf16 silu_mul only.
Registry two_plugins() {
  return registry_of({fixture_dir("works"), fixture_dir("picky")});
}

TEST(Selection, AutoPicksTheHighestPrioritySupportingPlugin) {
  const Registry r = two_plugins();
  EXPECT_EQ(select_backend(r, config_for("auto", {}, MOE_FORMAT_BF16)).plugin->name(),
            "fixture_picky");
  const Selection s = select_backend(r, config_for("auto", {}, MOE_FORMAT_FP8_BLOCK));
  EXPECT_EQ(s.plugin->name(), "fixture_works");
  EXPECT_THAT(s.rule, testing::HasSubstr("auto: highest priority (1)"));
}

TEST(Selection, NamedBackendIsChosenWhenItSupportsTheProblem) {
  const Selection s =
      select_backend(two_plugins(), config_for("fixture_works", {}, MOE_FORMAT_BF16));
  EXPECT_EQ(s.plugin->name(), "fixture_works");
  EXPECT_THAT(s.rule, testing::HasSubstr("named in test.yaml"));
}

TEST(Selection, AliasSelectsItsPlugin) {
  const Selection s =
      select_backend(two_plugins(), config_for("fixture_picky_alias", {}, MOE_FORMAT_BF16));
  EXPECT_EQ(s.plugin->name(), "fixture_picky");
}

TEST(Selection, UnknownBackendNameListsTheAvailableOnes) {
  expect_error([] { select_backend(two_plugins(), config_for("deep_gem", {}, MOE_FORMAT_BF16)); },
               MOE_STATUS_CONFIG_ERROR,
               {"unknown backend 'deep_gem'", "available: fixture_works, fixture_picky"});
}

TEST(Selection, UnknownFallbackNameIsAnError) {
  expect_error(
      [] { select_backend(two_plugins(), config_for("fixture_works", {"nope"}, MOE_FORMAT_BF16)); },
      MOE_STATUS_CONFIG_ERROR, {"test.yaml: unknown backend 'nope' in fallback"});
  // auto chooses a backend, a fallback names one: 'auto' there is its own error, and a fallback's
  // list of what is available does not offer it.
  expect_error(
      [] { select_backend(two_plugins(), config_for("fixture_works", {"auto"}, MOE_FORMAT_BF16)); },
      MOE_STATUS_CONFIG_ERROR, {"'auto' in fallback", "list the backends to try"});
  try {
    select_backend(two_plugins(), config_for("fixture_works", {"nope"}, MOE_FORMAT_BF16));
    ADD_FAILURE() << "an unknown fallback was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::Not(testing::HasSubstr("(or auto)")));
  }
}

// A config's options reach only the plugin they are for: the plain keys the named backend (never
// the fallback that replaced it), a section {NAME: {...}} the plugin of that name or alias.
TEST(Selection, OptionsReachOnlyThePluginTheyAreFor) {
  const Registry r = two_plugins();
  Config c = config_for("fixture_picky", {"fixture_works"}, MOE_FORMAT_BF16);
  c.options = {{"tile", "64"}};
  c.plugin_options = {{"fixture_works", {{"depth", "2"}}, "test.yaml:4:12"},
                      {"fixture_picky_alias", {{"fast", "1"}}, "test.yaml:5:12"}};
  Selection s = select_backend(r, c);  // picky takes bf16: named, plain keys and its section
  EXPECT_EQ(s.plugin->name(), "fixture_picky");
  EXPECT_EQ(s.options, (Options{{"tile", "64"}, {"fast", "1"}}));
  EXPECT_TRUE(s.options_left_out.empty());
  EXPECT_THAT(s.explain(), testing::HasSubstr("options for fixture_picky: tile=64, fast=1"));
  c.problem = small_problem(MOE_FORMAT_FP8_BLOCK);  // picky refuses: the fallback, its own only
  s = select_backend(r, c);
  EXPECT_EQ(s.plugin->name(), "fixture_works");
  EXPECT_EQ(s.options, (Options{{"depth", "2"}}));
  EXPECT_EQ(s.options_left_out, (std::vector<std::string>{"tile"}));
  EXPECT_THAT(s.explain(), testing::HasSubstr("options left out (the named backend's, not its "
                                              "fallback's): tile"));
  Config a = config_for("auto", {}, MOE_FORMAT_FP8_BLOCK);  // auto: the winner's section only
  a.plugin_options = c.plugin_options;
  s = select_backend(r, a);
  EXPECT_EQ(s.plugin->name(), "fixture_works");
  EXPECT_EQ(s.options, (Options{{"depth", "2"}}));
}

TEST(Selection, AnOptionSectionForNoPluginOrAKeyGivenTwiceIsAConfigError) {
  Config c = config_for("fixture_works", {}, MOE_FORMAT_BF16);
  c.plugin_options = {{"fixture_wroks", {{"depth", "2"}}, "test.yaml:4:12"}};
  expect_error([&] { select_backend(two_plugins(), c); }, MOE_STATUS_CONFIG_ERROR,
               {"test.yaml:4:12: options.fixture_wroks: no plugin of that name or alias was found",
                "available: fixture_works, fixture_picky"});
  c.options = {{"depth", "1"}};
  c.plugin_options = {{"fixture_works", {{"depth", "2"}}, "test.yaml:4:12"}};
  expect_error([&] { select_backend(two_plugins(), c); }, MOE_STATUS_CONFIG_ERROR,
               {"options.fixture_works.depth is given twice for plugin 'fixture_works'"});
}

TEST(Selection, NamedBackendThatDoesNotSupportGivesItsReasonAndWhoDoes) {
  expect_error(
      [] { select_backend(two_plugins(), config_for("fixture_picky", {}, MOE_FORMAT_FP8_BLOCK)); },
      MOE_STATUS_UNSUPPORTED,
      {"backend 'fixture_picky' does not support", "only bf16 weights", "(format)",
       "The config names no fallback.", "Backends that support it: fixture_works"});
}

TEST(Selection, FallbackIsUsedWhenTheNamedBackendDoesNotSupport) {
  const Selection s = select_backend(
      two_plugins(), config_for("fixture_picky", {"fixture_works"}, MOE_FORMAT_FP8_BLOCK));
  EXPECT_EQ(s.plugin->name(), "fixture_works");
  EXPECT_THAT(s.rule, testing::HasSubstr("fallback: backend 'fixture_picky' does not support"));
  EXPECT_THAT(s.rule, testing::HasSubstr("only bf16 weights"));
}

TEST(Selection, AutoWithNoSupportingPluginListsEveryReason) {
  const Registry r = registry_of({fixture_dir("picky")});
  expect_error(
      [&] { select_backend(r, config_for("auto", {}, MOE_FORMAT_MXFP4)); }, MOE_STATUS_UNSUPPORTED,
      {"no plugin supports E=4 k=2 H=64 I=32 mxfp4", "fixture_picky (format): only bf16 weights"});
}

TEST(Selection, ExplainListsEveryCandidateWithItsAnswer) {
  const Selection s = select_backend(two_plugins(), config_for("auto", {}, MOE_FORMAT_FP8_BLOCK));
  const std::string text = s.explain();
  EXPECT_THAT(text, testing::HasSubstr("selected: fixture_works"));
  EXPECT_THAT(text, testing::HasSubstr("fixture_works"));
  EXPECT_THAT(text, testing::HasSubstr("fixture_picky"));
  EXPECT_THAT(text, testing::HasSubstr("no: (format): only bf16 weights"));
  ASSERT_EQ(s.considered.size(), 2u);
}

// ---- decode rules (ABI 1.3) -------------------------------------------------------------------
// fixture_decode: priority 40, and 70 for max_tokens <= 8 (cutlass_mega's declaration);
// fixture_steady: 50, no rule (trtllm_style's). Both support every problem here.

Config auto_with_max_tokens(int64_t max_tokens) {
  Config c = config_for("auto", {}, MOE_FORMAT_BF16);
  c.problem.raw().max_tokens = max_tokens;
  c.problem.finalize();
  return c;
}

const Candidate& candidate(const Selection& s, const std::string& name) {
  for (const auto& c : s.considered)
    if (c.name == name) return c;
  throw std::runtime_error("no candidate " + name);
}

Registry decode_and_steady() {
  return registry_of({fixture_dir("steady"), fixture_dir("decode")});
}

TEST(DecodeRule, AutoRanksByTheDecodePriorityUpToItsMaxTokens) {
  const Registry r = decode_and_steady();
  for (int64_t max_tokens : {1, 4, 8}) {
    SCOPED_TRACE(max_tokens);
    const Selection s = select_backend(r, auto_with_max_tokens(max_tokens), Ask::kEvery);
    EXPECT_EQ(s.plugin->name(), "fixture_decode");
    EXPECT_THAT(s.rule, testing::StartsWith(fmt::format(
                            "auto: highest priority (70, fixture_decode's decode priority for "
                            "max_tokens <= 8, here {}) among the plugins that support E=4",
                            max_tokens)));
    const Candidate& c = candidate(s, "fixture_decode");
    EXPECT_EQ(c.priority, 70);
    EXPECT_TRUE(c.decode_applies);
    EXPECT_EQ(candidate(s, "fixture_steady").priority, 50);
  }
}

TEST(DecodeRule, AboveItsMaxTokensThePluginRanksByItsPriority) {
  const Registry r = decode_and_steady();
  for (int64_t max_tokens : {9, 64, 16384}) {
    SCOPED_TRACE(max_tokens);
    const Selection s = select_backend(r, auto_with_max_tokens(max_tokens), Ask::kEvery);
    EXPECT_EQ(s.plugin->name(), "fixture_steady");
    EXPECT_THAT(s.rule, testing::StartsWith("auto: highest priority (50) among"));
    const Candidate& c = candidate(s, "fixture_decode");
    EXPECT_EQ(c.priority, 40);
    EXPECT_FALSE(c.decode_applies);
    EXPECT_EQ(c.decode.priority, 70);
    EXPECT_EQ(c.decode.max_tokens, 8);
  }
}

TEST(DecodeRule, TheRuleSaysWhyAWinnersDecodePriorityDidNotCount) {
  const Registry r = registry_of({fixture_dir("works"), fixture_dir("decode")});
  const Selection s = select_backend(r, auto_with_max_tokens(64));
  EXPECT_EQ(s.plugin->name(), "fixture_decode");
  EXPECT_THAT(s.rule, testing::StartsWith(
                          "auto: highest priority (40; fixture_decode's decode priority 70 is for "
                          "max_tokens <= 8, not 64) among"));
}

TEST(DecodeRule, ATieGoesToTheFirstFoundWhicheverRuleGaveThePriority) {
  // fixture_decode_ties: priority 0, and 50 for max_tokens <= 8: level with fixture_steady there.
  const Registry ties_first = registry_of({fixture_dir("decode_ties"), fixture_dir("steady")});
  const Registry steady_first = registry_of({fixture_dir("steady"), fixture_dir("decode_ties")});
  EXPECT_EQ(select_backend(ties_first, auto_with_max_tokens(8)).plugin->name(),
            "fixture_decode_ties");
  EXPECT_EQ(select_backend(steady_first, auto_with_max_tokens(8)).plugin->name(), "fixture_steady");
  EXPECT_EQ(select_backend(ties_first, auto_with_max_tokens(9)).plugin->name(), "fixture_steady");
}

TEST(DecodeRule, OnlyThePluginsAutoNeedsAreAskedInTheOrderTheRuleGives) {
  const Selection s = select_backend(decode_and_steady(), auto_with_max_tokens(8));
  EXPECT_EQ(s.plugin->name(), "fixture_decode");
  const Candidate& steady = candidate(s, "fixture_steady");
  EXPECT_FALSE(steady.asked);
  EXPECT_EQ(steady.message, "not asked: 'fixture_decode' was chosen first");
  EXPECT_EQ(steady.priority, 50);
}

TEST(DecodeRule, AnAbi12PluginHasNoRuleAndRanksByItsPriority) {
  // fixture_abi_v1_2 (frozen 1.2 header): priority 45, between fixture_decode's 40 and 70.
  const Registry r = registry_of({fixture_dir("abi_v1_2"), fixture_dir("decode")});
  const auto old = r.find("fixture_abi_v1_2");
  ASSERT_NE(old, nullptr) << r.names();
  EXPECT_EQ(old->info().abi_minor, 2u);
  EXPECT_FALSE(old->info().decode.declared());
  EXPECT_EQ(old->info().priority_for(1, MOE_FORMAT_BF16), 45);
  EXPECT_EQ(select_backend(r, auto_with_max_tokens(8)).plugin->name(), "fixture_decode");
  const Selection above = select_backend(r, auto_with_max_tokens(9), Ask::kEvery);
  EXPECT_EQ(above.plugin->name(), "fixture_abi_v1_2");
  EXPECT_THAT(above.rule, testing::StartsWith("auto: highest priority (45) among"));
  EXPECT_FALSE(candidate(above, "fixture_abi_v1_2").decode.declared());
}

TEST(DecodeRule, ExplainShowsEachRuleAndWhetherItApplied) {
  const Registry r = decode_and_steady();
  const std::string at8 = select_backend(r, auto_with_max_tokens(8), Ask::kEvery).explain();
  EXPECT_THAT(at8, testing::HasSubstr("selected: fixture_decode\n  because: auto: highest priority "
                                      "(70, fixture_decode's decode priority for max_tokens <= 8, "
                                      "here 8) among"));
  EXPECT_THAT(at8, testing::HasSubstr("  fixture_steady       priority   50  supports\n"));
  EXPECT_THAT(at8, testing::HasSubstr("  fixture_decode       priority   70  supports  [decode "
                                      "priority for max_tokens <= 8]\n"));
  const std::string at9 = select_backend(r, auto_with_max_tokens(9), Ask::kEvery).explain();
  EXPECT_THAT(at9, testing::HasSubstr("  fixture_decode       priority   40  supports  [decode "
                                      "priority 70 only for max_tokens <= 8]\n"));
}

TEST(DecodeRule, PriorityTextNamesTheRuleWhereThereIsOne) {
  const Registry r = decode_and_steady();
  EXPECT_EQ(priority_text(r.find("fixture_decode")->info()),
            "priority 40, decode priority 70 for max_tokens <= 8");
  EXPECT_EQ(priority_text(r.find("fixture_steady")->info()), "priority 50");
}

// ---- decode limits by format (ABI 1.5) ----------------------------------------------------------
// fixture_decode_by_format: fixture_decode's rule, but up to 32 tokens with mxfp4 weights and none
// with fp8_block ones.

Config auto_in(moe_format format, int64_t max_tokens) {
  Config c = config_for("auto", {}, format);
  c.problem.raw().max_tokens = max_tokens;
  c.problem.finalize();
  return c;
}

Registry by_format_and_steady() {
  return registry_of({fixture_dir("steady"), fixture_dir("decode_by_format")});
}

TEST(DecodeByFormat, AutoComparesMaxTokensWithTheProblemsFormatsLimit) {
  const Registry r = by_format_and_steady();
  auto winner = [&](moe_format f, int64_t t) {
    return select_backend(r, auto_in(f, t)).plugin->name();
  };
  EXPECT_EQ(winner(MOE_FORMAT_BF16, 8), "fixture_decode_by_format");
  EXPECT_EQ(winner(MOE_FORMAT_BF16, 9), "fixture_steady");
  EXPECT_EQ(winner(MOE_FORMAT_MXFP4, 9), "fixture_decode_by_format");
  EXPECT_EQ(winner(MOE_FORMAT_MXFP4, 32), "fixture_decode_by_format");
  EXPECT_EQ(winner(MOE_FORMAT_MXFP4, 33), "fixture_steady");
  EXPECT_EQ(winner(MOE_FORMAT_NVFP4, 16), "fixture_steady");  // decode_max_tokens holds there
  EXPECT_EQ(winner(MOE_FORMAT_FP8_BLOCK, 1), "fixture_steady");
}

TEST(DecodeByFormat, SelectNamesTheFormatWhoseLimitCounted) {
  const Registry r = by_format_and_steady();
  const Selection at16 = select_backend(r, auto_in(MOE_FORMAT_MXFP4, 16), Ask::kEvery);
  EXPECT_THAT(at16.rule,
              testing::StartsWith("auto: highest priority (70, fixture_decode_by_format's decode "
                                  "priority for mxfp4 at max_tokens <= 32, here 16) among"));
  const Candidate& c = candidate(at16, "fixture_decode_by_format");
  EXPECT_TRUE(c.decode_applies);
  EXPECT_EQ(c.priority, 70);
  EXPECT_THAT(at16.explain(),
              testing::HasSubstr("[decode priority for mxfp4 at max_tokens <= 32]"));

  const Selection at64 = select_backend(r, auto_in(MOE_FORMAT_MXFP4, 64), Ask::kEvery);
  EXPECT_THAT(at64.explain(), testing::HasSubstr("[decode priority 70 only for mxfp4 at "
                                                 "max_tokens <= 32]"));
  const Selection fp8 = select_backend(r, auto_in(MOE_FORMAT_FP8_BLOCK, 1), Ask::kEvery);
  EXPECT_FALSE(candidate(fp8, "fixture_decode_by_format").decode_applies);
  EXPECT_EQ(candidate(fp8, "fixture_decode_by_format").priority, 40);
  EXPECT_THAT(fp8.explain(), testing::HasSubstr("[decode priority 70 not for fp8_block weights]"));
  // bf16 keeps decode_max_tokens' words.
  const Selection bf16 = select_backend(r, auto_in(MOE_FORMAT_BF16, 4), Ask::kEvery);
  EXPECT_THAT(bf16.rule, testing::HasSubstr("decode priority for max_tokens <= 8, here 4"));
}

TEST(DecodeByFormat, AWinnerAboveItsFormatsLimitIsExplained) {
  // Without fixture_steady the rule-less fixture_works (priority 1) is the only other choice.
  const Registry r = registry_of({fixture_dir("works"), fixture_dir("decode_by_format")});
  const Selection s = select_backend(r, auto_in(MOE_FORMAT_FP8_BLOCK, 4));
  EXPECT_EQ(s.plugin->name(), "fixture_decode_by_format");
  EXPECT_THAT(s.rule, testing::StartsWith("auto: highest priority (40; fixture_decode_by_format's "
                                          "decode priority 70 is not for fp8_block weights)"));
  const Selection m = select_backend(r, auto_in(MOE_FORMAT_MXFP4, 40));
  EXPECT_THAT(m.rule, testing::HasSubstr("(40; fixture_decode_by_format's decode priority 70 is "
                                         "for mxfp4 at max_tokens <= 32, not 40)"));
}

TEST(DecodeByFormat, PriorityTextListsTheFormatsWithLimitsOfTheirOwn) {
  const Registry r = by_format_and_steady();
  EXPECT_EQ(priority_text(r.find("fixture_decode_by_format")->info()),
            "priority 40, decode priority 70 for max_tokens <= 8 (fp8_block: none; mxfp4: <= 32)");
}

TEST(DecodeRule, ANamedBackendIsChosenWhateverTheRules) {
  Config c = auto_with_max_tokens(8);
  c.backend = "fixture_steady";
  const Selection s = select_backend(decode_and_steady(), c);
  EXPECT_EQ(s.plugin->name(), "fixture_steady");
  EXPECT_THAT(s.rule, testing::HasSubstr("named in test.yaml"));
}

}  // namespace
}  // namespace moe::test
