// Helpers of the discovery tests (tests/core/scanner_test.cpp and its neighbours): scratch plugin
// directories holding copies of fixture libraries, environment variables set for one scope, and
// the proof that a plugin still works (the conformance suite on one small problem).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "test_env.hpp"

namespace moe::test {

// Sets (or, with nullopt, unsets) an environment variable until the end of the scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) {
      setenv(name_.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A fresh, empty directory under the test's temporary directory.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const auto dir = std::filesystem::path(testing::TempDir()) / ("moe_scan_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
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
