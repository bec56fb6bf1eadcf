// Discovery runs each library first in the plugin scanner, a child process (docs/design.md §2
// rule 9): a library that crashes or hangs while it is loaded is skipped with a reason naming it
// and the signal or the time-out, and the good plugin beside it in the same directory still
// loads and runs. Without the scanner (Scan::kOff) loading is in-process, as before.
#include <chrono>

#include "../support/scan_env.hpp"

namespace moe::test {
namespace {

class Scanner : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir(testing::UnitTest::GetInstance()->current_test_info()->name());
    copy_fixture("works", dir_);
  }
  // A directory holding the good fixture and `bad`, discovered through the scanner.
  Registry discover_beside(const std::string& bad) {
    bad_ = copy_fixture(bad, dir_).string();
    return Registry::discover(scanned({dir_.string()}));
  }
  void expect_skipped(const Registry& r, const std::string& why) {
    const SkippedLibrary* s = skipped_with(r, why);
    ASSERT_NE(s, nullptr) << "no skipped library says '" << why << "'";
    EXPECT_EQ(s->path, bad_);
    EXPECT_THAT(s->reason, testing::StartsWith(bad_ + ":"));
  }

  ScopedEnv cache_{"XDG_CACHE_HOME", (std::filesystem::path(testing::TempDir()) / "moe_scan_cache_"
                                                                                  "scanner_test")
                                         .string()};
  ScopedEnv named_{"MOE_PLUGIN_SCANNER", std::nullopt};
  ScopedEnv timeout_{"MOE_PLUGIN_SCAN_TIMEOUT_S", std::nullopt};
  std::filesystem::path dir_;
  std::string bad_;
};

TEST_F(Scanner, ACrashInInitIsSkippedAsKilledBySigsegvAndItsNeighbourStillRuns) {
  const Registry r = discover_beside("crashes_in_init");
  expect_skipped(r, "killed by SIGSEGV in the plugin scanner");
  ASSERT_EQ(r.plugins().size(), 1u);
  expect_plugin_works(r.find("fixture_works"));
}

TEST_F(Scanner, ACrashInAStaticConstructorIsSkippedAsKilledBySigsegv) {
  const Registry r = discover_beside("crashes_in_constructor");
  expect_skipped(r, "killed by SIGSEGV in the plugin scanner");
  expect_plugin_works(r.find("fixture_works"));
}

TEST_F(Scanner, AHangInInitTimesOutAfterTheConfiguredSecondsAndItsNeighbourStillRuns) {
  const ScopedEnv timeout("MOE_PLUGIN_SCAN_TIMEOUT_S", "1");
  const auto start = std::chrono::steady_clock::now();
  const Registry r = discover_beside("hangs_in_init");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8));
  expect_skipped(r, "timed out after 1 s in the plugin scanner");
  expect_plugin_works(r.find("fixture_works"));
}

TEST_F(Scanner, AnExceptionOutOfInitIsSkippedNamingTheEntryAndTheException) {
  const Registry r = discover_beside("throws_in_init");
  expect_skipped(r,
                 "init threw std::runtime_error: fixture: deliberate std::runtime_error out "
                 "of init");
  expect_plugin_works(r.find("fixture_works"));
}

TEST_F(Scanner, AnExceptionOutOfGetInfoIsSkippedNamingItsType) {
  const Registry r = discover_beside("throws_in_get_info");
  expect_skipped(r, "get_info threw an exception of type 'int' (not a std::exception)");
  expect_plugin_works(r.find("fixture_works"));
}

TEST_F(Scanner, AChecksFailureIsReportedFromTheScannerAsBefore) {
  const Registry r = discover_beside("abi_major_99");
  expect_skipped(r, "plugin ABI 99.");
  EXPECT_NE(r.find("fixture_works"), nullptr);
}

TEST_F(Scanner, AnExplicitPluginFileThatCrashesIsAnErrorNamingIt) {
  DiscoveryOptions o = scanned({});
  const auto bad = copy_fixture("crashes_in_init", dir_);
  o.files = {bad.string()};
  expect_error([&] { Registry::discover(o); }, MOE_STATUS_INTERNAL,
               {bad.string() + ": killed by SIGSEGV in the plugin scanner"});
}

TEST_F(Scanner, TheScannerBesideTheExecutableIsFoundByDefault) {
  DiscoveryOptions o = scanned({dir_.string()});
  o.scan = DiscoveryOptions::Scan::kAuto;
  const Registry r = Registry::discover(o);
  EXPECT_NE(r.find("fixture_works"), nullptr);
  EXPECT_TRUE(r.skipped().empty());
}

TEST_F(Scanner, ANamedScannerThatIsNotAnExecutableIsAConfigError) {
  const ScopedEnv named("MOE_PLUGIN_SCANNER", "/no/such/moe-plugin-scanner");
  expect_error([&] { Registry::discover(scanned({dir_.string()})); }, MOE_STATUS_CONFIG_ERROR,
               {"MOE_PLUGIN_SCANNER='/no/such/moe-plugin-scanner' is not an executable file"});
}

TEST_F(Scanner, ABadTimeOutIsAConfigErrorNamingIt) {
  for (const char* bad : {"soon", "0", "-3", "1e999"}) {
    const ScopedEnv timeout("MOE_PLUGIN_SCAN_TIMEOUT_S", bad);
    expect_error([&] { Registry::discover(scanned({dir_.string()})); }, MOE_STATUS_CONFIG_ERROR,
                 {fmt::format("MOE_PLUGIN_SCAN_TIMEOUT_S='{}' is not a positive number", bad)});
  }
}

// Library users that ship no scanner keep in-process loading, with the same checks and guards.
TEST_F(Scanner, InProcessLoadingStillWorksAndStillCatchesAnExceptionOutOfInit) {
  bad_ = copy_fixture("throws_in_init", dir_).string();
  DiscoveryOptions o = scanned({dir_.string()});
  o.scan = DiscoveryOptions::Scan::kOff;
  const Registry r = Registry::discover(o);
  expect_skipped(r, "init threw std::runtime_error: fixture: deliberate");
  expect_plugin_works(r.find("fixture_works"));
}

}  // namespace
}  // namespace moe::test
