// The scan cache ($XDG_CACHE_HOME/moe-registry/plugin_scan.json): a library scanned once is not
// scanned again until it changes (canonical path, inode, size, mtime, ctime), and answers belong
// to the scanner that gave them. To see whether the scanner ran, discovery names a wrapper script
// that logs each run and execs the build's scanner: the wrapper is the scanner the cache knows.
// Fake scanners also prove the messages for a scanner that gives no result or an unreadable one.
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "../support/scan_env.hpp"
#include "loading/scan_json.hpp"

namespace moe::test {
namespace {

namespace fs = std::filesystem;

class ScanCache : public testing::Test {
 protected:
  void SetUp() override {
    root_ = scratch_dir(testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(root_ / "plugins");
    library_ = copy_fixture("works", root_ / "plugins");
    xdg_.emplace("XDG_CACHE_HOME", (root_ / "cache").string());
  }
  fs::path cache_file() const { return root_ / "cache" / "moe-registry" / "plugin_scan.json"; }
  // The build's scanner behind a script that counts its runs in <name>.log.
  std::string counting_scanner(const std::string& name) const {
    return fake_scanner(root_,
                        "echo run >> '" + (root_ / (name + ".log")).string() + "'\nexec '" +
                            build_scanner().string() + "' \"$@\"",
                        name);
  }
  int runs(const std::string& name) const {
    const std::string log = read_text(root_ / (name + ".log"));
    return int(std::count(log.begin(), log.end(), '\n'));
  }
  Registry discover(const std::string& scanner = "") const {
    DiscoveryOptions o = scanned({(root_ / "plugins").string()});
    o.scanner = scanner;
    return Registry::discover(o);
  }
  // Replaces `file` with as many bytes that are no plugin, its mtime kept (cp -p, rsync -a).
  void replace_keeping_mtime(const fs::path& file, bool in_place) const {
    const auto size = fs::file_size(file);
    const auto mtime = fs::last_write_time(file);
    // Timestamps come from a coarse clock (a few ms): let the ctime have moved on for certain.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const fs::path target = in_place ? file : root_ / "replacement.so";
    std::ofstream(target, std::ios::binary | std::ios::trunc) << std::string(size, 'x');
    fs::last_write_time(target, mtime);
    if (!in_place) fs::rename(target, file);
    ASSERT_EQ(fs::file_size(file), size);
    ASSERT_EQ(fs::last_write_time(file), mtime);
  }

  fs::path root_, library_;
  ScopedEnv cache_on_{"MOE_PLUGIN_SCAN_CACHE", std::nullopt};
  ScopedEnv named_{"MOE_PLUGIN_SCANNER", std::nullopt};
  std::optional<ScopedEnv> xdg_;
};

TEST_F(ScanCache, TheSecondDiscoveryUsesTheCacheAndAChangedFileIsScannedAgain) {
  const std::string scanner = counting_scanner("scanner");
  ASSERT_NE(discover(scanner).find("fixture_works"), nullptr);  // scanned, then cached
  EXPECT_EQ(runs("scanner"), 1);
  EXPECT_THAT(read_text(cache_file()), testing::HasSubstr(fs::canonical(library_).string()));

  const Registry cached = discover(scanner);
  EXPECT_NE(cached.find("fixture_works"), nullptr);
  EXPECT_TRUE(cached.skipped().empty());
  EXPECT_EQ(runs("scanner"), 1) << "the cache was not used";

  fs::last_write_time(library_, fs::last_write_time(library_) + std::chrono::hours(1));
  EXPECT_NE(discover(scanner).find("fixture_works"), nullptr);
  EXPECT_EQ(runs("scanner"), 2) << "a changed library was not scanned again";
}

// Same path, size and mtime, other contents: the stale "loadable" must not be reused, or a file
// never scanned would be loaded into the process.
// Same path, size and mtime, other contents: the stale "loadable" must not be reused, or a file
// never scanned would be loaded into the process.
TEST_F(ScanCache, ASameSizeReplacementRenamedIntoPlaceWithItsMtimeKeptIsScannedAgain) {
  const std::string scanner = counting_scanner("scanner");
  ASSERT_NE(discover(scanner).find("fixture_works"), nullptr);
  replace_keeping_mtime(library_, /*in_place=*/false);  // the loaded file lives on, unlinked
  const Registry r = discover(scanner);
  EXPECT_EQ(runs("scanner"), 2) << "the cached answer of the old file was used";
  EXPECT_EQ(r.find("fixture_works"), nullptr);
  ASSERT_EQ(r.skipped().size(), 1u);
  EXPECT_THAT(r.skipped()[0].reason, testing::StartsWith(library_.string() + ":"));
}

// The same inode rewritten: only the ctime tells. Libraries stay mapped in this process until
// exit, so the one rewritten is one the scanner passed but discovery never loaded here (a second
// library claiming fixture_works is refused before it is loaded).
TEST_F(ScanCache, ASameSizeRewriteInPlaceWithItsMtimeKeptIsScannedAgain) {
  const std::string scanner = counting_scanner("scanner");
  fs::create_directories(root_ / "later");
  const fs::path again = copy_fixture("works_again", root_ / "later");
  DiscoveryOptions o = scanned({(root_ / "plugins").string(), (root_ / "later").string()});
  o.scanner = scanner;
  const Registry first = Registry::discover(o);
  ASSERT_EQ(first.skipped().size(), 1u);
  ASSERT_THAT(first.skipped()[0].reason, testing::HasSubstr("duplicate plugin name"));
  ASSERT_EQ(runs("scanner"), 2);
  replace_keeping_mtime(again, /*in_place=*/true);
  const Registry r = Registry::discover(o);
  EXPECT_EQ(runs("scanner"), 3) << "the cached answer of the old contents was used";
  ASSERT_EQ(r.skipped().size(), 1u);
  EXPECT_THAT(r.skipped()[0].reason, testing::StartsWith(again.string() + ":"));
  EXPECT_THAT(r.skipped()[0].reason, testing::Not(testing::HasSubstr("duplicate")));
}

// Two scanners (two builds, say) taking turns: neither uses the other's answers, and neither
// wipes them.
TEST_F(ScanCache, AnotherScannersEntriesAreKeptButNotUsed) {
  const std::string one = counting_scanner("one"), two = counting_scanner("two");
  ASSERT_NE(discover(one).find("fixture_works"), nullptr);
  ASSERT_NE(discover(two).find("fixture_works"), nullptr);
  EXPECT_EQ(runs("two"), 1) << "the answer of another scanner was used";
  const std::string text = read_text(cache_file());
  EXPECT_THAT(text, testing::HasSubstr("scanner " + one + " size"));
  EXPECT_THAT(text, testing::HasSubstr("scanner " + two + " size"));
  ASSERT_NE(discover(one).find("fixture_works"), nullptr);
  EXPECT_EQ(runs("one"), 1) << "the first scanner's entry was dropped";
}

// A core of another scan protocol (an older install sharing the cache) wrote its section with
// other fields: this core still uses its own entries, and keeps that section when it saves.
TEST_F(ScanCache, AnotherProtocolsSectionCostsNothingAndIsKept) {
  const std::string one = counting_scanner("one"), two = counting_scanner("two");
  ASSERT_NE(discover(one).find("fixture_works"), nullptr);
  nlohmann::json j = nlohmann::json::parse(read_text(cache_file()));
  const std::string older = "moe-registry 0.0 ABI 1.4 scan protocol 4; scanner /elsewhere";
  j["cores"][older] = {
      {"saved_ns", 1},
      {"libraries", {{fs::canonical(library_).string(), {{"info", {{"name", "x"}}}}}}}};
  std::ofstream(cache_file(), std::ios::trunc) << j.dump();
  ASSERT_NE(discover(one).find("fixture_works"), nullptr);
  EXPECT_EQ(runs("one"), 1) << "the other section made this core scan again";
  ASSERT_NE(discover(two).find("fixture_works"), nullptr);  // a save
  EXPECT_THAT(read_text(cache_file()), testing::HasSubstr(older));
  ASSERT_NE(discover(one).find("fixture_works"), nullptr);
  EXPECT_EQ(runs("one"), 1);
}

// A scanner rebuilt in place (a dev build at another commit) is another identity.
TEST_F(ScanCache, ARebuiltScannerDoesNotUseTheOldOnesAnswers) {
  const std::string scanner = counting_scanner("scanner");
  ASSERT_NE(discover(scanner).find("fixture_works"), nullptr);
  std::ofstream(scanner, std::ios::app) << "# rebuilt\n";
  ASSERT_NE(discover(scanner).find("fixture_works"), nullptr);
  EXPECT_EQ(runs("scanner"), 2);
}

// Processes that discover at the same time all write the file: the last writer wins, no one
// sees half a file, and no temporary is left behind.
TEST_F(ScanCache, ConcurrentWritersLeaveAWholeFileAndNoTemporaries) {
  const std::string scanner = counting_scanner("scanner");
  std::vector<std::thread> threads;
  std::atomic<int> loaded = 0;
  for (int t = 0; t < 6; ++t) {
    const fs::path dir = root_ / ("plugins" + std::to_string(t));
    fs::create_directories(dir);
    copy_fixture(t % 2 ? "works" : "picky", dir);
    threads.emplace_back([&, dir] {
      DiscoveryOptions o = scanned({dir.string()});
      o.scanner = scanner;
      loaded += int(Registry::discover(o).plugins().size());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(loaded, 6);
  const std::string text = read_text(cache_file());
  EXPECT_TRUE(nlohmann::json::accept(text)) << text;
  EXPECT_THAT(text, testing::HasSubstr("libmoe_fixture_"));
  for (const auto& e : fs::directory_iterator(cache_file().parent_path()))
    EXPECT_EQ(e.path().filename(), "plugin_scan.json");
}

TEST_F(ScanCache, ZeroTurnsItOff) {
  const ScopedEnv off("MOE_PLUGIN_SCAN_CACHE", "0");
  const std::string scanner = counting_scanner("scanner");
  ASSERT_NE(discover(scanner).find("fixture_works"), nullptr);
  EXPECT_FALSE(fs::exists(cache_file()));
  ASSERT_NE(discover(scanner).find("fixture_works"), nullptr);
  EXPECT_EQ(runs("scanner"), 2);
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

TEST_F(ScanCache, AnUnreadableCacheFileIsIgnoredAndReplaced) {
  fs::create_directories(cache_file().parent_path());
  std::ofstream(cache_file()) << "{ not json";
  const std::string scanner = counting_scanner("scanner");
  EXPECT_NE(discover(scanner).find("fixture_works"), nullptr);
  EXPECT_NE(discover(scanner).find("fixture_works"), nullptr);  // rewritten, used
  EXPECT_EQ(runs("scanner"), 1);
}

TEST_F(ScanCache, AScannerThatFailsIsReportedWithTheLastLineItPrinted) {
  const std::string failing =
      fake_scanner(root_, "echo 'first line' >&2\necho 'fake scanner says no' >&2\nexit 3");
  const Registry r = discover(failing);
  ASSERT_EQ(r.skipped().size(), 1u);
  EXPECT_EQ(r.skipped()[0].reason,
            library_.string() + ": the plugin scanner " + failing +
                " exited with status 3 without a result: fake scanner says no");
}

TEST_F(ScanCache, AScannerThatPrintsNoJsonIsReportedAsUnreadable) {
  const ScopedEnv off("MOE_PLUGIN_SCAN_CACHE", "0");
  const std::string garbage = fake_scanner(root_, "echo 'this is not JSON'");
  const Registry r = discover(garbage);
  ASSERT_EQ(r.skipped().size(), 1u);
  EXPECT_THAT(r.skipped()[0].reason,
              testing::HasSubstr(library_.string() + ": the plugin scanner " + garbage +
                                 " gave an unreadable result"));
}

TEST_F(ScanCache, AScannerOfAnotherProtocolIsRefused) {
  const ScopedEnv off("MOE_PLUGIN_SCAN_CACHE", "0");
  const std::string other = fake_scanner(root_, R"(echo '{"protocol": 99, "ok": true}')");
  const Registry r = discover(other);
  ASSERT_EQ(r.skipped().size(), 1u);
  EXPECT_THAT(r.skipped()[0].reason,
              testing::HasSubstr("the plugin scanner " + other +
                                 " answers in protocol 99, this core reads " +
                                 std::to_string(detail::kScanProtocol)));
}

}  // namespace
}  // namespace moe::test
