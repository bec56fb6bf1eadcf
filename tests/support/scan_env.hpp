// Helpers of the discovery tests (tests/core/scanner_test.cpp and its neighbours): scratch plugin
// directories holding copies of fixture libraries, environment variables set for one scope, fake
// scanners, and the proof that a plugin still works (the conformance suite on one small problem).
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "scoped_env.hpp"
#include "test_env.hpp"

namespace moe::test {

// A fresh, empty directory <build>/test_scratch/<pid>/<name>. In the build tree, not the shared
// temporary directory: plugins are dlopen'ed from it (a noexec /tmp would refuse them), and the
// pid keeps concurrent runs of the same test apart. Directories of processes that have ended
// are removed here, so the tree does not grow with every run.
inline std::filesystem::path scratch_dir(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(from_env("MOE_TEST_BUILD_DIR", MOE_BUILD_DIR)) / "test_scratch";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") == std::string::npos && pid.size() < 10 &&
        kill(pid_t(std::stol(pid)), 0) != 0 && errno == ESRCH)
      fs::remove_all(entry.path(), ec);
  }
  const fs::path dir = root / std::to_string(getpid()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Copies the fixture library of `variant` into `dir`; returns the copy's path.
inline std::filesystem::path copy_fixture(const std::string& variant,
                                          const std::filesystem::path& dir) {
  const std::string name = "libmoe_fixture_" + variant + ".so";
  std::filesystem::copy_file(std::filesystem::path(fixture_dir(variant)) / name, dir / name,
                             std::filesystem::copy_options::overwrite_existing);
  return dir / name;
}

// Discovery over exactly `dirs`, every library through the plugin scanner (which must be found).
inline DiscoveryOptions scanned(std::vector<std::string> dirs) {
  DiscoveryOptions o;
  o.config_dirs = std::move(dirs);
  o.use_env = o.use_default = false;
  o.scan = DiscoveryOptions::Scan::kRequired;
  return o;
}

// An executable script standing in for moe-plugin-scanner: `dir`/`name`, running `body`.
inline std::string fake_scanner(const std::filesystem::path& dir, const std::string& body,
                                const std::string& name = "fake-scanner") {
  const std::filesystem::path p = dir / name;
  std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
  std::filesystem::permissions(p, std::filesystem::perms::owner_all);
  return p.string();
}

// The build's scanner, the one found beside the running test binary.
inline std::filesystem::path build_scanner() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path() / "moe-plugin-scanner";
}

inline std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether `pid` has ended (gone, or a zombie that its new parent has not reaped yet), waiting up
// to `patience` for it: a SIGKILL is delivered asynchronously.
inline bool process_ended(pid_t pid, std::chrono::milliseconds patience = std::chrono::seconds(5)) {
  const auto until = std::chrono::steady_clock::now() + patience;
  for (;;) {
    const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    if (stat.empty() || (paren != std::string::npos && paren + 2 < stat.size() &&
                         (stat[paren + 2] == 'Z' || stat[paren + 2] == 'X')))
      return true;
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

inline const SkippedLibrary* skipped_with(const Registry& r, const std::string& text) {
  for (const auto& s : r.skipped())
    if (s.reason.find(text) != std::string::npos) return &s;
  return nullptr;
}

// The reference of the build tree, loaded once.
inline std::shared_ptr<Plugin> build_reference() {
  static const Registry r = registry_of({build_plugin_dir()});
  return r.oracle();
}

// Runs the conformance suite on `plugin` over one small bf16 problem: every case must pass.
inline void expect_plugin_works(const std::shared_ptr<Plugin>& plugin) {
  ASSERT_NE(plugin, nullptr);
  const Conformance suite(build_reference());
  const ProblemFile pf = load_problem_file(source_path("configs/problems/bf16_softmax_silu.yaml"));
  ConformanceOptions opt;
  opt.seed = 11;
  const auto cases = suite.run(plugin, pf, opt);
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases)
    EXPECT_EQ(c.status, CaseStatus::kPass) << plugin->name() << ": " << c.detail;
}

}  // namespace moe::test
