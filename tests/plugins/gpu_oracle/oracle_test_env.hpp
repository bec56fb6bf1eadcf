// Shared by the gpu_oracle tests: the oracle and the CPU reference loaded from build/plugins, a
// fresh seed and the small problem files. The bounds are tests/support/oracle_bounds.hpp's.
#pragma once

#include <cstring>
#include <iostream>
#include <random>

#include "../../support/oracle_bounds.hpp"
#include "../../support/test_env.hpp"

namespace moe::test {

inline std::vector<ProblemFile> small_problem_files() {
  std::vector<ProblemFile> out;
  for (auto& pf : load_problem_dir(source_path("configs/problems")))
    if (!pf.gpu_sized) out.push_back(std::move(pf));
  return out;
}

// Fresh per run; MOE_TEST_SEED=<n> repeats a failing run (the seed is printed).
inline uint64_t fresh_seed() {
  if (const char* s = std::getenv("MOE_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
}

// The oracle and the reference; skips when the oracle was not built.
class GpuOracle : public testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_unique<Registry>(registry_of({build_plugin_dir()}));
    oracle_ = registry_->find("gpu_oracle");
    reference_ = registry_->find("reference");
    if (oracle_ == nullptr) GTEST_SKIP() << "gpu_oracle was not built (no CUDA toolkit)";
    ASSERT_NE(reference_, nullptr);
    seed_ = fresh_seed();
    std::cout << "[   seed   ] MOE_TEST_SEED=" << seed_ << "\n";
  }

  std::unique_ptr<Registry> registry_;
  std::shared_ptr<Plugin> oracle_, reference_;
  uint64_t seed_ = 0;
};

// Also skips, with the oracle's reason, when there is no usable GPU.
class GpuOracleOnAGpu : public GpuOracle {
 protected:
  void SetUp() override {
    GpuOracle::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const Support s = oracle_->supports(small_problem().c());
    if (!s.supported) GTEST_SKIP() << "gpu_oracle: " << s.message;
  }
};

}  // namespace moe::test
