// moe conformance [--plugin PATH]... [--problems DIR] [--report FILE.json] [--gpu-sized]
//                 [--seed S] [--filter PLUGIN/PROBLEM[/SCENARIO[/TOKENS]]]
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "cli_numbers.hpp"
#include "commands.hpp"
#include "moe/conformance.hpp"
#include "moe/sdk/error.hpp"

// The problem set relative to the tool (set by the top-level CMakeLists.txt): in an install, and
// from the build tree's bin/ to the source tree.
#ifndef MOE_PROBLEMS_FROM_INSTALLED_BIN
#define MOE_PROBLEMS_FROM_INSTALLED_BIN "../share/moe_registry/problems"
#endif
#ifndef MOE_PROBLEMS_FROM_BUILD_BIN
#define MOE_PROBLEMS_FROM_BUILD_BIN "../../configs/problems"
#endif

namespace moe::tool {
namespace fs = std::filesystem;
namespace {

constexpr size_t kFailuresListedPerProblem = 3;

// The problem set when --problems is not given: the installed one beside the tool, else (the
// build tree's tool) the source tree's. Never a path relative to the current directory, so the
// tool gives the same answer wherever it is run from.
std::string default_problem_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  MOE_CHECK(!ec, MOE_STATUS_NOT_FOUND,
            "cannot find the conformance problem set: /proc/self/exe unreadable ({}); give "
            "--problems DIR",
            ec.message());
  std::vector<std::string> looked;
  for (const char* rel : {MOE_PROBLEMS_FROM_INSTALLED_BIN, MOE_PROBLEMS_FROM_BUILD_BIN}) {
    const fs::path dir = (exe.parent_path() / rel).lexically_normal();
    if (fs::is_directory(dir, ec)) return dir.string();
    looked.push_back(dir.string());
  }
  MOE_FAIL(MOE_STATUS_NOT_FOUND,
           "cannot find the conformance problem set: looked in {} (installed) and {} (build "
           "tree); give --problems DIR",
           looked[0], looked[1]);
}

// --filter PLUGIN/PROBLEM[/SCENARIO[/TOKENS]]: one plugin on one problem, optionally one case.
struct Filter {
  std::string plugin, problem;
  std::optional<Scenario> scenario;
  std::optional<int64_t> tokens;
};

Filter parse_filter(const std::string& text) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t slash = text.find('/', start);
    parts.push_back(text.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  const auto bad = [&](const std::string& why) {
    return Error(
        MOE_STATUS_INVALID_ARGUMENT,
        fmt::format("--filter '{}': {}; expected PLUGIN/PROBLEM[/SCENARIO[/TOKENS]]", text, why));
  };
  if (parts.size() < 2 || parts.size() > 4) throw bad("wrong number of parts");
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i].empty()) throw bad(fmt::format("part {} is empty", i + 1));
  Filter f{parts[0], parts[1], std::nullopt, std::nullopt};
  if (parts.size() > 2) {
    Scenario sc;
    if (!parse_scenario(parts[2], &sc))
      throw bad(fmt::format("'{}' is not one of random, ties, padding, one_expert", parts[2]));
    f.scenario = sc;
  }
  if (parts.size() > 3) {
    f.tokens = parse_integer(parts[3], 0);
    if (!f.tokens) throw bad(fmt::format("'{}' is not a token count", parts[3]));
  }
  return f;
}

void write_report(const std::string& path, const nlohmann::json& doc) {
  std::ofstream out(path, std::ios::trunc);
  out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  out.close();
  MOE_CHECK(!out.fail(), MOE_STATUS_IO_ERROR, "cannot write the report '{}': {}", path,
            std::strerror(errno));
}

std::string filter_of(const CaseResult& c) {
  if (c.stage == "support" || c.stage == "prepare") return c.plugin + "/" + c.problem;
  return fmt::format("{}/{}/{}/{}", c.plugin, c.problem, c.scenario, c.tokens);
}

// One line per plugin and problem: its verdict and counts (a whole-problem skip: the reason).
void print_progress(const std::string& plugin, const std::string& problem,
                    const std::vector<CaseResult>& cases) {
  const ConformanceSummary s = summarize(cases);
  if (cases.size() == 1 && cases[0].status == CaseStatus::kSkip) {
    std::cout << fmt::format("skip {} / {}: {}", plugin, problem, cases[0].detail) << std::endl;
    return;
  }
  std::string counts = fmt::format("{} pass, {} fail", s.pass, s.fail);
  if (s.error) counts += fmt::format(", {} error", s.error);
  if (s.skip) counts += fmt::format(", {} skip", s.skip);
  if (s.self) counts += fmt::format(", {} self (the plugin is its own oracle)", s.self);
  if (s.empty) counts += fmt::format(", {} empty (T=0)", s.empty);
  std::cout << fmt::format("{} {} / {}: {}", (s.fail + s.error) ? "FAIL" : "ok  ", plugin, problem,
                           counts)
            << std::endl;
}

// What failed, with the reason and the --filter that re-runs it: the first few cases of each
// plugin and problem (one bug tends to fail all of them alike), then how many more.
void print_failures(const std::vector<CaseResult>& all, uint64_t seed) {
  std::string lines, key;
  size_t listed = 0, more = 0;
  const auto close_group = [&] {
    if (more) lines += fmt::format("  ... and {} more of {}\n", more, key);
  };
  for (const auto& c : all) {  // grouped by plugin and problem, in the order they ran
    if (c.status != CaseStatus::kFail && c.status != CaseStatus::kError) continue;
    if (c.plugin + " / " + c.problem != key) {
      close_group();
      key = c.plugin + " / " + c.problem;
      listed = more = 0;
    }
    if (listed == kFailuresListedPerProblem) {
      ++more;
      continue;
    }
    ++listed;
    const std::string where =
        c.stage == "route" || c.stage == "run" || c.stage == "accumulate" ||
                c.stage == "route_in_run"
            ? fmt::format(" T={} {} vs {} (case seed {})", c.tokens, c.scenario, c.oracle, c.seed)
            : "";
    lines += fmt::format("{} {} {}{}: {}  [--filter {}]\n", case_status_name(c.status), key,
                         c.stage, where, c.detail, filter_of(c));
  }
  close_group();
  if (lines.empty()) return;
  std::cout << "\nfailed (--report FILE lists every case):\n"
            << lines
            << fmt::format("re-run one: moe conformance --seed {} [--plugin LIB] --filter ...\n",
                           seed);
}

// "pass N  fail M  skip K": fail counts errors too, so "fail 0" means nothing went wrong.
void print_summary(const ConformanceSummary& s) {
  std::string line = fmt::format("pass {}  fail {}", s.pass, s.fail + s.error);
  if (s.error) line += fmt::format(" ({} wrong, {} error)", s.fail, s.error);
  line += fmt::format("  skip {}", s.skip);
  if (s.empty || s.self)
    line += fmt::format("  | not counted as passes: {} empty (T=0), {} self (plugin = oracle)",
                        s.empty, s.self);
  std::cout << "\n" << line << std::endl;
}

}  // namespace

void add_conformance(CLI::App& app, Discovery& d) {
  auto* cmd = app.add_subcommand(
      "conformance",
      "Run plugins against the reference on every problem file (gpu_sized ones against the "
      "gpu_oracle plugin): routing exactly, outputs by relative L2 error; unsupported problems "
      "are skips with the reason");
  static std::vector<std::string> plugins;
  static std::string problems, report, filter_text;
  static uint64_t seed = 0;
  static bool gpu_sized = false;
  cmd->add_option("--plugin", plugins,
                  "Plugin library to test (repeatable); default: every plugin found")
      ->check(CLI::ExistingFile);
  cmd->add_option("--problems", problems,
                  "Directory of problem files; default: the installed set "
                  "(<exe>/" MOE_PROBLEMS_FROM_INSTALLED_BIN "), else the source tree's");
  cmd->add_option("--report", report, "Write a JSON report here");
  cmd->add_option("--seed", seed, "Seed of the random inputs (default: fresh, printed)")
      ->check(seed_value());
  cmd->add_option("--filter", filter_text,
                  "Only PLUGIN/PROBLEM[/SCENARIO[/TOKENS]] (with --seed: replays a case)");
  cmd->add_flag("--gpu-sized", gpu_sized,
                "Also run the problems marked gpu_sized (model shapes): device-memory plugins "
                "against the gpu_oracle plugin");
  cmd->callback([&d, cmd] {
    const std::optional<Filter> filter =
        filter_text.empty() ? std::nullopt : std::optional(parse_filter(filter_text));
    // Fails now, before a long run, if the report cannot be written.
    if (!report.empty()) check_writable(report, "--report");
    const std::string problem_dir = problems.empty() ? default_problem_dir() : problems;
    Discovery with_files = d;
    with_files.plugin_files = plugins;
    const Registry r = with_files.discover();
    ConformanceOptions opt;
    opt.seed = cmd->count("--seed") > 0 ? seed : std::random_device{}();  // 0 is a seed too
    opt.include_gpu_sized = gpu_sized;
    if (gpu_sized) {
      opt.gpu_oracle = r.find("gpu_oracle");
      if (opt.gpu_oracle == nullptr)
        std::cout << "no gpu_oracle plugin (it is built with CUDA): gpu_sized problems are "
                     "skipped\n";
    }
    const Conformance suite(r.oracle());
    std::vector<std::shared_ptr<Plugin>> targets;
    for (const auto& file : plugins)
      for (const auto& p : r.plugins())
        if (fs::equivalent(p->path(), file) &&
            std::find(targets.begin(), targets.end(), p) == targets.end())
          targets.push_back(p);  // a library given twice runs once
    if (plugins.empty()) targets = r.plugins();
    auto files = load_problem_dir(problem_dir);  // refuses a directory without problems
    if (filter) {
      opt.only_scenario = filter->scenario;
      opt.only_tokens = filter->tokens;
      std::erase_if(targets, [&](const auto& p) { return !p->answers_to(filter->plugin); });
      std::erase_if(files, [&](const auto& pf) { return pf.name != filter->problem; });
      MOE_CHECK(!targets.empty(), MOE_STATUS_NOT_FOUND, "--filter: no plugin named '{}' here",
                filter->plugin);
      MOE_CHECK(!files.empty(), MOE_STATUS_NOT_FOUND, "--filter: no problem file '{}.yaml' in {}",
                filter->problem, problem_dir);
    }
    std::cout << fmt::format("seed {} | {} plugin(s) x {} problem(s)\nproblems: {}\n", opt.seed,
                             targets.size(), files.size(), problem_dir);
    std::vector<CaseResult> all;
    for (const auto& plugin : targets) {
      for (const auto& pf : files) {
        auto cases = suite.run(plugin, pf, opt);
        print_progress(plugin->name(), pf.name, cases);
        std::move(cases.begin(), cases.end(), std::back_inserter(all));
      }
    }
    MOE_CHECK(!filter || !all.empty(), MOE_STATUS_NOT_FOUND,
              "--filter '{}': the problem has no such case (its tokens and scenarios are in "
              "the problem file)",
              filter_text);
    print_failures(all, opt.seed);
    const ConformanceSummary s = summarize(all);
    print_summary(s);
    if (!report.empty()) {
      nlohmann::json doc = to_json(all);
      doc["seed"] = opt.seed;
      doc["problems"] = problem_dir;
      if (filter) doc["filter"] = filter_text;
      write_report(report, doc);
      std::cout << "report: " << report << "\n";
    }
    if (s.fail + s.error > 0) exit_code() = kExitMismatch;
  });
}

}  // namespace moe::tool
