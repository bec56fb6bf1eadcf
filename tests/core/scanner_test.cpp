// Discovery runs each library first in the plugin scanner, a child process (docs/design.md §2
// rule 9): a library that crashes or hangs while it is loaded is skipped with a reason naming it
// and the signal or the time-out, and the good plugin beside it in the same directory still
// loads and runs. Without the scanner (Scan::kOff) loading is in-process, as before.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "../support/scan_env.hpp"
#include "loading/scan_json.hpp"

namespace moe::test {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class Scanner : public testing::Test {
 protected:
  void SetUp() override {
    root_ = scratch_dir(testing::UnitTest::GetInstance()->current_test_info()->name());
    dir_ = root_ / "plugins";
    fs::create_directories(dir_);
    copy_fixture("works", dir_);
    cache_.emplace("XDG_CACHE_HOME", (root_ / "cache").string());
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
  fs::path cache_file() const { return root_ / "cache" / "moe-registry" / "plugin_scan.json"; }

  std::optional<ScopedEnv> cache_;
  ScopedEnv named_{"MOE_PLUGIN_SCANNER", std::nullopt};
  ScopedEnv timeout_{"MOE_PLUGIN_SCAN_TIMEOUT_S", std::nullopt};
  fs::path root_, dir_;
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

// A time-out long enough that the good neighbour, scanned at the same time, never reaches it on
// a busy machine; the wall clock is only bounded loosely (4x), its outcome is what is checked.
TEST_F(Scanner, AHangInInitTimesOutAfterTheConfiguredSecondsAndItsNeighbourStillRuns) {
  const ScopedEnv timeout("MOE_PLUGIN_SCAN_TIMEOUT_S", "3");
  const auto start = std::chrono::steady_clock::now();
  const Registry r = discover_beside("hangs_in_init");
  const auto took = std::chrono::steady_clock::now() - start;
  expect_skipped(r, "timed out after 3 s in the plugin scanner");
  ASSERT_EQ(r.plugins().size(), 1u);
  expect_plugin_works(r.find("fixture_works"));
  EXPECT_GE(took, seconds(3)) << "killed before its time-out";
  EXPECT_LT(took, seconds(12)) << "the time-out did not end the scan";
}

// The scanner leads a process group of its own, killed whole: what a plugin forked goes too.
TEST_F(Scanner, AHangThatForkedLeavesNoProcessBehind) {
  const ScopedEnv timeout("MOE_PLUGIN_SCAN_TIMEOUT_S", "3");
  const fs::path pid_file = root_ / "forked.pid";
  const ScopedEnv env("MOE_FIXTURE_PID_FILE", pid_file.string());
  const Registry r = discover_beside("forks_and_hangs");
  expect_skipped(r, "timed out after 3 s in the plugin scanner");
  EXPECT_NE(r.find("fixture_works"), nullptr);
  const std::string pid = read_text(pid_file);
  ASSERT_FALSE(pid.empty()) << "the fixture did not fork";
  EXPECT_TRUE(process_ended(pid_t(std::stol(pid)))) << "the forked process " << pid << " survived";
}

// nlohmann's dump() throws on text that is not UTF-8: the scanner must not die of a plugin's
// Latin-1 description (it used to abort: "killed by SIGABRT"), nor the cache writer after it.
TEST_F(Scanner, ADescriptionThatIsNotUtf8LoadsIsListedAndCached) {
  const Registry r = discover_beside("latin1_description");
  EXPECT_TRUE(r.skipped().empty()) << r.skipped()[0].reason;
  const auto p = r.find("fixture_latin1_description");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(p->info().description, testing::StartsWith("caf"));
  EXPECT_THAT(read_text(cache_file()), testing::HasSubstr("fixture_latin1_description"));
}

TEST_F(Scanner, AnErrorCutInsideACharacterIsReportedWithAReplacementCharacter) {
  const Registry r = discover_beside("cut_utf8_in_init");
  expect_skipped(r, "fixture: refused in caf\xEF\xBF\xBD");  // U+FFFD
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

// The scanner is given an absolute path: "-plugins/lib.so" must not read as an option.
TEST_F(Scanner, ARelativePathStartingWithADashIsScanned) {
  fs::create_directories(root_ / "-plugins");
  copy_fixture("works", root_ / "-plugins");
  struct Cwd {
    fs::path old = fs::current_path();
    ~Cwd() { fs::current_path(old); }
  } const back;
  fs::current_path(root_);
  const Registry r = Registry::discover(scanned({"-plugins"}));
  EXPECT_TRUE(r.skipped().empty()) << r.skipped()[0].reason;
  EXPECT_NE(r.find("fixture_works"), nullptr);
}

// kAuto falls back to loading in-process with a warning when no scanner is found; this must not
// pass by that fallback. Only a scan writes the cache, under the identity of the scanner that ran.
TEST_F(Scanner, TheScannerBesideTheExecutableIsFoundByDefault) {
  DiscoveryOptions o = scanned({dir_.string()});
  o.scan = DiscoveryOptions::Scan::kAuto;
  testing::internal::CaptureStderr();
  const Registry r = Registry::discover(o);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(r.find("fixture_works"), nullptr);
  EXPECT_TRUE(r.skipped().empty());
  EXPECT_THAT(log, testing::Not(testing::HasSubstr("no plugin scanner found")));
  const std::string cache = read_text(cache_file());
  EXPECT_THAT(cache, testing::HasSubstr("scanner " + fs::canonical(build_scanner()).string()));
  EXPECT_THAT(cache, testing::HasSubstr(fs::canonical(dir_ / "libmoe_fixture_works.so").string()));
}

TEST_F(Scanner, ANamedScannerThatIsNotAnExecutableIsAConfigError) {
  const ScopedEnv named("MOE_PLUGIN_SCANNER", "/no/such/moe-plugin-scanner");
  expect_error([&] { Registry::discover(scanned({dir_.string()})); }, MOE_STATUS_CONFIG_ERROR,
               {"MOE_PLUGIN_SCANNER='/no/such/moe-plugin-scanner' is not an executable file"});
  const fs::path plain = root_ / "not-executable";
  std::ofstream(plain) << "#!/bin/sh\n";
  fs::permissions(plain, fs::perms::owner_read | fs::perms::owner_write);
  DiscoveryOptions o = scanned({dir_.string()});
  o.scanner = plain.string();
  expect_error([&] { Registry::discover(o); }, MOE_STATUS_CONFIG_ERROR,
               {"DiscoveryOptions::scanner='" + plain.string() + "' is not an executable file"});
}

// Executable by its mode, but not a program the system can run (no ELF header, no #! line).
TEST_F(Scanner, AScannerThatCannotBeStartedIsNamedWithTheReason) {
  const std::string bogus = fake_scanner(root_, "", "bogus-scanner");
  std::ofstream(bogus) << "not a program\n";
  DiscoveryOptions o = scanned({dir_.string()});
  o.scanner = bogus;
  const Registry r = Registry::discover(o);
  const std::string lib = (dir_ / "libmoe_fixture_works.so").string();
  ASSERT_EQ(r.skipped().size(), 1u);
  EXPECT_EQ(r.skipped()[0].reason,
            lib + ": the plugin scanner " + bogus + " could not be started: Exec format error");
}

// A refusal must never read as success, whatever status the scanner put in it.
TEST_F(Scanner, ARefusalWithStatusZeroIsAnInternalErrorWithTheScannersMessage) {
  DiscoveryOptions o = scanned({});
  o.files = {copy_fixture("works", root_).string()};
  o.scanner =
      fake_scanner(root_, "echo '{\"protocol\": " + std::to_string(detail::kScanProtocol) +
                              R"(, "abi": [1, 2], "ok": false, )"
                              R"("status": 0, "error": "lib.so: the fake scanner says no"}')");
  expect_error([&] { Registry::discover(o); }, MOE_STATUS_INTERNAL,
               {"lib.so: the fake scanner says no"});
}

// The core passes its pid; a scanner whose parent is another process (the core died before the
// scanner could ask for the death signal) stops at once, answering nothing.
TEST_F(Scanner, TheScannerStopsWhenItsParentIsNotTheOneNamed) {
  const std::string command = build_scanner().string() + " --parent-pid 1 " +
                              (dir_ / "libmoe_fixture_works.so").string() + " 2>&1";
  FILE* out = popen(command.c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text += char(c);
  const int status = pclose(out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 5) << status;
  EXPECT_EQ(text, "");
}

// kRequired with no scanner anywhere: run from a link of this test binary in a directory with no
// scanner beside it (the scanner is looked for beside the running executable).
TEST_F(Scanner, RequiredModeWithNoScannerFoundIsAConfigErrorSayingWhereItLooked) {
  if (std::getenv("MOE_TEST_NO_SCANNER_CHILD") != nullptr) {
    expect_error([&] { Registry::discover(scanned({dir_.string()})); }, MOE_STATUS_CONFIG_ERROR,
                 {"no plugin scanner found (looked for " + build_scanner().string(),
                  "); set MOE_PLUGIN_SCANNER"});
    return;
  }
  const fs::path bin = root_ / "bin", self = fs::read_symlink("/proc/self/exe");
  fs::create_directories(bin);
  std::error_code ec;
  fs::create_hard_link(self, bin / self.filename(), ec);
  if (ec) fs::copy_file(self, bin / self.filename());
  const ScopedEnv child("MOE_TEST_NO_SCANNER_CHILD", "1");
  const std::string command = (bin / self.filename()).string() + " --gtest_filter=Scanner." +
                              testing::UnitTest::GetInstance()->current_test_info()->name() +
                              " 2>&1";
  FILE* out = popen(command.c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text += char(c);
  EXPECT_EQ(pclose(out), 0) << text;
  EXPECT_THAT(text, testing::HasSubstr("[  PASSED  ] 1 test")) << text;
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
