// A GPU plugin's test fixture: the build's registry, the plugin under test (the test skips where
// it was not built) and the reference plugin.
#pragma once

#include <memory>

#include "test_env.hpp"

namespace moe::test {

template <class Base = testing::Test>
class PluginAndReference : public Base {
 protected:
  // Plugin `name`, or a skip naming `why` it may be missing; a missing reference fails the test.
  // Callers return when it skipped or failed (IsSkipped(), HasFatalFailure()).
  void load(const char* name, const char* why) {
    registry_ = std::make_unique<Registry>(registry_of({build_plugin_dir()}));
    plugin_ = registry_->find(name);
    reference_ = registry_->find("reference");
    if (plugin_ == nullptr) GTEST_SKIP() << name << " was not built (" << why << ")";
    ASSERT_NE(reference_, nullptr)
        << "the reference plugin is missing from the build's plugin directory";
  }

  std::unique_ptr<Registry> registry_;
  std::shared_ptr<Plugin> plugin_, reference_;
};

}  // namespace moe::test
