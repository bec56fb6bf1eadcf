// moe_host_conformance: `moe conformance --plugin LIB [--problems DIR] [--report FILE]` as a call
// (docs/design.md §7): every case counted, the JSON report written when asked for.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "handles.hpp"
#include "moe/conformance.hpp"

namespace moe::capi {
namespace {

namespace fs = std::filesystem;

void write_report(const std::string& path, const nlohmann::json& doc) {
  std::ofstream out(path, std::ios::trunc);
  MOE_CHECK(out.is_open(), MOE_STATUS_IO_ERROR, "cannot write the report '{}': {}", path,
            std::strerror(errno));
  out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  out.close();
  MOE_CHECK(!out.fail(), MOE_STATUS_IO_ERROR, "cannot write the report '{}': {}", path,
            std::strerror(errno));
}

// The registry's plugin loaded from `path` (added to the copy when it is not there yet).
std::shared_ptr<Plugin> plugin_at(Registry& registry, const std::string& path) {
  std::error_code ec;
  MOE_CHECK(fs::is_regular_file(path, ec), MOE_STATUS_NOT_FOUND,
            "plugin library '{}' does not exist", path);
  registry.add_file(path, /*strict=*/true);
  for (const auto& p : registry.plugins())
    if (fs::equivalent(p->path(), path, ec)) return p;
  MOE_FAIL(MOE_STATUS_NOT_FOUND,
           "plugin library '{}' was not kept: a plugin of the same name came first ({})", path,
           registry.names());
}

}  // namespace
}  // namespace moe::capi

using namespace moe::capi;  // NOLINT: the C entry points below are thin

extern "C" {

moe_status moe_host_conformance(const moe_host_registry* registry,
                                const moe_host_conformance_args* args,
                                moe_host_conformance_summary* summary) {
  return guarded([&] {
    const auto& r = deref(registry, "registry");
    const moe_host_conformance_args a =
        read_args(args, MOE_HOST_CONFORMANCE_ARGS_MIN_SIZE, "moe_host_conformance_args");
    moe::sdk::check_struct(summary, MOE_HOST_CONFORMANCE_SUMMARY_MIN_SIZE,
                           "moe_host_conformance_summary");
    MOE_CHECK(a.plugin_path != nullptr, MOE_STATUS_INVALID_ARGUMENT,
              "moe_host_conformance_args.plugin_path is NULL");
    const std::string problem_dir = a.problems_dir ? a.problems_dir : default_problem_dir();
    moe::Registry copy = r.registry;  // the library under test joins a copy, not the caller's
    const auto plugin = plugin_at(copy, a.plugin_path);

    moe::ConformanceOptions opt;
    opt.seed = a.seed ? a.seed : std::random_device{}();
    opt.include_gpu_sized = a.gpu_sized != 0;
    if (opt.include_gpu_sized) opt.gpu_oracle = copy.find("gpu_oracle");
    const moe::Conformance suite(copy.oracle());
    std::vector<moe::CaseResult> all;
    for (const auto& pf : moe::load_problem_dir(problem_dir)) {
      auto cases = suite.run(plugin, pf, opt);
      std::move(cases.begin(), cases.end(), std::back_inserter(all));
    }
    if (a.report_path != nullptr) {
      nlohmann::json doc = moe::to_json(all);
      doc["seed"] = opt.seed;
      doc["problems"] = problem_dir;
      write_report(a.report_path, doc);
    }
    const moe::ConformanceSummary s = moe::summarize(all);
    moe_host_conformance_summary out{};
    out.pass = s.pass;
    out.fail = s.fail;
    out.error = s.error;
    out.skip = s.skip;
    out.empty = s.empty;
    out.self = s.self;
    out.seed = opt.seed;
    moe::sdk::write_struct(summary, out);
  });
}

}  // extern "C"
