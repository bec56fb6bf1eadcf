// Backend selection: named, fallback and auto, each explaining itself.
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
      MOE_STATUS_CONFIG_ERROR, {"unknown backend 'nope' in fallback"});
}

TEST(Selection, NamedBackendThatDoesNotSupportGivesItsReasonAndWhoDoes) {
  expect_error(
      [] { select_backend(two_plugins(), config_for("fixture_picky", {}, MOE_FORMAT_FP8_BLOCK)); },
      MOE_STATUS_UNSUPPORTED,
      {"backend 'fixture_picky' does not support", "only bf16 weights", "(format)",
       "Backends that support it: fixture_works"});
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

}  // namespace
}  // namespace moe::test
