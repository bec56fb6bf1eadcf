// The gpu_oracle against the CPU reference on a GPU, through the C ABI, both with f64 outputs:
// every small problem of configs/problems (every format, sinks, shared experts, biases, relu2,
// EP), as written and with bf16 activations (no re-quantisation, so the tight bound), larger
// layers whose GEMMs take cuBLAS's big-tile kernels, and repeated runs on reused scratch.
// Skips without a GPU.
#include <filesystem>

#include "oracle_test_env.hpp"

namespace moe::test {
namespace {

// The global id of the first expert that lives on this rank.
int32_t first_local_expert(const moe_problem& p) {
  for (int64_t e = 0; e < p.experts; ++e)
    if (local_expert_id(p, e) >= 0) return int32_t(e);
  return 0;
}

class OracleOnEveryProblem : public GpuOracleOnAGpu,
                             public testing::WithParamInterface<std::string> {
 protected:
  // Every tokens x scenario of the file on fresh inputs, within the oracle's bounds.
  void expect_matches(const ProblemFile& pf, const std::string& what) {
    const moe_problem p = pf.problem.c();
    const LayerWeights w = random_weights(p, mix_seed(seed_, pf.name));
    const Layer oracle = oracle_->prepare(p, w.view(), {});
    const Layer ref = reference_->prepare(p, w.view(), {});
    std::vector<double> errors;
    for (const int64_t tokens : pf.tokens) {
      if (tokens > p.max_tokens) continue;
      for (const Scenario sc : pf.scenarios) {
        const Batch b = random_batch(p, tokens, mix_seed(seed_, std::to_string(tokens)), sc);
        Routing r = route_batch(*reference_, p, b);
        if (sc == Scenario::kOneExpert) r = one_expert_routing(p, r, first_local_expert(p));
        const RunResult got = run_layer(oracle, p, b.hidden, r, MOE_DTYPE_F64);
        const RunResult want = run_layer(ref, p, b.hidden, r, MOE_DTYPE_F64);
        const double err = relative_l2(got.output, want.output);
        std::cout << "  " << what << " T=" << tokens << " " << scenario_name(sc) << ": " << err
                  << "\n";
        if (tokens > 0) errors.push_back(err);
      }
    }
    expect_within_oracle_bounds(p, errors, what);
  }
};

TEST_P(OracleOnEveryProblem, MatchesTheReferenceAsWritten) {
  const ProblemFile pf = load_problem_file(GetParam());
  expect_matches(pf, pf.name);
}

TEST_P(OracleOnEveryProblem, MatchesTheReferenceTightlyWithBf16Activations) {
  ProblemFile pf = load_problem_file(GetParam());
  pf.problem.raw().input_format = MOE_INPUT_BF16;
  pf.problem.finalize();
  ASSERT_FALSE(requantises_intermediate(pf.problem.c()));
  expect_matches(pf, pf.name + " (bf16 activations)");
}

std::vector<std::string> small_problem_paths() {
  std::vector<std::string> out;
  for (const auto& pf : small_problem_files()) out.push_back(pf.path);
  return out;
}

INSTANTIATE_TEST_SUITE_P(SmallProblems, OracleOnEveryProblem,
                         testing::ValuesIn(small_problem_paths()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return std::filesystem::path(info.param).stem().string();
                         });

// E=16 k=4 H=1024 I=512, 256 tokens: ~64 rows per expert and K up to 1024, so cuBLAS takes other
// kernels than on the tiny problems.
Problem larger(moe_format format, moe_input_format input) {
  Problem p;
  p.raw().experts = 16;
  p.raw().top_k = 4;
  p.raw().hidden = 1024;
  p.raw().intermediate = 512;
  p.raw().format = format;
  p.raw().input_format = input;
  p.raw().max_tokens = 256;
  p.finalize();
  return p;
}

TEST_F(GpuOracleOnAGpu, LargerLayersMatchTheReference) {
  for (const Problem& problem :
       {larger(MOE_FORMAT_BF16, MOE_INPUT_DEFAULT), larger(MOE_FORMAT_FP8_BLOCK, MOE_INPUT_BF16),
        larger(MOE_FORMAT_NVFP4, MOE_INPUT_BF16)}) {
    const moe_problem p = problem.c();
    const LayerWeights w = random_weights(p, seed_);
    const Layer oracle = oracle_->prepare(p, w.view(), {});
    const Layer ref = reference_->prepare(p, w.view(), {});
    const Batch b = random_batch(p, 256, seed_ + 1, Scenario::kRandom);
    const Routing r = route_batch(*reference_, p, b);
    const double err = relative_l2(run_layer(oracle, p, b.hidden, r, MOE_DTYPE_F64).output,
                                   run_layer(ref, p, b.hidden, r, MOE_DTYPE_F64).output);
    EXPECT_LE(err, kGemmBound) << format_name(static_cast<moe_format>(p.format));
  }
}

// The device scratch only grows: runs of other sizes in between change no bit of a result.
TEST_F(GpuOracleOnAGpu, RepeatedRunsAreBitIdenticalAcrossScratchSizes) {
  const moe_problem p = larger(MOE_FORMAT_BF16, MOE_INPUT_DEFAULT).c();
  const LayerWeights w = random_weights(p, seed_);
  const Layer oracle = oracle_->prepare(p, w.view(), {});
  auto run = [&](int64_t tokens) {
    const Batch b = random_batch(p, tokens, seed_ + 2, Scenario::kRandom);
    return run_layer(oracle, p, b.hidden, route_batch(*reference_, p, b), MOE_DTYPE_F64).output;
  };
  const HostTensor first = run(64);
  run(1);
  run(256);
  const HostTensor again = run(64);
  ASSERT_EQ(first.bytes(), again.bytes());
  EXPECT_EQ(std::memcmp(first.raw(), again.raw(), first.bytes()), 0);
}

}  // namespace
}  // namespace moe::test
