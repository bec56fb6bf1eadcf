// The cross-backend conformance suite under ctest: every plugin in build/plugins against the
// reference on every problem file, through the C ABI only. Plus proof that the suite fails a
// plugin with a layout bug and reports unsupported problems as skips.
#include <nlohmann/json.hpp>
#include <random>

#include "../support/test_env.hpp"

namespace moe::test {
namespace {

struct Param {
  std::string plugin;
  std::string problem_path;
};
void PrintTo(const Param& p, std::ostream* os) {
  *os << p.plugin << " on " << p.problem_path;
}

// Fresh inputs every run; MOE_CONFORMANCE_SEED reproduces a failure (the seed is printed).
uint64_t suite_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("MOE_CONFORMANCE_SEED");
    return env ? std::stoull(env) : uint64_t(std::random_device{}());
  }();
  return seed;
}

const Registry& build_registry() {
  static const Registry r = registry_of({build_plugin_dir()});
  return r;
}

std::vector<Param> all_params() {
  std::vector<Param> out;
  for (const auto& pf : load_problem_dir(source_path("configs/problems")))
    for (const auto& plugin : build_registry().plugins()) out.push_back({plugin->name(), pf.path});
  return out;
}

std::string param_name(const testing::TestParamInfo<Param>& info) {
  return info.param.plugin + "__" + std::filesystem::path(info.param.problem_path).stem().string();
}

// Checks every case: a failure names the stage, tokens, scenario, seed and the difference.
void expect_conformant(const std::vector<CaseResult>& cases) {
  for (const auto& c : cases) {
    EXPECT_NE(c.status, CaseStatus::kFail)
        << c.plugin << " / " << c.problem << " " << c.stage << " T=" << c.tokens << " "
        << c.scenario << " seed=" << c.seed << ": " << c.detail
        << " (reproduce with MOE_CONFORMANCE_SEED=" << suite_seed() << ")";
  }
}

class Conformance_ : public testing::TestWithParam<Param> {};

TEST_P(Conformance_, AgreesWithTheReference) {
  const auto& reg = build_registry();
  const Conformance suite(reg.find("reference"));
  const ProblemFile pf = load_problem_file(GetParam().problem_path);
  ConformanceOptions opt;
  opt.seed = suite_seed();
  const auto cases = suite.run(reg.find(GetParam().plugin), pf, opt);
  ASSERT_FALSE(cases.empty());
  if (cases.size() == 1 && cases[0].status == CaseStatus::kSkip) GTEST_SKIP() << cases[0].detail;
  expect_conformant(cases);
}

INSTANTIATE_TEST_SUITE_P(EveryPluginEveryProblem, Conformance_, testing::ValuesIn(all_params()),
                         param_name);

TEST(ConformanceSuite, FailsAPluginThatSwapsGateAndUp) {
  const Registry r = registry_of({build_plugin_dir(), fixture_dir("swaps_gate_up")});
  const Conformance suite(r.find("reference"));
  const ProblemFile pf = load_problem_file(source_path("configs/problems/bf16_softmax_silu.yaml"));
  ConformanceOptions opt;
  opt.seed = suite_seed();
  int failed = 0;
  for (const auto& c : suite.run(r.find("fixture_swaps_gate_up"), pf, opt)) {
    if (c.status != CaseStatus::kFail) continue;
    ++failed;
    EXPECT_THAT(c.detail, testing::HasSubstr("exceeds tolerance"));
  }
  EXPECT_GT(failed, 0);
}

TEST(ConformanceSuite, ReportsAnUnsupportedProblemAsASkipWithTheReason) {
  const Registry r = registry_of({build_plugin_dir(), fixture_dir("picky")});
  const Conformance suite(r.find("reference"));
  const ProblemFile pf = load_problem_file(source_path("configs/problems/fp8_block_grouped.yaml"));
  const auto cases = suite.run(r.find("fixture_picky"), pf, {});
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].status, CaseStatus::kSkip);
  EXPECT_THAT(cases[0].detail, testing::HasSubstr("unsupported (format): only bf16 weights"));
}

TEST(ConformanceSuite, SkipsGpuSizedProblemsUnlessAskedFor) {
  const Registry& reg = build_registry();
  const Conformance suite(reg.find("reference"));
  const ProblemFile pf = load_problem_file(source_path("configs/problems/deepseek_v3_bf16.yaml"));
  ASSERT_TRUE(pf.gpu_sized);
  const auto cases = suite.run(reg.find("reference"), pf, {});
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].status, CaseStatus::kSkip);
  EXPECT_THAT(cases[0].detail, testing::HasSubstr("GPU-sized"));
}

TEST(ConformanceSuite, JsonReportCountsEveryStatus) {
  std::vector<CaseResult> cases(3);
  cases[0].status = CaseStatus::kPass;
  cases[1].status = CaseStatus::kFail;
  cases[1].rel_err = INFINITY;
  cases[2].status = CaseStatus::kSkip;
  const auto json = to_json(cases);
  EXPECT_EQ(json["summary"]["pass"], 1);
  EXPECT_EQ(json["summary"]["fail"], 1);
  EXPECT_EQ(json["summary"]["skip"], 1);
  EXPECT_EQ(json["cases"][1]["rel_err"], "inf");
}

TEST(ConformanceSuite, RelativeErrorIsInfiniteForNaNOutputs) {
  HostTensor out(MOE_DTYPE_BF16, {1, 2}), ref(MOE_DTYPE_F64, {1, 2});
  out.fill_bytes(0xFF);
  ref.data<double>()[0] = 1.0;
  ref.data<double>()[1] = 0.0;
  EXPECT_TRUE(std::isinf(relative_l2(out, ref)));
}

}  // namespace
}  // namespace moe::test
