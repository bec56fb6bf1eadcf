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

ProblemFile load_problem_file(const std::string& path);
std::vector<ProblemFile> load_problem_dir(const std::string& dir);  // *.yaml, sorted

enum class CaseStatus { kPass, kFail, kSkip };
const char* case_status_name(CaseStatus s);

struct CaseResult {
  std::string plugin, problem, scenario, stage;  // stage: "support", "route" or "run"
  std::string oracle;  // what the case was compared with: run: the reference or the GPU oracle;
                       // route: the reference; support: "" (nothing compared)
  int64_t tokens = 0;
  uint64_t seed = 0;
  CaseStatus status = CaseStatus::kSkip;
  std::string detail;  // the reason for a skip or a failure
  double rel_err = 0, tolerance = 0, ms = 0;
};

struct ConformanceOptions {
  uint64_t seed = 0;  // inputs are drawn from mix_seed(seed, problem/tokens/scenario)
  bool include_gpu_sized = false;
  // The oracle of gpu_sized problems (`moe conformance --gpu-sized` loads "gpu_oracle"); it
  // routes and runs them in place of the reference. Null, or unable to take a problem: those
  // problems are skips naming why. Small problems always use the reference.
  std::shared_ptr<const Plugin> gpu_oracle;
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

nlohmann::json to_json(const std::vector<CaseResult>& results);

}  // namespace moe
