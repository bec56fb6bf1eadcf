// The cross-backend conformance suite (docs/design.md §7): any plugin against the reference,
// driven only through the C ABI. The same code runs under ctest and `moe conformance`.
// Model-sized problems (gpu_sized) are checked against a GPU oracle instead: the reference's
// semantics with fp32 cuBLAS GEMMs (plugins/gpu_oracle), since the CPU reference would take hours.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "moe/checkpoint.hpp"
#include "moe/inputs.hpp"
#include "moe/plugin.hpp"
#include "moe/sdk/problem.hpp"

namespace moe {

// A problem file under configs/problems/:
//   problem: {...}            # as in a config
//   tokens: [0, 1, 7, 64]     # batch sizes to test
//   tolerance: 1.0e-2         # relative L2 bound of the output (default by format)
//   scenarios: [random, ties, padding, one_expert]   # default: all
//   gpu_sized: false          # true: model shapes, skipped unless asked for; device-memory
//                             # plugins only, against ConformanceOptions::gpu_oracle
//   checkpoint: {convention: gpt_oss, interleaved_gate_up: false}
//                             # the plugin gets weights that went through a checkpoint convention
//                             # (export_layer -> safetensors -> load_layer); the reference the
//                             # canonical ones, so an adapter or layout bug shows as a mismatch
struct ProblemFile {
  std::string name;  // file stem
  std::string path;
  Problem problem;
  std::vector<int64_t> tokens;
  double tolerance = 0;
  std::vector<Scenario> scenarios;
  bool gpu_sized = false;
  std::optional<CheckpointSpec> checkpoint;  // path and prefix unused: a temporary file
};

// Output tolerance when a problem file names none: 1e-2 for bf16, 2e-2 for quantised formats
// (one code of rounding difference in an activation is 6% for e4m3, so allow a few).
double default_tolerance(moe_format format);

// The bound one case is judged by: the file's tolerance, times kOneTokenFlipFactor for a
// one-token batch of a problem that re-quantises its intermediate (input_format other than bf16).
// At one token a single e4m3 code that GEMM noise moved across a rounding boundary is the whole
// comparison: up to ~6e-2 on the small problems (docs/design.md §7), which larger batches average
// away. A systematic error still shows at every other batch size.
inline constexpr double kOneTokenFlipFactor = 3.0;
double case_tolerance(const ProblemFile& pf, int64_t tokens);

ProblemFile load_problem_file(const std::string& path);
// *.yaml, sorted; a directory without any is refused (NOT_FOUND), an empty suite passing nothing
std::vector<ProblemFile> load_problem_dir(const std::string& dir);

// pass: compared and within bounds; fail: compared and wrong; skip: not run, with the reason;
// error: the plugin (or the oracle) raised an error instead of answering.
enum class CaseStatus { kPass, kFail, kSkip, kError };
const char* case_status_name(CaseStatus s);

// What a pass proves. The summary counts the lesser kinds apart from real passes, so a report
// cannot look better than the comparisons behind it.
enum class PassKind {
  kReal,
  kEmpty,  // T = 0: nothing was compared
  kSelf,   // the plugin is its own oracle (the reference judged against itself)
};

// The problem of a case, as the report records it (after normalisation: input_format resolved).
struct CaseProblem {
  int64_t experts = 0, top_k = 0, hidden = 0, intermediate = 0;
  std::string format, input_format, activation, routing;
};

// Where a failing output is furthest from the oracle's (a non-finite output: its first such
// element).
struct WorstElement {
  int64_t token = 0, column = 0;
  double got = 0, want = 0;
};

struct CaseResult {
  // stage: "support" (asked; nothing compared), "prepare", "route", "run", "accumulate" (the
  // run again onto a non-zero output, for plugins that declare ABI 1.4 accumulate) or
  // "route_in_run" (the batch from its router logits in one run call, for plugins that declare
  // ABI 1.6 routing in run: ids and weights against the reference's, output against the oracle)
  std::string plugin, problem, scenario, stage;
  std::string oracle;  // what the case was compared with: run: the reference or the GPU oracle;
                       // route: the reference; support and prepare: "" (nothing compared)
  std::string plugin_path, plugin_version, plugin_abi;  // the library under test, "MAJOR.MINOR"
  CaseProblem params;
  int64_t tokens = 0;
  uint64_t seed = 0;
  CaseStatus status = CaseStatus::kSkip;
  PassKind pass_kind = PassKind::kReal;  // of a pass
  std::string detail;                    // the reason for a skip, a failure or an error
  std::optional<double> rel_err;         // of a compared output (run stage), else none
  std::optional<double> max_abs_err;     // likewise
  std::optional<WorstElement> worst;     // of a failing output
  double tolerance = 0, ms = 0;
};

// Per-status counts; pass counts real passes only (PassKind::kReal).
struct ConformanceSummary {
  int pass = 0, fail = 0, error = 0, skip = 0, empty = 0, self = 0;
};
ConformanceSummary summarize(const std::vector<CaseResult>& results);
// The summary bucket of a case: "pass", "empty", "self", "fail", "error" or "skip".
const char* counted_as(const CaseResult& c);

struct ConformanceOptions {
  uint64_t seed = 0;  // inputs are drawn from mix_seed(seed, problem/tokens/scenario)
  bool include_gpu_sized = false;
  // The oracle of gpu_sized problems (`moe conformance --gpu-sized` loads "gpu_oracle"); it
  // routes and runs them in place of the reference. Null, or unable to take a problem: those
  // problems are skips naming why. Small problems always use the reference.
  std::shared_ptr<const Plugin> gpu_oracle;
  // Only these cases of a problem (`moe conformance --filter`); the seeds do not change, so a
  // filtered run replays the same inputs.
  std::optional<Scenario> only_scenario;
  std::optional<int64_t> only_tokens;
};

class Conformance {
 public:
  explicit Conformance(std::shared_ptr<const Plugin> reference);

  std::vector<CaseResult> run(const std::shared_ptr<const Plugin>& plugin, const ProblemFile& pf,
                              const ConformanceOptions& options) const;

 private:
  std::shared_ptr<const Plugin> reference_;
};

// ||out - ref||_2 / ||ref||_2 (||out||_2 when ref is zero); +inf if out has NaN or Inf.
double relative_l2(const HostTensor& out, const HostTensor& ref);

// relative_l2, the largest absolute difference and where it is, of an output [T, H] and the
// oracle's. A non-finite output gives +inf errors and its first non-finite element.
struct OutputComparison {
  double rel_err = 0, max_abs_err = 0;
  WorstElement worst;
};
OutputComparison compare_outputs(const HostTensor& out, const HostTensor& ref);

// {"summary": {pass, fail, error, skip, empty, self}, "cases": [...]}: every field of each case;
// rel_err, max_abs_err and ms are null where nothing was compared, "inf"/"nan" where not finite.
nlohmann::json to_json(const std::vector<CaseResult>& results);

}  // namespace moe
