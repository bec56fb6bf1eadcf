// Every call the core makes through a plugin's table is guarded on the core's side too: a raw
// plugin (no SDK) that lets an exception out of an entry, even `throw 42`, gives a moe::Error
// naming the plugin, the entry and what was thrown, never std::terminate; on the no-throw paths
// (a layer's destructor) it is logged and swallowed. The fixture is `throws_raw`
// (tests/fixtures/fixture_plugin.cpp): run always throws, supports throws for non-bf16 problems,
// and the option `throw_in` picks prepare, workspace_size or destroy_layer.
#include <cstring>
#include <string>

#include "../support/scan_env.hpp"
#include "moe/sdk/guard.hpp"

namespace moe::test {
namespace {

class PluginGuard : public testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_unique<Registry>(registry_of({fixture_dir("throws_raw")}));
    plugin_ = registry_->find("fixture_throws_raw");
    ASSERT_NE(plugin_, nullptr);
    weights_ = random_weights(problem_.c(), 3);
  }
  Layer prepare(const std::string& throw_in = "") const {
    Options options;
    if (!throw_in.empty()) options.emplace_back("throw_in", throw_in);
    return plugin_->prepare(problem_.c(), weights_.view(), options);
  }

  Problem problem_ = small_problem();
  std::unique_ptr<Registry> registry_;
  std::shared_ptr<Plugin> plugin_;
  LayerWeights weights_;
};

TEST_F(PluginGuard, ThrowFortyTwoOutOfRunIsAnInternalErrorNamingItAndTheProcessLives) {
  const Layer layer = prepare();
  const Batch batch = random_batch(problem_.c(), 3, 4, Scenario::kRandom);
  const Routing routing = route_batch(*build_reference(), problem_.c(), batch);
  for (int i = 0; i < 2; ++i) {
    expect_error([&] { run_layer(layer, problem_.c(), batch.hidden, routing); },
                 MOE_STATUS_INTERNAL,
                 {"plugin 'fixture_throws_raw' run threw an exception of type 'int' (not a "
                  "std::exception)"});
  }
  expect_plugin_works(build_reference());  // and the other plugins carry on
}

TEST_F(PluginGuard, AStdExceptionOutOfSupportsNamesItsTypeAndMessage) {
  EXPECT_TRUE(plugin_->supports(problem_.c()).supported);  // bf16: answered normally
  expect_error([&] { plugin_->supports(small_problem(MOE_FORMAT_FP8_BLOCK).c()); },
               MOE_STATUS_INTERNAL,
               {"plugin 'fixture_throws_raw' supports threw std::invalid_argument: fixture: "
                "deliberate std::invalid_argument out of supports"});
}

TEST_F(PluginGuard, AnExceptionOutOfPrepareIsAnError) {
  expect_error([&] { prepare("prepare"); }, MOE_STATUS_INTERNAL,
               {"plugin 'fixture_throws_raw' prepare threw std::runtime_error: fixture: "
                "deliberate std::runtime_error out of prepare"});
}

TEST_F(PluginGuard, AnExceptionOfAnyTypeOutOfWorkspaceSizeIsAnError) {
  const Layer layer = prepare("workspace_size");
  expect_error([&] { layer.workspace_size(4); }, MOE_STATUS_INTERNAL,
               {"plugin 'fixture_throws_raw' workspace_size threw an exception of type "
                "'std::__cxx11::basic_string"});
}

TEST_F(PluginGuard, AnExceptionOutOfDestroyLayerIsLoggedAndSwallowed) {
  testing::internal::CaptureStderr();
  { const Layer layer = prepare("destroy_layer"); }
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, testing::HasSubstr("plugin 'fixture_throws_raw' destroy_layer threw "
                                      "std::logic_error: fixture: deliberate std::logic_error out "
                                      "of destroy_layer; ignored"));
}

TEST_F(PluginGuard, ConformanceRecordsTheThrowingRunAsAnErrorCase) {
  const Conformance suite(build_reference());
  const ProblemFile pf = load_problem_file(source_path("configs/problems/bf16_softmax_silu.yaml"));
  int errors = 0;
  for (const auto& c : suite.run(plugin_, pf, {})) {
    if (c.status != CaseStatus::kError) continue;
    ++errors;
    EXPECT_THAT(c.detail, testing::HasSubstr("plugin 'fixture_throws_raw' run threw an exception "
                                             "of type 'int'"));
  }
  EXPECT_GT(errors, 0);
}

// The last-error buffer keeps 2047 bytes of a longer message, cut before a character, never
// inside a UTF-8 sequence (a strict decoder refuses a lone lead byte).
TEST(LastError, ALongMessageIsCutAtACharactersStart) {
  for (const std::string tail : {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"}) {
    const std::string message = std::string(2046, 'a') + tail + "b";
    sdk::set_last_error(message.c_str());
    EXPECT_EQ(std::string(sdk::last_error()), std::string(2046, 'a')) << tail.size();
  }
  const std::string ascii(3000, 'x');
  sdk::set_last_error(ascii.c_str());
  EXPECT_EQ(std::strlen(sdk::last_error()), 2047u);
  sdk::set_last_error("");
}

// A message quoting bytes that are not UTF-8 (a Latin-1 config key, a stray continuation byte, a
// surrogate, an overlong form, a cut sequence) is kept as valid UTF-8: each such byte becomes '?',
// valid characters pass unchanged.
TEST(LastError, BytesThatAreNotUtf8BecomeQuestionMarks) {
  const std::pair<std::string, std::string> cases[] = {
      {"unknown key 'caf\xe9'", "unknown key 'caf?'"},
      {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
      {"a\x80"
       "b",
       "a?b"},
      {"\xed\xa0\x80", "???"},       // a UTF-16 surrogate
      {"\xc0\xaf", "??"},            // an overlong '/'
      {"\xf4\x90\x80\x80", "????"},  // past U+10FFFF
      {"x\xe2\x82", "x??"},          // cut at the end
  };
  for (const auto& [given, kept] : cases) {
    sdk::set_last_error(given.c_str());
    EXPECT_EQ(std::string(sdk::last_error()), kept);
  }
  sdk::set_last_error("");
}

}  // namespace
}  // namespace moe::test
