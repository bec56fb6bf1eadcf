#include "loading/plugin_scanner.hpp"

#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "loading/scan_json.hpp"
#include "moe/sdk/error.hpp"

#ifndef MOE_INSTALL_LIBEXEC_DIR_FULL
#define MOE_INSTALL_LIBEXEC_DIR_FULL ""
#endif
#ifndef MOE_SCANNER_FROM_INSTALLED_BIN
#define MOE_SCANNER_FROM_INSTALLED_BIN "../libexec/moe_registry"
#endif

namespace fs = std::filesystem;

namespace moe::detail {
namespace {

constexpr const char* kScannerName = "moe-plugin-scanner";
constexpr double kDefaultTimeoutS = 10;

bool is_executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0;
}

double timeout_from_env() {
  const char* env = std::getenv("MOE_PLUGIN_SCAN_TIMEOUT_S");
  if (env == nullptr || *env == '\0') return kDefaultTimeoutS;
  char* end = nullptr;
  const double s = std::strtod(env, &end);
  MOE_CHECK(end != env && *end == '\0' && std::isfinite(s) && s > 0, MOE_STATUS_CONFIG_ERROR,
            "MOE_PLUGIN_SCAN_TIMEOUT_S='{}' is not a positive number of seconds", env);
  return s;
}

// Where a scanner may be, in order: beside the executable (the build tree's bin/), the install's
// libexec directory relative to the executable (an installed bin/, wherever the prefix went),
// and the libexec directory this core was configured to be installed in.
std::vector<fs::path> scanner_candidates() {
  std::vector<fs::path> out;
  boost::dll::fs::error_code ec;
  const fs::path exe_dir = boost::dll::program_location(ec).parent_path();
  if (!ec) {
    out.push_back(exe_dir / kScannerName);
    out.push_back(exe_dir / MOE_SCANNER_FROM_INSTALLED_BIN / kScannerName);
  }
  if (*MOE_INSTALL_LIBEXEC_DIR_FULL)
    out.push_back(fs::path(MOE_INSTALL_LIBEXEC_DIR_FULL) / kScannerName);
  return out;
}

// The library as the scanner's argument: absolute, so that a relative name starting with '-' is
// never read as an option (with no working directory, "./" does the same).
std::string library_argument(const fs::path& file) {
  std::error_code ec;
  const fs::path abs = fs::absolute(file, ec);
  return ec ? (fs::path(".") / file).string() : abs.string();
}

std::string last_line(const std::string& text) {
  std::string line;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) line = l;
  return line;
}

}  // namespace

std::shared_ptr<PluginScanner> PluginScanner::find(const DiscoveryOptions& options) {
  using Scan = DiscoveryOptions::Scan;
  if (options.scan == Scan::kOff) return nullptr;
  const double timeout_s = timeout_from_env();
  std::string named = options.scanner;
  const char* source = "DiscoveryOptions::scanner";
  if (named.empty()) {
    if (const char* env = std::getenv("MOE_PLUGIN_SCANNER"); env && *env) {
      named = env;
      source = "MOE_PLUGIN_SCANNER";
    }
  }
  if (!named.empty()) {
    MOE_CHECK(is_executable(named), MOE_STATUS_CONFIG_ERROR,
              "{}='{}' is not an executable file: no plugin scanner to run", source, named);
    return std::make_shared<PluginScanner>(named, timeout_s);
  }
  const std::vector<fs::path> candidates = scanner_candidates();
  for (const auto& c : candidates)
    if (is_executable(c)) return std::make_shared<PluginScanner>(c.lexically_normal(), timeout_s);
  std::string looked;
  for (const auto& c : candidates) looked += (looked.empty() ? "" : ", ") + c.string();
  MOE_CHECK(options.scan != Scan::kRequired, MOE_STATUS_CONFIG_ERROR,
            "no plugin scanner found (looked for {}); set MOE_PLUGIN_SCANNER", looked);
  spdlog::warn(
      "no plugin scanner found (looked for {}): plugin libraries are loaded in this process "
      "unchecked, so one that crashes or hangs takes the process with it; set MOE_PLUGIN_SCANNER",
      looked);
  return nullptr;
}

PluginScanner::PluginScanner(fs::path executable, double timeout_s)
    : executable_(std::move(executable)), timeout_s_(timeout_s) {
  if (const auto file = ScanCache::default_file())
    cache_.emplace(*file, scan_identity(executable_));
}

std::vector<ScanResult> PluginScanner::scan(const std::vector<fs::path>& files) {
  std::vector<ScanResult> results(files.size());
  std::vector<size_t> todo;
  std::vector<std::vector<std::string>> argvs;
  // The scanner dies with this process (PR_SET_PDEATHSIG), and exits at once when this process
  // is gone before it could ask for that. (The signal follows the thread that spawned it: this
  // one, which run_processes keeps until every child has ended.)
  const std::string parent = std::to_string(getpid());
  for (size_t i = 0; i < files.size(); ++i) {
    const std::optional<ScanKey> key = scan_key(files[i]);
    if (cache_ && key) {
      if (auto info = cache_->find(*key)) {
        spdlog::debug("{}: scan result from the cache", files[i].string());
        results[i] = ScanResult{true, std::move(*info), MOE_STATUS_OK, "", key};
        continue;
      }
    }
    results[i].key = key;
    todo.push_back(i);
    argvs.push_back({executable_.string(), "--parent-pid", parent, library_argument(files[i])});
  }
  const int parallel = int(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  const std::vector<ProcessResult> runs = run_processes(argvs, timeout_s_, parallel);
  for (size_t t = 0; t < todo.size(); ++t) {
    const size_t i = todo[t];
    std::optional<ScanKey> key = std::move(results[i].key);
    results[i] = interpret(files[i], runs[t]);
    // The answer is about the file the scanner opened: only if that is still the file of the key
    // can it be cached, or trusted.
    if (results[i].loadable && !(key && same_file(*key, files[i]))) {
      results[i] = ScanResult{};
      results[i].reason = fmt::format(
          "{}: changed while the plugin scanner was reading it; not loaded", files[i].string());
    }
    results[i].key = std::move(key);
    if (cache_ && results[i].loadable) cache_->put(*results[i].key, results[i].info);
  }
  if (cache_) cache_->save();
  return results;
}

ScanResult PluginScanner::interpret(const fs::path& file, const ProcessResult& p) const {
  const std::string where = file.string(), scanner = executable_.string();
  for (std::istringstream in(p.err); !in.eof();) {
    std::string line;
    std::getline(in, line);
    if (!line.empty()) spdlog::debug("plugin scanner, {}: {}", where, line);
  }
  ScanResult r;
  r.status = MOE_STATUS_INTERNAL;
  if (!p.start_error.empty()) {
    r.reason = fmt::format("{}: the plugin scanner {} could not be started: {}", where, scanner,
                           p.start_error);
  } else if (p.timed_out) {
    r.reason = fmt::format(
        "{}: timed out after {:g} s in the plugin scanner (a hang in a static "
        "constructor, moe_plugin_get_api, init or get_info?); not loaded",
        where, timeout_s_);
  } else if (WIFSIGNALED(p.wait_status)) {
    r.reason = fmt::format(
        "{}: killed by {} in the plugin scanner (while loading it, in init or "
        "get_info); not loaded",
        where, signal_name(WTERMSIG(p.wait_status)));
  } else if (!WIFEXITED(p.wait_status) || WEXITSTATUS(p.wait_status) != 0) {
    const std::string tail = last_line(p.err);
    r.reason =
        fmt::format("{}: the plugin scanner {} exited with status {} without a result{}{}", where,
                    scanner, WEXITSTATUS(p.wait_status), tail.empty() ? "" : ": ", tail);
  } else {
    try {
      const nlohmann::json j = nlohmann::json::parse(p.out);
      const int protocol = j.at("protocol").get<int>();
      if (protocol != kScanProtocol) {
        r.reason =
            fmt::format("{}: the plugin scanner {} answers in protocol {}, this core reads {}",
                        where, scanner, protocol, kScanProtocol);
      } else if (j.at("ok").get<bool>()) {
        r.loadable = true;
        r.status = MOE_STATUS_OK;
        r.info = info_from_json(j.at("info"));
      } else {
        r.status = static_cast<moe_status>(j.at("status").get<int32_t>());
        if (r.status == MOE_STATUS_OK) r.status = MOE_STATUS_INTERNAL;
        r.reason = j.at("error").get<std::string>();
      }
    } catch (const nlohmann::json::exception& e) {
      r.loadable = false;
      r.reason = fmt::format("{}: the plugin scanner {} gave an unreadable result ({})", where,
                             scanner, e.what());
    }
  }
  return r;
}

}  // namespace moe::detail
