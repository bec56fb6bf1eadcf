// With the plugin scanner, discovery loads no plugin into this process: each is kept as what the
// scan learned, and its library is loaded only when its table is first needed (docs/design.md §2
// rule 9). The witnesses work in the scanner and misbehave anywhere else:
// fixture_aborts_outside_scanner aborts this test binary if it is ever loaded here.
#include "../support/scan_env.hpp"

namespace moe::test {
namespace {

namespace fs = std::filesystem;

Config auto_config(moe_format format = MOE_FORMAT_BF16) {
  Config c;
  c.source = "test.yaml";
  c.backend = "auto";
  c.problem = small_problem(format);
  return c;
}

const Candidate& candidate(const Selection& s, const std::string& name) {
  for (const auto& c : s.considered)
    if (c.name == name) return c;
  throw std::runtime_error("no candidate " + name);
}

class LazyLoading : public testing::Test {
 protected:
  void SetUp() override {
    root_ = scratch_dir(testing::UnitTest::GetInstance()->current_test_info()->name());
    dir_ = root_ / "plugins";
    fs::create_directories(dir_);
    works_ = copy_fixture("works", dir_);
    witness_ = copy_fixture("aborts_outside_scanner", dir_);
    cache_.emplace("XDG_CACHE_HOME", (root_ / "cache").string());
  }
  Registry discover() const { return Registry::discover(scanned({dir_.string()})); }

  fs::path root_, dir_, works_, witness_;
  std::optional<ScopedEnv> cache_;
  ScopedEnv cache_on_{"MOE_PLUGIN_SCAN_CACHE", std::nullopt};
  ScopedEnv named_{"MOE_PLUGIN_SCANNER", std::nullopt};
};

TEST_F(LazyLoading, DiscoveryKeepsWhatTheScanLearnedAndLoadsNothing) {
  const Registry r = discover();
  ASSERT_EQ(r.plugins().size(), 2u) << r.names();
  for (const auto& p : r.plugins()) EXPECT_FALSE(p->loaded()) << p->name();
  const auto witness = r.find("fixture_aborts_outside_scanner");
  ASSERT_NE(witness, nullptr);
  EXPECT_EQ(witness->path(), witness_);
  const PluginInfo& i = witness->info();
  EXPECT_EQ(i.version, "test");
  EXPECT_EQ(i.description, "test fixture");
  EXPECT_EQ(i.priority, -1);
  EXPECT_EQ(i.abi_major, uint32_t(MOE_ABI_VERSION_MAJOR));
  EXPECT_EQ(i.abi_minor, uint32_t(MOE_ABI_VERSION_MINOR));
  EXPECT_EQ(i.memory, MOE_MEMORY_HOST);
  EXPECT_EQ(i.format_mask, 0x3Fu);
  EXPECT_EQ(i.activation_mask, 0x1Fu);
  EXPECT_FALSE(i.build.has_value());  // a raw table without moe_build_info
  EXPECT_THAT(r.names(), testing::HasSubstr("fixture_aborts_outside_scanner"));
  EXPECT_FALSE(witness->loaded());
}

// The second discovery runs no scanner: everything comes from the cache, which must hold it all.
TEST_F(LazyLoading, ACachedScanGivesTheSameInfoAndLoadsNothing) {
  const Registry first = discover();
  const Registry second = discover();
  ASSERT_EQ(second.plugins().size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const PluginInfo &a = first.plugins()[k]->info(), &b = second.plugins()[k]->info();
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.abi_major, b.abi_major);
    EXPECT_EQ(a.abi_minor, b.abi_minor);
    EXPECT_EQ(a.priority, b.priority);
    EXPECT_EQ(a.format_mask, b.format_mask);
    EXPECT_FALSE(second.plugins()[k]->loaded());
  }
  EXPECT_THAT(read_text(root_ / "cache" / "moe-registry" / "plugin_scan.json"),
              testing::HasSubstr("\"abi_major\""));
}

// A decode rule (ABI 1.3) travels through the scanner and the cache like the priority, and ranks
// the plugins auto asks without loading the others.
TEST_F(LazyLoading, ADecodeRuleComesFromTheScanAndItsCache) {
  copy_fixture("decode", dir_);
  for (int pass = 0; pass < 2; ++pass) {  // the second from the cache
    SCOPED_TRACE(pass);
    const Registry r = discover();
    const auto decode = r.find("fixture_decode");
    ASSERT_NE(decode, nullptr) << r.names();
    EXPECT_EQ(decode->info().decode.priority, 70);
    EXPECT_EQ(decode->info().decode.max_tokens, 8);
    EXPECT_FALSE(decode->loaded());
    Config c = auto_config();
    c.problem.raw().max_tokens = 8;
    c.problem.finalize();
    EXPECT_EQ(select_backend(r, c).plugin->name(), "fixture_decode");
    EXPECT_FALSE(r.find("fixture_works")->loaded());
  }
  EXPECT_THAT(read_text(root_ / "cache" / "moe-registry" / "plugin_scan.json"),
              testing::HasSubstr("\"decode_max_tokens\": 8"));
}

TEST_F(LazyLoading, TheFirstUseOfATableLoadsThatPluginOnly) {
  const Registry r = discover();
  const auto works = r.find("fixture_works");
  EXPECT_TRUE(works->supports(small_problem().c()).supported);
  EXPECT_TRUE(works->loaded());
  EXPECT_FALSE(r.find("fixture_aborts_outside_scanner")->loaded());
  expect_plugin_works(works);
}

// fixture_works (priority 1) supports the problem before the witness (priority -1) comes up.
TEST_F(LazyLoading, AutoSelectionLoadsOnlyThePluginsItAsks) {
  const Registry r = discover();
  const Selection s = select_backend(r, auto_config());
  EXPECT_EQ(s.plugin->name(), "fixture_works");
  EXPECT_TRUE(s.plugin->loaded());
  EXPECT_FALSE(r.find("fixture_aborts_outside_scanner")->loaded());
  ASSERT_EQ(s.considered.size(), 2u);
  const Candidate& witness = candidate(s, "fixture_aborts_outside_scanner");
  EXPECT_FALSE(witness.asked);
  EXPECT_EQ(witness.message, "not asked: 'fixture_works' was chosen first");
  EXPECT_THAT(s.explain(), testing::HasSubstr("not asked: 'fixture_works' was chosen first"));
}

TEST_F(LazyLoading, ANamedBackendLoadsOnlyThatPlugin) {
  const Registry r = discover();
  Config c = auto_config();
  c.backend = "fixture_works";
  EXPECT_EQ(select_backend(r, c).plugin->name(), "fixture_works");
  EXPECT_FALSE(r.find("fixture_aborts_outside_scanner")->loaded());
}

// fixture_picky declares bf16 weights only: an fp8 problem is refused from the scan's masks, even
// when every plugin is asked (`moe select`; the witness, which would be asked too, is removed).
TEST_F(LazyLoading, DeclaredCapabilitiesRefuseAProblemWithoutLoading) {
  fs::remove(witness_);
  copy_fixture("picky", dir_);
  const Registry r = discover();
  const Selection s = select_backend(r, auto_config(MOE_FORMAT_FP8_BLOCK), Ask::kEvery);
  EXPECT_EQ(s.plugin->name(), "fixture_works");
  EXPECT_FALSE(r.find("fixture_picky")->loaded());
  const Candidate& picky = candidate(s, "fixture_picky");
  EXPECT_TRUE(picky.asked);
  EXPECT_EQ(picky.reason, MOE_REASON_FORMAT);
  EXPECT_EQ(picky.message, "only bf16 weights in its format_mask, not fp8_block");
}

// Highest priority, so auto asks it first; it cannot be loaded here, so auto goes on to the next.
TEST_F(LazyLoading, AutoSelectionPassesOverAPluginThatCannotBeLoadedWithAWarningNamingIt) {
  fs::remove(witness_);
  const fs::path bad = copy_fixture("init_fails_outside_scanner", dir_);
  const Registry r = discover();
  testing::internal::CaptureStderr();
  const Selection s = select_backend(r, auto_config());
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.plugin->name(), "fixture_works");
  const std::string why =
      "plugin 'fixture_init_fails_outside_scanner' cannot be loaded in this "
      "process: " +
      bad.string() + ": init failed: fixture: refused outside the scanner";
  EXPECT_THAT(log, testing::HasSubstr(why + "; selection goes on without it"));
  EXPECT_THAT(candidate(s, "fixture_init_fails_outside_scanner").message, testing::StartsWith(why));
  // The failure is kept: a later use says the same without loading it again.
  expect_error([&] { r.find("fixture_init_fails_outside_scanner")->load(); }, MOE_STATUS_INTERNAL,
               {why});
  expect_error([&] { r.find("fixture_init_fails_outside_scanner")->supports(small_problem().c()); },
               MOE_STATUS_INTERNAL, {why});
}

// The scan vouches for the file it read: one changed since is refused when it would be loaded.
TEST_F(LazyLoading, ALibraryChangedAfterItsScanIsNotLoaded) {
  const Registry r = discover();
  fs::last_write_time(works_, fs::last_write_time(works_) + std::chrono::hours(1));
  const auto works = r.find("fixture_works");
  expect_error([&] { works->supports(small_problem().c()); }, MOE_STATUS_INVALID_ARGUMENT,
               {"plugin 'fixture_works' cannot be loaded in this process: " + works_.string() +
                ": changed after the plugin scanner read it; not loaded (run again)"});
  EXPECT_FALSE(works->loaded());
}

// Claims (built-in names, duplicates) were checked on the names the scanner saw: a library that
// answers to other names here, the oracle's above all, is refused.
TEST_F(LazyLoading, ALibraryThatAnswersToAnotherNameInThisProcessIsRefused) {
  const fs::path two_faced = copy_fixture("renamed_outside_scanner", dir_);
  const Registry r = discover();
  EXPECT_EQ(r.find("reference"), nullptr);
  const auto p = r.find("fixture_renamed_outside_scanner");
  ASSERT_NE(p, nullptr);
  const std::string abi = fmt::format("ABI {}.{}", MOE_ABI_VERSION_MAJOR, MOE_ABI_VERSION_MINOR);
  expect_error([&] { p->load(); }, MOE_STATUS_INVALID_ARGUMENT,
               {two_faced.string() +
                ": answered the plugin scanner as "
                "'fixture_renamed_outside_scanner' (aliases: none), host "
                "memory, " +
                abi + " but this process as 'reference' (aliases: none), host memory, " + abi +
                "; not loaded"});
  EXPECT_FALSE(p->loaded());
}

TEST_F(LazyLoading, TheOracleIsLoadedWhenAskedFor) {
  const Registry r = registry_of({build_plugin_dir()});
  ASSERT_NE(r.find("reference"), nullptr);
  EXPECT_FALSE(r.find("reference")->loaded());
  EXPECT_TRUE(r.oracle()->loaded());
}

// Without a scanner, loading is as it always was: every library at discovery.
TEST_F(LazyLoading, WithoutTheScannerEveryPluginIsLoadedAtDiscovery) {
  fs::remove(witness_);
  DiscoveryOptions o = scanned({dir_.string()});
  o.scan = DiscoveryOptions::Scan::kOff;
  const Registry r = Registry::discover(o);
  ASSERT_EQ(r.plugins().size(), 1u);
  EXPECT_TRUE(r.plugins()[0]->loaded());
  EXPECT_EQ(r.plugins()[0]->info().abi_major, uint32_t(MOE_ABI_VERSION_MAJOR));
}

}  // namespace
}  // namespace moe::test
