// moe conformance [--plugin PATH]... [--problems DIR] [--report FILE.json] [--gpu-sized]
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "commands.hpp"
#include "moe/conformance.hpp"
#include "moe/sdk/error.hpp"

namespace moe::tool {

void add_conformance(CLI::App& app, Discovery& d) {
  auto* cmd = app.add_subcommand(
      "conformance",
      "Run plugins against the reference on every problem file (gpu_sized ones against the "
      "gpu_oracle plugin): routing exactly, outputs by relative L2 error; unsupported problems "
      "are skips with the reason");
  static std::vector<std::string> plugins;
  static std::string problems = "configs/problems", report;
  static uint64_t seed = 0;
  static bool gpu_sized = false;
  cmd->add_option("--plugin", plugins,
                  "Plugin library to test (repeatable); default: every plugin found")
      ->check(CLI::ExistingFile);
  cmd->add_option("--problems", problems, "Directory of problem files")->capture_default_str();
  cmd->add_option("--report", report, "Write a JSON report here");
  cmd->add_option("--seed", seed, "Seed of the random inputs (default: fresh, printed)");
  cmd->add_flag("--gpu-sized", gpu_sized,
                "Also run the problems marked gpu_sized (model shapes): device-memory plugins "
                "against the gpu_oracle plugin");
  cmd->callback([&d] {
    Discovery with_files = d;
    with_files.plugin_files = plugins;
    const Registry r = with_files.discover();
    ConformanceOptions opt;
    opt.seed = seed ? seed : std::random_device{}();
    opt.include_gpu_sized = gpu_sized;
    if (gpu_sized) {
      opt.gpu_oracle = r.find("gpu_oracle");
      if (opt.gpu_oracle == nullptr)
        std::cout << "no gpu_oracle plugin (it is built with CUDA): gpu_sized problems are "
                     "skipped\n";
    }
    const auto reference = r.find("reference");
    const Conformance suite(reference);
    std::vector<std::shared_ptr<Plugin>> targets;
    for (const auto& file : plugins) {
      for (const auto& p : r.plugins())
        if (std::filesystem::equivalent(p->path(), file)) targets.push_back(p);
    }
    if (plugins.empty()) targets = r.plugins();
    const auto files = load_problem_dir(problems);
    std::cout << fmt::format("seed {} | {} plugin(s) x {} problem(s)\n", opt.seed, targets.size(),
                             files.size());
    std::vector<CaseResult> all;
    for (const auto& plugin : targets) {
      for (const auto& pf : files) {
        for (auto& c : suite.run(plugin, pf, opt)) {
          if (c.stage == "support")
            std::cout << fmt::format("{:<4} {} / {}: {}\n", case_status_name(c.status), c.plugin,
                                     c.problem, c.detail);
          else if (c.status != CaseStatus::kPass)
            std::cout << fmt::format("{:<4} {} / {} {} T={} {} vs {} (case seed {}): {}\n",
                                     case_status_name(c.status), c.plugin, c.problem, c.stage,
                                     c.tokens, c.scenario, c.oracle, c.seed, c.detail);
          all.push_back(std::move(c));
        }
      }
    }
    const auto json = to_json(all);
    std::cout << fmt::format("pass {}  fail {}  skip {}\n", json["summary"]["pass"].get<int>(),
                             json["summary"]["fail"].get<int>(),
                             json["summary"]["skip"].get<int>());
    if (!report.empty()) {
      nlohmann::json doc = json;
      doc["seed"] = opt.seed;
      std::ofstream(report) << doc.dump(2) << "\n";
    }
    if (json["summary"]["fail"].get<int>() > 0) exit_code() = kExitMismatch;
  });
}

}  // namespace moe::tool
