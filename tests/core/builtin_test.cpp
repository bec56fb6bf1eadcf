// Built-in plugins are pinned (docs/design.md §2 rule 9): the reference and gpu_oracle load only
// from the core's own plugin directory (here build/plugins, beside the test binaries' bin/). A
// library elsewhere that claims one of their names or aliases is refused naming both files,
// whatever the search order, and conformance keeps judging against the real reference. The
// impostor fixture (`duplicate`, named "reference") swaps gate and up, so an oracle swap would
// show.
#include "../support/scan_env.hpp"

namespace moe::test {
namespace {

std::string real_reference() {
  return std::filesystem::canonical(build_plugin_dir() + "/libmoe_reference.so").string();
}
std::string impostor() {
  return fixture_dir("duplicate") + "/libmoe_fixture_duplicate.so";
}

TEST(Builtin, TheOracleIsTheReferenceOfTheCoresPluginDirectory) {
  const Registry r = registry_of({build_plugin_dir()});
  EXPECT_EQ(std::filesystem::canonical(r.oracle()->path()).string(), real_reference());
}

TEST(Builtin, AnImpostorSearchedFirstIsRefusedNamingBothFiles) {
  const Registry r = registry_of({fixture_dir("duplicate"), build_plugin_dir()});
  EXPECT_EQ(std::filesystem::canonical(r.oracle()->path()).string(), real_reference());
  EXPECT_EQ(std::filesystem::canonical(r.find("reference")->path()).string(), real_reference());
  const SkippedLibrary* s = skipped_with(r, "claims the built-in name");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->path, impostor());
  EXPECT_THAT(s->reason,
              testing::HasSubstr(impostor() + " claims the built-in name 'reference' of " +
                                 real_reference()));
}

TEST(Builtin, AnImpostorSearchedLastIsRefusedTheSameWay) {
  const Registry r = registry_of({build_plugin_dir(), fixture_dir("duplicate")});
  EXPECT_EQ(std::filesystem::canonical(r.oracle()->path()).string(), real_reference());
  EXPECT_NE(
      skipped_with(r, impostor() + " claims the built-in name 'reference' of " + real_reference()),
      nullptr);
}

TEST(Builtin, ConformanceJudgesAgainstTheRealReferenceNotTheImpostor) {
  const Registry r =
      registry_of({fixture_dir("duplicate"), fixture_dir("works"), build_plugin_dir()});
  const Conformance suite(r.oracle());
  const ProblemFile pf = load_problem_file(source_path("configs/problems/bf16_softmax_silu.yaml"));
  ConformanceOptions opt;
  opt.seed = 5;
  const auto cases = suite.run(r.find("fixture_works"), pf, opt);
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) EXPECT_EQ(c.status, CaseStatus::kPass) << c.detail;
}

TEST(Builtin, AnImpostorGivenAsAPluginFileIsAnError) {
  DiscoveryOptions o;
  o.files = {impostor()};
  o.use_env = o.use_default = false;
  expect_error([&] { Registry::discover(o); }, MOE_STATUS_INVALID_ARGUMENT,
               {impostor() + " claims the built-in name 'reference' of " + real_reference()});
}

TEST(Builtin, AnAliasThatIsABuiltinNameIsRefused) {
  const Registry r = registry_of({fixture_dir("claims_oracle_alias")});
  EXPECT_EQ(r.find("fixture_claims_oracle_alias"), nullptr);
  EXPECT_NE(skipped_with(r,
                         "libmoe_fixture_claims_oracle_alias.so claims the built-in name "
                         "'gpu_oracle'"),
            nullptr);
}

TEST(Builtin, TheOracleFailsClearlyWhenTheCoresDirectoryWasNotSearched) {
  const Registry r = registry_of({fixture_dir("duplicate"), fixture_dir("works")});
  EXPECT_EQ(r.find("reference"), nullptr);  // the impostor does not stand in
  expect_error(
      [&] { r.oracle(); }, MOE_STATUS_NOT_FOUND,
      {"the oracle plugin 'reference' is not loaded",
       "it loads only from the core's plugin directory", "do not hold " + real_reference()});
}

}  // namespace
}  // namespace moe::test
