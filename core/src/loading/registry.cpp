// Discovery (docs/design.md §2 rule 9): which libraries to try, in which order, and which to keep.
// Each library is first loaded by the plugin scanner in a child process (plugin_scanner.hpp); those
// it found usable are kept as Plugins made from its answer, which load here (deferred_load.hpp)
// only when a command first needs their table, so a bad library cannot take the caller down, and
// one that is not needed is never loaded. Without a scanner every library is loaded here at once
// (loader.cpp). Built-in names are pinned to the core's own plugin directory (builtins.hpp).
#include "moe/registry.hpp"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <cstdlib>
#include <set>

#include "loading/builtins.hpp"
#include "loading/deferred_load.hpp"
#include "loading/plugin_scanner.hpp"
#include "loading/scan_cache.hpp"
#include "moe/logging.hpp"
#include "moe/sdk/error.hpp"

#ifndef MOE_INSTALL_PLUGIN_DIR_FULL
#define MOE_INSTALL_PLUGIN_DIR_FULL ""
#endif

#ifndef MOE_PLUGIN_DIR_FROM_BIN
#define MOE_PLUGIN_DIR_FROM_BIN "../lib/moe_registry/plugins"
#endif

namespace fs = std::filesystem;

namespace moe {

std::vector<fs::path> plugin_files_in(const fs::path& dir, std::error_code& ec) {
  std::vector<fs::path> files;
  ec.clear();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;  // an entry that vanished or cannot be stat'ed is not a plugin
    if (it->is_regular_file(type_ec) && it->path().extension() == ".so")
      files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<fs::path> plugin_files_in(const fs::path& dir) {
  std::error_code ec;
  auto files = plugin_files_in(dir, ec);
  MOE_CHECK(!ec, MOE_STATUS_NOT_FOUND, "plugin directory '{}' cannot be read: {}", dir.string(),
            ec.message());
  return files;
}

std::vector<fs::path> default_plugin_dirs() {
  std::vector<fs::path> dirs;
  boost::dll::fs::error_code ec;
  const fs::path exe_dir = boost::dll::program_location(ec).parent_path();
  if (!ec) {
    dirs.push_back(exe_dir / ".." / "plugins");         // the build tree
    dirs.push_back(exe_dir / MOE_PLUGIN_DIR_FROM_BIN);  // an install, wherever its prefix moved
  }
  if (*MOE_INSTALL_PLUGIN_DIR_FULL) dirs.emplace_back(MOE_INSTALL_PLUGIN_DIR_FULL);
  std::vector<fs::path> existing;
  std::set<fs::path> seen;
  for (const auto& d : dirs) {
    std::error_code e;
    if (!fs::is_directory(d, e)) continue;
    const fs::path canon = fs::canonical(d, e);
    if (!e && seen.insert(canon).second) existing.push_back(canon);
  }
  return existing;
}

Registry Registry::discover(const DiscoveryOptions& options) {
  init_logging_from_env();
  Registry r;
  r.resolve_scanner(options);
  r.add_files({options.files.begin(), options.files.end()}, /*strict=*/true);
  for (const auto& dir : options.config_dirs) {
    std::error_code ec;
    const fs::file_status st = fs::status(dir, ec);
    MOE_CHECK(fs::exists(st), MOE_STATUS_NOT_FOUND,
              "plugin directory '{}' (from plugin_dirs) does not exist", dir);
    MOE_CHECK(fs::is_directory(st), MOE_STATUS_NOT_FOUND,
              "plugin directory '{}' (from plugin_dirs) is not a directory", dir);
    r.add_dir(dir);
  }
  if (options.use_env) {
    if (const char* env = std::getenv("MOE_PLUGIN_PATH"); env && *env) {
      std::string paths(env);
      size_t start = 0;
      while (start <= paths.size()) {
        const size_t end = std::min(paths.find(':', start), paths.size());
        const std::string dir = paths.substr(start, end - start);
        std::error_code ec;
        if (!dir.empty() && fs::is_directory(dir, ec)) {
          r.add_dir(dir);
        } else if (!dir.empty()) {
          spdlog::warn("MOE_PLUGIN_PATH entry '{}' is not a directory; ignored", dir);
        }
        start = end + 1;
      }
    }
  }
  if (options.use_default) {
    for (const auto& dir : r.core_dirs_) r.add_dir(dir);
  }
  return r;
}

void Registry::resolve_scanner(const DiscoveryOptions& options) {
  core_dirs_ = default_plugin_dirs();
  // A host program's own executable says nothing about where the installed core lives.
  // One given by the caller must exist, as plugin_dirs must; the environment's is a hint, like
  // MOE_PLUGIN_PATH's entries, and one that does not exist is ignored with a warning.
  std::string extra = options.core_plugin_dir;
  const bool explicit_dir = !extra.empty();
  if (const char* env = std::getenv("MOE_CORE_PLUGIN_DIR"); extra.empty() && env && *env)
    extra = env;
  if (!extra.empty()) {
    std::error_code ec;
    const fs::file_status st = fs::status(extra, ec);
    const char* problem = !fs::exists(st)         ? "does not exist"
                          : !fs::is_directory(st) ? "is not a directory"
                                                  : nullptr;
    MOE_CHECK(!explicit_dir || !problem, MOE_STATUS_NOT_FOUND,
              "core plugin directory '{}' (from core_plugin_dir) {}", extra, problem);
    const fs::path canon = problem ? fs::path() : fs::canonical(extra, ec);
    MOE_CHECK(!explicit_dir || !ec, MOE_STATUS_NOT_FOUND,
              "core plugin directory '{}' (from core_plugin_dir) cannot be resolved: {}", extra,
              ec.message());
    if (problem || ec)
      spdlog::warn("the core plugin directory '{}' (from MOE_CORE_PLUGIN_DIR) {}; ignored", extra,
                   problem ? problem : "cannot be resolved");
    else if (std::find(core_dirs_.begin(), core_dirs_.end(), canon) == core_dirs_.end())
      core_dirs_.insert(core_dirs_.begin(), canon);
  }
  scanner_ = detail::PluginScanner::find(options);
  scanner_resolved_ = true;
}

void Registry::add_dir(const fs::path& dir) {
  searched_.push_back(dir.string());
  std::error_code ec;
  const auto files = plugin_files_in(dir, ec);
  if (ec) {  // like a missing MOE_PLUGIN_PATH entry: the other directories still count
    spdlog::warn("plugin directory '{}' cannot be read ({}); ignored", dir.string(), ec.message());
    return;
  }
  add_files(files, /*strict=*/false);
}

void Registry::add_file(const fs::path& path, bool strict) {
  add_files({path}, strict);
}

void Registry::add_files(const std::vector<fs::path>& files, bool strict) {
  if (!scanner_resolved_) resolve_scanner({});  // a Registry made without discover()
  std::vector<fs::path> todo;
  std::set<fs::path> seen;  // the same file found twice is loaded once
  std::error_code ec;
  for (const auto& p : plugins_) seen.insert(fs::weakly_canonical(p->path(), ec));
  for (const auto& path : files)
    if (seen.insert(fs::weakly_canonical(path, ec)).second) todo.push_back(path);
  std::vector<detail::ScanResult> scans;
  if (scanner_) scans = scanner_->scan(todo);
  for (size_t i = 0; i < todo.size(); ++i) {
    const fs::path& path = todo[i];
    try {
      if (!scanner_) {
        add_plugin(load_plugin(path));
        continue;
      }
      const detail::ScanResult& scan = scans[i];
      if (!scan.loadable) throw Error(scan.status, scan.reason);
      // The answer holds for the file the scanner read: refuse one replaced since (and again
      // when it is loaded, deferred_load.cpp).
      MOE_CHECK(scan.key && detail::same_file(*scan.key, path), MOE_STATUS_INVALID_ARGUMENT,
                "{}: changed after the plugin scanner read it; not loaded (run again)",
                path.string());
      // Its claims are checked by add_plugin, before it is ever loaded into this process.
      add_plugin(std::make_shared<Plugin>(
          path, scan.info,
          std::make_shared<const detail::DeferredLoad>(detail::DeferredLoad{*scan.key})));
    } catch (const Error& e) {
      skipped_.push_back({path.string(), e.what()});
      spdlog::warn("skipped plugin library {}", e.what());
      if (strict) throw;
    }
  }
}

void Registry::check_claims(const fs::path& path, std::vector<std::string> names) const {
  for (const auto& n : names) {
    const std::string refusal = detail::builtin_claim_refusal(path, n, core_dirs_);
    MOE_CHECK(refusal.empty(), MOE_STATUS_INVALID_ARGUMENT, "{}", refusal);
  }
  for (const auto& existing : plugins_) {
    for (const auto& n : names) {
      MOE_CHECK(!existing->answers_to(n), MOE_STATUS_INVALID_ARGUMENT,
                "{}: duplicate plugin name '{}', already provided by {} (a name or alias belongs "
                "to the library found first)",
                path.string(), n, existing->path().string());
    }
  }
}

void Registry::add_plugin(std::shared_ptr<Plugin> plugin) {
  // The name first: a copy of a plugin is refused for its name, not for an alias.
  std::vector<std::string> names{plugin->name()};
  names.insert(names.end(), plugin->info().aliases.begin(), plugin->info().aliases.end());
  check_claims(plugin->path(), std::move(names));
  spdlog::debug("{} plugin '{}' from {}",
                plugin->loaded() ? "loaded" : "found (loaded on first use)", plugin->name(),
                plugin->path().string());
  plugins_.push_back(std::move(plugin));
}

std::shared_ptr<Plugin> Registry::find(std::string_view name) const {
  for (const auto& p : plugins_)
    if (p->answers_to(name)) return p;
  return nullptr;
}

std::shared_ptr<Plugin> Registry::oracle() const {
  // Only the pinned library can answer to a built-in name (check_claims). Whoever asks for the
  // oracle uses it: loaded now, so a failure names it here.
  if (auto p = find("reference")) {
    p->load();
    return p;
  }
  const fs::path home = detail::builtin_home("reference", core_dirs_);
  std::string dirs, state;
  for (const auto& d : core_dirs_) dirs += (dirs.empty() ? "" : ", ") + d.string();
  if (home.empty()) state = "which has no libmoe_reference.so";
  std::error_code ec;
  for (const auto& s : skipped_) {
    if (!home.empty() && fs::weakly_canonical(s.path, ec) == home)
      state = fmt::format("but {} was skipped: {}", home.string(), s.reason);
  }
  if (state.empty()) {
    state = fmt::format("but the directories searched ({}) do not hold {}",
                        searched_.empty() ? "none" : fmt::format("{}", fmt::join(searched_, ", ")),
                        home.string());
  }
  MOE_FAIL(MOE_STATUS_NOT_FOUND,
           "the oracle plugin 'reference' is not loaded: it loads only from the core's plugin "
           "directory ({}), {}",
           dirs.empty() ? "none found" : dirs, state);
}

std::string Registry::names() const {
  std::string out;
  for (const auto& p : plugins_) {
    if (!out.empty()) out += ", ";
    out += p->name();
    if (!p->info().aliases.empty()) {
      out += " (";
      for (size_t i = 0; i < p->info().aliases.size(); ++i)
        out += (i ? ", " : "") + p->info().aliases[i];
      out += ")";
    }
  }
  return out.empty() ? "none" : out;
}

}  // namespace moe
