// The scan cache ($XDG_CACHE_HOME/moe-registry/plugin_scan.json): a library scanned once is not
// scanned again until it changes (canonical path, size, mtime). To see whether the scanner ran,
// the second discovery names a fake scanner that only fails: a cache hit never runs it. The fake
// scanners also prove the messages for a scanner that gives no result or an unreadable one.
#include <sys/stat.h>

#include <fstream>

#include "../support/scan_env.hpp"

namespace moe::test {
namespace {

namespace fs = std::filesystem;

class ScanCache : public testing::Test {
 protected:
  void SetUp() override {
    root_ = scratch_dir(testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(root_ / "plugins");
    library_ = copy_fixture("works", root_ / "plugins");
  }
  fs::path cache_file() const { return root_ / "cache" / "moe-registry" / "plugin_scan.json"; }
  // An executable script standing in for moe-plugin-scanner.
  std::string fake_scanner(const std::string& body) const {
    const fs::path p = root_ / "fake-scanner";
    std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  }
  Registry discover(const std::string& scanner = "") const {
    DiscoveryOptions o = scanned({(root_ / "plugins").string()});
    o.scanner = scanner;
    return Registry::discover(o);
  }

  fs::path root_, library_;
  ScopedEnv cache_on_{"MOE_PLUGIN_SCAN_CACHE", std::nullopt};
  ScopedEnv named_{"MOE_PLUGIN_SCANNER", std::nullopt};
  ScopedEnv xdg_{"XDG_CACHE_HOME",
                 (fs::path(testing::TempDir()) / "moe_scan_ScanCache_unused").string()};
};

TEST_F(ScanCache, TheSecondDiscoveryUsesTheCacheAndAChangedFileIsScannedAgain) {
  const ScopedEnv xdg("XDG_CACHE_HOME", (root_ / "cache").string());
  ASSERT_NE(discover().find("fixture_works"), nullptr);  // scanned, then cached
  std::ifstream in(cache_file());
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(), testing::HasSubstr(fs::canonical(library_).string()));

  const std::string failing = fake_scanner("echo 'fake scanner says no' >&2\nexit 3");
  const Registry cached = discover(failing);
  EXPECT_NE(cached.find("fixture_works"), nullptr) << "the cache was not used";
  EXPECT_TRUE(cached.skipped().empty());

  fs::last_write_time(library_, fs::last_write_time(library_) + std::chrono::hours(1));
  const Registry changed = discover(failing);
  EXPECT_EQ(changed.find("fixture_works"), nullptr) << "a changed library was not scanned again";
  ASSERT_EQ(changed.skipped().size(), 1u);
  EXPECT_THAT(changed.skipped()[0].reason,
              testing::HasSubstr(library_.string() + ": the plugin scanner " + failing +
                                 " exited with status 3 without a result: fake scanner says no"));
}

TEST_F(ScanCache, ZeroTurnsItOff) {
  const ScopedEnv xdg("XDG_CACHE_HOME", (root_ / "cache").string());
  const ScopedEnv off("MOE_PLUGIN_SCAN_CACHE", "0");
  ASSERT_NE(discover().find("fixture_works"), nullptr);
  EXPECT_FALSE(fs::exists(cache_file()));
  EXPECT_EQ(discover(fake_scanner("exit 3")).find("fixture_works"), nullptr);
}

TEST_F(ScanCache, ACacheThatCannotBeWrittenIsNotAnErrorNorAWarning) {
  std::ofstream(root_ / "a_file") << "not a directory\n";
  const ScopedEnv xdg("XDG_CACHE_HOME", (root_ / "a_file").string());
  testing::internal::CaptureStderr();
  const Registry r = discover();
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(r.find("fixture_works"), nullptr);
  EXPECT_THAT(log, testing::Not(testing::HasSubstr("cache")));
}

TEST_F(ScanCache, AnUnreadableCacheFileIsIgnored) {
  const ScopedEnv xdg("XDG_CACHE_HOME", (root_ / "cache").string());
  fs::create_directories(cache_file().parent_path());
  std::ofstream(cache_file()) << "{ not json";
  EXPECT_NE(discover().find("fixture_works"), nullptr);
  EXPECT_NE(discover(fake_scanner("exit 3")).find("fixture_works"), nullptr);  // rewritten, used
}

TEST_F(ScanCache, AScannerThatPrintsNoJsonIsReportedAsUnreadable) {
  const ScopedEnv off("MOE_PLUGIN_SCAN_CACHE", "0");
  const std::string garbage = fake_scanner("echo 'this is not JSON'");
  const Registry r = discover(garbage);
  ASSERT_EQ(r.skipped().size(), 1u);
  EXPECT_THAT(r.skipped()[0].reason,
              testing::HasSubstr(library_.string() + ": the plugin scanner " + garbage +
                                 " gave an unreadable result"));
}

TEST_F(ScanCache, AScannerOfAnotherProtocolIsRefused) {
  const ScopedEnv off("MOE_PLUGIN_SCAN_CACHE", "0");
  const std::string other = fake_scanner(R"(echo '{"protocol": 99, "ok": true}')");
  const Registry r = discover(other);
  ASSERT_EQ(r.skipped().size(), 1u);
  EXPECT_THAT(r.skipped()[0].reason,
              testing::HasSubstr("the plugin scanner " + other +
                                 " answers in protocol 99, this core reads 1"));
}

}  // namespace
}  // namespace moe::test
