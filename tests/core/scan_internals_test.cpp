// The pieces under the plugin scanner, tested directly: the child processes (run_processes: who
// counts as timed out, what a child leaves running), the key that says a library file is still the
// one scanned (same_file, which the registry asks right before an in-process load), and the cache
// file (other identities kept, concurrent writers).
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "../support/scan_env.hpp"
#include "loading/scan_cache.hpp"
#include "loading/scan_process.hpp"

namespace moe::test {
namespace {

namespace fs = std::filesystem;
using detail::run_processes;

fs::path scratch() {
  return scratch_dir(std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
}

TEST(ScanProcess, ASigkillOfItsOwnBeforeTheDeadlineIsNotATimeOut) {
  const auto r = run_processes({{"/bin/sh", "-c", "kill -9 $$"}}, 30, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].timed_out);
  EXPECT_TRUE(WIFSIGNALED(r[0].wait_status) && WTERMSIG(r[0].wait_status) == SIGKILL);
}

// Children that end right at their deadline: each either exited first and keeps its answer, or
// was ended by our kill. A time-out whose status is a normal exit is an answer thrown away. (The
// race is narrow: this checks the rule on every outcome, it cannot force the race.)
TEST(ScanProcess, AChildEndingAtItsDeadlineKeepsItsAnswerUnlessOurKillEndedIt) {
  const std::vector<std::vector<std::string>> argvs(16, {"/bin/sh", "-c", "sleep 0.3; echo yes"});
  for (const auto& r : run_processes(argvs, 0.3, 16)) {
    if (r.timed_out) {
      EXPECT_TRUE(WIFSIGNALED(r.wait_status) && WTERMSIG(r.wait_status) == SIGKILL)
          << "timed out, yet its status is " << r.wait_status;
    } else {
      EXPECT_TRUE(WIFEXITED(r.wait_status) && WEXITSTATUS(r.wait_status) == 0) << r.wait_status;
      EXPECT_EQ(r.out, "yes\n");
    }
  }
}

TEST(ScanProcess, ATimeOutKillsWhatTheChildForked) {
  const auto r = run_processes({{"/bin/sh", "-c", "sleep 60 & echo $!; wait"}}, 0.5, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].timed_out);
  ASSERT_FALSE(r[0].out.empty());
  EXPECT_TRUE(process_ended(pid_t(std::stol(r[0].out)))) << "the forked sleep survived";
}

TEST(ScanProcess, WhatAChildLeftRunningEndsWithIt) {
  const auto r = run_processes({{"/bin/sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"}}, 30, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].timed_out);
  EXPECT_TRUE(WIFEXITED(r[0].wait_status) && WEXITSTATUS(r[0].wait_status) == 0);
  ASSERT_FALSE(r[0].out.empty());
  EXPECT_TRUE(process_ended(pid_t(std::stol(r[0].out)))) << "the forked sleep survived";
}

TEST(ScanProcess, AProgramThatCannotBeStartedSaysWhy) {
  const auto r = run_processes({{"/no/such/program"}, {"/bin/sh", "-c", "echo next"}}, 30, 2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].start_error, "No such file or directory");
  EXPECT_EQ(r[1].out, "next\n");
}

TEST(ScanKey, SameFileUntilItIsReplacedOrItsCtimeMoves) {
  const fs::path dir = scratch(), file = dir / "lib.so";
  std::ofstream(file) << "contents";
  fs::create_symlink(file, dir / "link.so");
  const auto key = detail::scan_key(file);
  ASSERT_TRUE(key.has_value());
  EXPECT_TRUE(detail::same_file(*key, file));
  EXPECT_TRUE(detail::same_file(*key, dir / "link.so"));  // the same file, by another name

  // Timestamps come from a coarse clock (a few ms): let the ctime move on for certain.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  fs::permissions(file, fs::perms::owner_exec, fs::perm_options::add);
  EXPECT_FALSE(detail::same_file(*key, file)) << "a ctime change went unseen";

  const auto before = detail::scan_key(file);
  const auto mtime = fs::last_write_time(file);
  std::ofstream(dir / "new.so") << "contents";
  fs::last_write_time(dir / "new.so", mtime);
  fs::rename(dir / "new.so", file);  // same size, same mtime, another inode
  EXPECT_FALSE(detail::same_file(*before, file)) << "a replacement went unseen";

  fs::remove(file);
  EXPECT_FALSE(detail::same_file(*before, file));
}

PluginInfo info_named(const std::string& name) {
  PluginInfo info;
  info.name = name;
  info.description = "caf\xe9";  // not UTF-8: the cache must still be written
  return info;
}

// Entries of other identities stay in the file, unused, up to 8 identities, the newest kept.
TEST(ScanCacheFile, OtherIdentitiesAreKeptUnusedUpToEight) {
  const fs::path dir = scratch(), cache = dir / "cache" / "plugin_scan.json";
  std::ofstream(dir / "lib.so") << "contents";
  const auto key = detail::scan_key(dir / "lib.so");
  ASSERT_TRUE(key.has_value());
  for (int i = 0; i < 11; ++i) {
    detail::ScanCache c(cache, "core " + std::to_string(i));
    EXPECT_FALSE(c.find(*key).has_value()) << "core " << i << " used another identity's entry";
    c.put(*key, info_named("plugin_" + std::to_string(i)));
    c.save();
  }
  for (int i = 0; i < 11; ++i) {
    const auto found = detail::ScanCache(cache, "core " + std::to_string(i)).find(*key);
    EXPECT_EQ(found.has_value(), i >= 3) << "core " << i;
    if (found) {
      EXPECT_EQ(found->name, "plugin_" + std::to_string(i));
    }
  }
}

// Writers in parallel (threads here, processes in life): the file is always whole, whoever wins,
// and no temporary is left behind.
TEST(ScanCacheFile, ConcurrentSavesNeverLeaveATornFileNorATemporary) {
  const fs::path dir = scratch(), cache = dir / "cache" / "plugin_scan.json";
  constexpr int kWriters = 8;
  std::vector<detail::ScanKey> keys;
  for (int t = 0; t < kWriters; ++t) {
    const fs::path lib = dir / ("lib" + std::to_string(t) + ".so");
    std::ofstream(lib) << std::string(size_t(1000 * (t + 1)), 'x');
    keys.push_back(*detail::scan_key(lib));
  }
  for (int round = 0; round < 50; ++round) {
    std::atomic<bool> go = false;
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&, t] {
        detail::ScanCache c(cache, "core");
        c.put(keys[size_t(t)], info_named("plugin_" + std::to_string(t)));
        while (!go) std::this_thread::yield();
        c.save();
      });
    }
    go = true;
    for (auto& w : writers) w.join();
    const std::string text = read_text(cache);
    ASSERT_TRUE(nlohmann::json::accept(text)) << "round " << round << ":\n" << text;
  }
  for (const auto& e : fs::directory_iterator(cache.parent_path()))
    EXPECT_EQ(e.path().filename(), "plugin_scan.json");
}

}  // namespace
}  // namespace moe::test
