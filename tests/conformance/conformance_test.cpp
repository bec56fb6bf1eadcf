// The cross-backend conformance suite under ctest: every plugin in build/plugins against the
// reference on every problem file, through the C ABI only. Plus proof that the suite fails a
// plugin with a layout bug, reports unsupported problems as skips, and checks gpu_sized problems
// on device-memory plugins against the GPU oracle it is given; and that its report cannot
// flatter: real passes counted apart from empty batches and self-checks, errors with no error
// value, the worst element of a failing output, the problem and plugin of every case.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

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

// The project's plugins and the example third-party one.
const Registry& build_registry() {
  static const Registry r = registry_of({build_plugin_dir(), example_plugin_dir()});
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
    EXPECT_TRUE(c.status == CaseStatus::kPass || c.status == CaseStatus::kSkip)
        << case_status_name(c.status) << " " << c.plugin << " / " << c.problem << " " << c.stage
        << " T=" << c.tokens << " " << c.scenario << " seed=" << c.seed << ": " << c.detail
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

// A problem file's tokens must fit its max_tokens (else each case would be a skip counted against
// no one); without tokens the defaults 0, 1, 5, 33 are cut to max_tokens.
TEST(ConformanceSuite, AProblemFilesTokensFitItsMaxTokens) {
  const std::string dir = testing::TempDir();
  const std::string problem =
      "problem: {experts: 8, top_k: 2, hidden: 64, intermediate: 32, max_tokens: 4}\n";
  const std::string over = dir + "/tokens_over_capacity.yaml";
  std::ofstream(over, std::ios::trunc) << problem << "tokens: [1, 9]\n";
  expect_error([&] { load_problem_file(over); }, MOE_STATUS_CONFIG_ERROR,
               {"tokens_over_capacity.yaml:2:", "tokens 9 is above the problem's max_tokens=4"});
  const std::string defaults = dir + "/default_tokens.yaml";
  std::ofstream(defaults, std::ios::trunc) << problem;
  EXPECT_EQ(load_problem_file(defaults).tokens, (std::vector<int64_t>{0, 1, 4}));
}

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

// One token of a re-quantising problem is judged by kOneTokenFlipFactor times the file's
// tolerance (a single flipped code is the whole comparison there); every other case, and every
// case of a problem that keeps bf16 activations, by the file's own. The report carries the bound
// each case was judged by.
TEST(ConformanceSuite, WidensTheBoundOnlyForOneTokenOfARequantisingProblem) {
  const ProblemFile fp8 = load_problem_file(source_path("configs/problems/fp8_block_relu2.yaml"));
  const ProblemFile bf16 = load_problem_file(source_path("configs/problems/bf16_relu2.yaml"));
  const ProblemFile static_fp8 =
      load_problem_file(source_path("configs/problems/fp8_tensor_static.yaml"));
  EXPECT_DOUBLE_EQ(case_tolerance(fp8, 1), 3 * fp8.tolerance);
  EXPECT_DOUBLE_EQ(case_tolerance(static_fp8, 1), 3 * 3e-2);  // its own file's tolerance, widened
  for (const int64_t t : {0, 2, 5, 33})
    EXPECT_DOUBLE_EQ(case_tolerance(fp8, t), fp8.tolerance) << t;
  for (const int64_t t : {0, 1, 5}) EXPECT_DOUBLE_EQ(case_tolerance(bf16, t), bf16.tolerance) << t;

  const Registry& reg = build_registry();
  const Conformance suite(reg.find("reference"));
  ConformanceOptions opt;
  opt.seed = suite_seed();
  int one_token = 0;
  for (const auto& c : suite.run(reg.find("reference"), fp8, opt)) {
    if (c.stage != "run") continue;
    EXPECT_DOUBLE_EQ(c.tolerance, case_tolerance(fp8, c.tokens)) << c.tokens;
    one_token += c.tokens == 1;
  }
  EXPECT_GT(one_token, 0);
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

// A small problem under the gpu_sized rules (the model shapes take a GPU).
ProblemFile gpu_sized_small(const std::string& name = "bf16_softmax_silu.yaml") {
  ProblemFile pf = load_problem_file(source_path("configs/problems/" + name));
  pf.gpu_sized = true;
  pf.tokens = {0, 5};
  return pf;
}

ConformanceOptions gpu_sized_options(std::shared_ptr<const Plugin> oracle) {
  ConformanceOptions opt;
  opt.seed = suite_seed();
  opt.include_gpu_sized = true;
  opt.gpu_oracle = std::move(oracle);
  return opt;
}

TEST(ConformanceSuite, GpuSizedProblemsSkipHostMemoryPluginsSayingSo) {
  const Registry& reg = build_registry();
  const Conformance suite(reg.find("reference"));
  for (const char* host : {"reference", "example_cpu", "gpu_oracle"}) {
    if (reg.find(host) == nullptr) continue;  // gpu_oracle: built with CUDA only
    const auto cases = suite.run(reg.find(host), gpu_sized_small(), gpu_sized_options(nullptr));
    ASSERT_EQ(cases.size(), 1u) << host;
    EXPECT_EQ(cases[0].status, CaseStatus::kSkip);
    EXPECT_THAT(cases[0].detail,
                testing::HasSubstr(std::string(host) + " keeps its tensors in host memory"));
  }
}

TEST(ConformanceSuite, GpuSizedProblemWithoutAGpuOracleIsASkipNamingIt) {
  const Registry r = registry_of({build_plugin_dir(), fixture_dir("device_like")});
  const Conformance suite(r.find("reference"));
  const auto cases =
      suite.run(r.find("fixture_device_like"), gpu_sized_small(), gpu_sized_options(nullptr));
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].status, CaseStatus::kSkip);
  EXPECT_THAT(cases[0].detail, testing::HasSubstr("no GPU oracle"));
  EXPECT_THAT(cases[0].detail, testing::HasSubstr("gpu_oracle plugin was not found"));
}

// The real gpu_oracle needs a GPU, so a stand-in with a known bug takes its place: a correct
// plugin must fail against it on gpu_sized problems (proof that the suite compares with the
// oracle it is given, and says so in every case) and pass against the reference on small ones.
TEST(ConformanceSuite, GpuSizedProblemsAreComparedWithTheGpuOracleAndSmallOnesWithTheReference) {
  const Registry r =
      registry_of({build_plugin_dir(), fixture_dir("device_like"), fixture_dir("swaps_gate_up")});
  const Conformance suite(r.find("reference"));
  const auto opt = gpu_sized_options(r.find("fixture_swaps_gate_up"));
  const auto target = r.find("fixture_device_like");
  const auto big = suite.run(target, gpu_sized_small(), opt);
  ProblemFile small_pf = gpu_sized_small();
  small_pf.gpu_sized = false;
  const auto small = suite.run(target, small_pf, opt);
  int big_failed = 0, small_passed = 0;
  for (const auto& c : big) {
    EXPECT_EQ(c.oracle, "fixture_swaps_gate_up");
    if (c.tokens == 0) continue;  // nothing to disagree on
    EXPECT_EQ(c.status, CaseStatus::kFail) << c.stage << " T=" << c.tokens << " " << c.scenario;
    EXPECT_THAT(c.detail, testing::HasSubstr("exceeds tolerance"));
    big_failed += c.status == CaseStatus::kFail;
  }
  for (const auto& c : small) {
    EXPECT_EQ(c.oracle, "reference");
    EXPECT_EQ(c.status, CaseStatus::kPass) << c.stage << " T=" << c.tokens << ": " << c.detail;
    small_passed += c.status == CaseStatus::kPass;
  }
  EXPECT_GT(big_failed, 0);
  EXPECT_GT(small_passed, 0);
  EXPECT_EQ(to_json(big)["cases"][0]["oracle"], "fixture_swaps_gate_up");
}

TEST(ConformanceSuite, GpuSizedProblemTheOracleCannotTakeIsASkipNamingTheOracle) {
  const Registry r =
      registry_of({build_plugin_dir(), fixture_dir("device_like"), fixture_dir("picky")});
  const Conformance suite(r.find("reference"));
  const auto cases =
      suite.run(r.find("fixture_device_like"), gpu_sized_small("fp8_block_grouped.yaml"),
                gpu_sized_options(r.find("fixture_picky")));
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].status, CaseStatus::kSkip);
  EXPECT_THAT(cases[0].detail, testing::HasSubstr("the GPU oracle 'fixture_picky' cannot check it "
                                                  "(format): only bf16 weights"));
}

// Without a GPU the real oracle refuses every problem, and gpu_sized problems become skips.
TEST(ConformanceSuite, GpuOracleWithoutADeviceMakesGpuSizedProblemsSkipsWithTheReason) {
  const Registry r = registry_of({build_plugin_dir(), fixture_dir("device_like")});
  const auto oracle = r.find("gpu_oracle");
  if (oracle == nullptr) GTEST_SKIP() << "gpu_oracle was not built (no CUDA toolkit)";
  const Support s = oracle->supports(small_problem().c());
  if (s.supported) GTEST_SKIP() << "this machine has a GPU: the oracle takes the problem";
  const Conformance suite(r.find("reference"));
  const auto cases =
      suite.run(r.find("fixture_device_like"), gpu_sized_small(), gpu_sized_options(oracle));
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].status, CaseStatus::kSkip);
  EXPECT_THAT(cases[0].detail, testing::HasSubstr("the GPU oracle 'gpu_oracle' cannot check it "
                                                  "(arch): no CUDA device"));
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
  EXPECT_EQ(json["cases"][0]["oracle"], "");
}

TEST(ConformanceSuite, RelativeErrorIsInfiniteForNaNOutputs) {
  HostTensor out(MOE_DTYPE_BF16, {1, 2}), ref(MOE_DTYPE_F64, {1, 2});
  out.fill_bytes(0xFF);
  ref.data<double>()[0] = 1.0;
  ref.data<double>()[1] = 0.0;
  EXPECT_TRUE(std::isinf(relative_l2(out, ref)));
}

ProblemFile softmax_silu(std::vector<int64_t> tokens = {0, 5}) {
  ProblemFile pf = load_problem_file(source_path("configs/problems/bf16_softmax_silu.yaml"));
  pf.tokens = std::move(tokens);
  return pf;
}

// A plugin that declares accumulate gets one accumulate case per token count (on the padding
// scenario); one that declares it and overwrites the output anyway passes its runs and fails
// exactly those.
TEST(ConformanceSuite, ChecksAccumulateOnlyWhereDeclaredAndCatchesAPluginThatIgnoresIt) {
  const Registry r =
      registry_of({build_plugin_dir(), fixture_dir("works"), fixture_dir("ignores_accumulate")});
  const Conformance suite(r.find("reference"));
  ConformanceOptions opt;
  opt.seed = suite_seed();
  const ProblemFile pf = softmax_silu({0, 1, 7});
  auto accumulate_cases = [](const std::vector<CaseResult>& cases) {
    std::vector<CaseResult> out;
    for (const auto& c : cases)
      if (c.stage == "accumulate") out.push_back(c);
    return out;
  };
  const auto works = accumulate_cases(suite.run(r.find("fixture_works"), pf, opt));
  ASSERT_EQ(works.size(), 2u) << "T = 1 and 7; nothing at T = 0";
  for (const auto& c : works) {
    EXPECT_EQ(c.status, CaseStatus::kPass) << c.detail;
    EXPECT_EQ(c.scenario, "padding");
    EXPECT_EQ(c.oracle, "reference");
    ASSERT_TRUE(c.rel_err.has_value());
  }
  int ran = 0;
  for (const auto& c : suite.run(r.find("fixture_ignores_accumulate"), pf, opt)) {
    if (c.stage == "run") {
      EXPECT_NE(c.status, CaseStatus::kFail) << c.detail;
    }
    if (c.stage != "accumulate") continue;
    ++ran;
    EXPECT_EQ(c.status, CaseStatus::kFail);
    EXPECT_THAT(c.detail, testing::HasSubstr("exceeds tolerance"));
  }
  EXPECT_EQ(ran, 2);
  const auto example = build_registry().find("example_cpu");  // declares no accumulate
  ASSERT_NE(example, nullptr);
  ASSERT_FALSE(example->info().accumulates());
  EXPECT_TRUE(accumulate_cases(suite.run(example, pf, opt)).empty());
}

// How many `run` cases there are (those of an empty batch too where `empty_too`), after checking
// that each is an error whose detail names `what`.
int run_errors_naming(const std::vector<CaseResult>& cases, const std::string& what,
                      bool empty_too) {
  int runs = 0;
  for (const auto& c : cases) {
    if (c.stage != "run" || (!empty_too && c.tokens == 0)) continue;
    ++runs;
    EXPECT_EQ(c.status, CaseStatus::kError) << c.detail;
    EXPECT_THAT(c.detail, testing::HasSubstr(what));
  }
  return runs;
}

// A plugin that writes one row past its output is an error naming the overrun at every batch size,
// T = 0 included (the bytes after the output are a guard, checked after each run); before, it
// passed, or corrupted the heap and the run ended without a report.
TEST(ConformanceSuite, NamesAPluginThatWritesPastItsOutput) {
  const Registry r = registry_of({build_plugin_dir(), fixture_dir("writes_past_output")});
  const Conformance suite(r.find("reference"));
  ConformanceOptions opt;
  opt.seed = suite_seed();
  const auto cases = suite.run(r.find("fixture_writes_past_output"), softmax_silu({0, 5}), opt);
  EXPECT_EQ(run_errors_naming(cases,
                              "plugin 'fixture_writes_past_output' wrote past the end of "
                              "the output",
                              true),
            8)
      << "T = 0 and 5 on each of the four scenarios";
}

// An oracle's output that is not finite (a row it left unwritten) is the oracle's error: the case
// is an error naming the oracle and the element, never a failure of the plugin checked. (The GPU
// oracle of a gpu_sized problem: the fixture; the plugin checked is a correct device one.)
TEST(ConformanceSuite, AnOracleFaultIsAnErrorNotThePluginsFailure) {
  const Registry r =
      registry_of({build_plugin_dir(), fixture_dir("device_like"), fixture_dir("nan_last_row")});
  const Conformance suite(r.find("reference"));
  const auto cases = suite.run(r.find("fixture_device_like"), gpu_sized_small(),
                               gpu_sized_options(r.find("fixture_nan_last_row")));
  EXPECT_EQ(run_errors_naming(cases,
                              "the oracle 'fixture_nan_last_row' gave nan at token 4 column 0: "
                              "an oracle error",
                              false),
            4)
      << "T = 5 on each of the four scenarios";
}

// A problem file that would check nothing (no scenario, no token count) or let anything pass (an
// infinite tolerance) is refused, naming the key.
TEST(ConformanceSuite, AProblemFileThatChecksNothingIsRefused) {
  const std::string dir = testing::TempDir();
  const std::string problem =
      "problem: {experts: 8, top_k: 2, hidden: 64, intermediate: 32, max_tokens: 4}\n";
  const auto write = [&](const std::string& name, const std::string& extra) {
    const std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::trunc) << problem << extra;
    return path;
  };
  expect_error([&] { load_problem_file(write("no_scenarios.yaml", "scenarios: []\n")); },
               MOE_STATUS_CONFIG_ERROR, {"no_scenarios.yaml:2:", "scenarios is an empty list"});
  expect_error([&] { load_problem_file(write("no_tokens.yaml", "tokens: []\n")); },
               MOE_STATUS_CONFIG_ERROR, {"no_tokens.yaml:2:", "tokens is an empty list"});
  expect_error([&] { load_problem_file(write("inf_tolerance.yaml", "tolerance: .inf\n")); },
               MOE_STATUS_CONFIG_ERROR, {"tolerance must be finite and > 0, got inf"});
}

// "-1 = skip": the suite gives every skipped slot (one_expert's other columns, padding rows) a
// weight of 1000, so a plugin that runs -1 as an expert with its weight fails there, where the
// routing's own zero weight hid it. Scenarios without skipped slots still pass.
TEST(ConformanceSuite, FailsAPluginThatWeighsSkippedSlots) {
  const Registry r = registry_of({build_plugin_dir(), fixture_dir("weighs_skipped_slots")});
  const Conformance suite(r.find("reference"));
  ConformanceOptions opt;
  opt.seed = suite_seed();
  std::set<std::string> failed;
  for (const auto& c : suite.run(r.find("fixture_weighs_skipped_slots"), softmax_silu({5}), opt)) {
    if (c.stage != "run") continue;
    if (c.scenario == "one_expert" || c.scenario == "padding") {
      EXPECT_EQ(c.status, CaseStatus::kFail) << c.scenario << ": " << c.detail;
      failed.insert(c.scenario);
    } else {
      EXPECT_EQ(c.status, CaseStatus::kPass) << c.scenario << ": " << c.detail;
    }
  }
  EXPECT_EQ(failed, (std::set<std::string>{"one_expert", "padding"}));
}

// A problem file's ep_map is the caller's map (moe_problem.ep_map decides, docs/design.md §7): a
// plugin that takes local ids from the placement alone passes a placement's own map and fails
// ep_linear_own_map, whose local experts are in reverse order.
TEST(ConformanceSuite, FailsAPluginThatIgnoresTheCallersEpMap) {
  const Registry r = registry_of({build_plugin_dir(), fixture_dir("ignores_ep_map")});
  const Conformance suite(r.find("reference"));
  ConformanceOptions opt;
  opt.seed = suite_seed();
  auto fails = [&](const char* file) {
    int failed = 0, passed = 0;
    for (const auto& c :
         suite.run(r.find("fixture_ignores_ep_map"), load_problem_file(source_path(file)), opt)) {
      if (c.stage != "run" || c.tokens == 0) continue;
      failed += c.status == CaseStatus::kFail;
      passed += c.status == CaseStatus::kPass;
    }
    return std::pair(failed, passed);
  };
  EXPECT_EQ(fails("configs/problems/ep_linear.yaml").first, 0);
  const auto [failed, passed] = fails("configs/problems/ep_linear_own_map.yaml");
  EXPECT_GT(failed, 0);
  const ProblemFile own = load_problem_file(source_path("configs/problems/ep_linear_own_map.yaml"));
  ASSERT_EQ(own.problem.ep_map(), (std::vector<int32_t>{-1, -1, -1, -1, 3, 2, 1, 0}));
}

// A problem file's ep_map is checked as a caller's map is: length, values, one expert a local id.
TEST(ConformanceSuite, AProblemFilesEpMapIsValidated) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "moe_ep_map_files";
  std::filesystem::create_directories(dir);
  auto write = [&](const char* name, const char* map) {
    std::ofstream(dir / name) << "problem: {experts: 4, top_k: 1, hidden: 64, intermediate: 32, "
                                 "ep_placement: linear, ep_size: 2, ep_rank: 0}\nep_map: "
                              << map << "\n";
    return (dir / name).string();
  };
  expect_error([&] { load_problem_file(write("short.yaml", "[0, 1]")); }, MOE_STATUS_CONFIG_ERROR,
               {"ep_map must be a list of experts=4 local ids"});
  expect_error([&] { load_problem_file(write("twice.yaml", "[0, 0, -1, -1]")); },
               MOE_STATUS_CONFIG_ERROR, {"both local expert 0"});
  expect_error([&] { load_problem_file(write("below.yaml", "[0, 1, -2, -1]")); },
               MOE_STATUS_CONFIG_ERROR, {"ep_map entries are local ids or -1, not -2"});
  EXPECT_EQ(load_problem_file(write("good.yaml", "[-1, -1, 1, 0]")).problem.ep_map(),
            (std::vector<int32_t>{-1, -1, 1, 0}));
}

// A plugin that routes in run() is checked so on the accumulate scenario (padding) and on ties,
// where a tie-break of its own would show; random logits never tie.
TEST(ConformanceSuite, RoutesInRunOnPaddingAndOnTies) {
  const auto example = build_registry().find("example_cpu");  // an SDK backend: it routes in run
  ASSERT_NE(example, nullptr);
  ASSERT_TRUE(example->info().routes_in_run());
  const Conformance suite(build_registry().find("reference"));
  ConformanceOptions opt;
  opt.seed = suite_seed();
  std::set<std::string> scenarios;
  for (const auto& c : suite.run(example, softmax_silu({5}), opt)) {
    if (c.stage != "route_in_run") continue;
    EXPECT_EQ(c.status, CaseStatus::kPass) << c.scenario << ": " << c.detail;
    scenarios.insert(c.scenario);
  }
  EXPECT_EQ(scenarios, (std::set<std::string>{"padding", "ties"}));
}

TEST(ConformanceReport, CountsEmptyBatchesAndTheReferenceAgainstItselfApartFromPasses) {
  const Registry& reg = build_registry();
  const Conformance suite(reg.find("reference"));
  ConformanceOptions opt;
  opt.seed = suite_seed();
  const auto self = summarize(suite.run(reg.find("reference"), softmax_silu(), opt));
  EXPECT_EQ(self.pass, 0);
  EXPECT_GT(self.self, 0);
  EXPECT_GT(self.empty, 0);
  const auto cases = suite.run(reg.find("example_cpu"), softmax_silu(), opt);
  const auto real = summarize(cases);
  EXPECT_GT(real.pass, 0);
  EXPECT_EQ(real.self, 0);
  EXPECT_GT(real.empty, 0);
  for (const auto& c : cases) {
    if (c.tokens != 0) continue;
    EXPECT_STREQ(counted_as(c), "empty");
    EXPECT_FALSE(c.rel_err.has_value()) << "T = 0 measures nothing";
  }
  const auto json = to_json(cases);
  EXPECT_EQ(json["summary"]["pass"], real.pass);
  EXPECT_EQ(json["summary"]["empty"], real.empty);
}

TEST(ConformanceReport, EachCaseNamesTheProblemAndThePlugin) {
  const Registry& reg = build_registry();
  const Conformance suite(reg.find("reference"));
  const auto example = reg.find("example_cpu");
  const auto cases = suite.run(example, softmax_silu({3}), {});
  ASSERT_FALSE(cases.empty());
  const auto json = to_json(cases)["cases"][0];
  EXPECT_EQ(json["params"]["experts"], 8);
  EXPECT_EQ(json["params"]["top_k"], 2);
  EXPECT_EQ(json["params"]["format"], "bf16");
  EXPECT_EQ(json["params"]["input_format"], "bf16");  // resolved from default
  EXPECT_EQ(json["params"]["activation"], "silu_mul");
  EXPECT_EQ(json["params"]["routing"], "softmax_topk");
  EXPECT_EQ(json["tokens"], 3);
  EXPECT_EQ(json["plugin_path"], example->path().string());
  EXPECT_EQ(json["plugin_version"], example->info().version);
  EXPECT_EQ(json["plugin_abi"], std::to_string(MOE_ABI_VERSION_MAJOR) + "." +
                                    std::to_string(MOE_ABI_VERSION_MINOR));  // built with today's
}

TEST(ConformanceReport, AFailingOutputRecordsItsWorstElementAndMaxAbsoluteError) {
  const Registry r = registry_of({build_plugin_dir(), fixture_dir("swaps_gate_up")});
  const Conformance suite(r.find("reference"));
  ConformanceOptions opt;
  opt.seed = suite_seed();
  const auto cases = suite.run(r.find("fixture_swaps_gate_up"), softmax_silu({5}), opt);
  int failed = 0;
  for (const auto& c : cases) {
    if (c.status != CaseStatus::kFail) continue;
    ++failed;
    ASSERT_TRUE(c.worst && c.rel_err && c.max_abs_err);
    EXPECT_LT(c.worst->token, 5);
    EXPECT_LT(c.worst->column, 200);
    EXPECT_DOUBLE_EQ(std::abs(c.worst->got - c.worst->want), *c.max_abs_err);
    EXPECT_THAT(c.detail, testing::HasSubstr(fmt::format("worst at token {} column {}",
                                                         c.worst->token, c.worst->column)));
    const auto json = to_json({c})["cases"][0];
    EXPECT_EQ(json["worst"]["token"], c.worst->token);
    EXPECT_EQ(json["max_abs_err"], *c.max_abs_err);
  }
  EXPECT_GT(failed, 0);
}

TEST(ConformanceReport, APluginThatThrowsGivesErrorsWithNoErrorValue) {
  const Registry r = registry_of({build_plugin_dir(), fixture_dir("throws")});
  const Conformance suite(r.find("reference"));
  const auto cases = suite.run(r.find("fixture_throws"), softmax_silu(), {});
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    EXPECT_EQ(c.status, CaseStatus::kError) << c.stage << " T=" << c.tokens;
    EXPECT_THAT(c.detail, testing::HasSubstr("deliberate"));
  }
  const auto json = to_json(cases);
  EXPECT_EQ(json["summary"]["error"], static_cast<int>(cases.size()));
  EXPECT_EQ(json["summary"]["fail"], 0);
  EXPECT_TRUE(json["cases"][0]["rel_err"].is_null());
  EXPECT_TRUE(json["cases"][0]["ms"].is_null());
}

TEST(ConformanceReport, APrepareFailureIsAnErrorOfStagePrepare) {
  const Registry r = registry_of({build_plugin_dir(), fixture_dir("prepare_fails")});
  const Conformance suite(r.find("reference"));
  const auto cases = suite.run(r.find("conformance_prepare_fails"), softmax_silu(), {});
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].stage, "prepare");
  EXPECT_EQ(cases[0].status, CaseStatus::kError);
  EXPECT_THAT(cases[0].detail, testing::HasSubstr("deliberate failure in prepare"));
}

TEST(ConformanceReport, SkipsAndErrorsHaveNullErrorsWhateverTheFieldsHold) {
  std::vector<CaseResult> cases(2);
  cases[0].status = CaseStatus::kSkip;
  cases[1].status = CaseStatus::kError;
  for (auto& c : cases) c.rel_err = c.max_abs_err = 0.0;
  const auto json = to_json(cases);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(json["cases"][i]["rel_err"].is_null());
    EXPECT_TRUE(json["cases"][i]["max_abs_err"].is_null());
  }
  EXPECT_EQ(json["summary"]["skip"], 1);
  EXPECT_EQ(json["summary"]["error"], 1);
}

TEST(ConformanceSuite, OnlyScenarioAndTokensReplayTheSameCase) {
  const Registry& reg = build_registry();
  const Conformance suite(reg.find("reference"));
  ConformanceOptions opt;
  opt.seed = suite_seed();
  const auto all = suite.run(reg.find("example_cpu"), softmax_silu({1, 5}), opt);
  opt.only_scenario = Scenario::kTies;
  opt.only_tokens = 5;
  const auto one = suite.run(reg.find("example_cpu"), softmax_silu({1, 5}), opt);
  ASSERT_FALSE(one.empty());
  for (const auto& c : one) {
    EXPECT_EQ(c.scenario, "ties");
    EXPECT_EQ(c.tokens, 5);
    const auto same = std::find_if(all.begin(), all.end(), [&](const CaseResult& a) {
      return a.stage == c.stage && a.scenario == c.scenario && a.tokens == c.tokens;
    });
    ASSERT_NE(same, all.end());
    EXPECT_EQ(same->seed, c.seed);
    EXPECT_EQ(same->rel_err, c.rel_err);
  }
}

TEST(ConformanceReport, CompareOutputsFindsTheWorstElement) {
  HostTensor out(MOE_DTYPE_F64, {2, 3}), ref(MOE_DTYPE_F64, {2, 3});
  for (int i = 0; i < 6; ++i) out.data<double>()[i] = ref.data<double>()[i] = i;
  out.data<double>()[4] = 10.0;
  const auto c = compare_outputs(out, ref);
  EXPECT_EQ(c.worst.token, 1);
  EXPECT_EQ(c.worst.column, 1);
  EXPECT_EQ(c.worst.got, 10.0);
  EXPECT_EQ(c.worst.want, 4.0);
  EXPECT_EQ(c.max_abs_err, 6.0);
  EXPECT_DOUBLE_EQ(c.rel_err, relative_l2(out, ref));
}

}  // namespace
}  // namespace moe::test
