// Plugin discovery and loading (docs/design.md §2 rules 2, 8, 9): directories from the config,
// then MOE_PLUGIN_PATH, then the install's plugin directory. Each library is first loaded by the
// plugin scanner, a child process, so that one that crashes or hangs is skipped instead of taking
// the caller down; a library it accepted becomes a Plugin made from its answer, loaded into this
// process only when its table is first needed (Plugin::load). Built-in names (the oracles) are
// pinned to the core's own plugin directory. Every library that is not kept is listed with the
// reason, so `moe list` can say why.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "moe/plugin.hpp"

namespace moe {
namespace detail {
class PluginScanner;
}

struct SkippedLibrary {
  std::string path;
  std::string reason;
};

struct DiscoveryOptions {
  std::vector<std::string> config_dirs;  // must exist: a missing one is an error
  std::vector<std::string> files;        // explicit plugin files (moe conformance --plugin)
  bool use_env = true;                   // MOE_PLUGIN_PATH (':'-separated)
  bool use_default = true;               // the build tree's or install's plugin directory
  // How each library is first tried: kAuto runs the plugin scanner (moe-plugin-scanner, a child
  // process) when one is found, and a library it accepts is loaded in-process only when its table
  // is first needed; with none found it loads every library in-process at once, with a warning.
  // kRequired makes a missing scanner an error; kOff loads every library in-process at once (a
  // crash or hang there is this process's).
  enum class Scan { kAuto, kRequired, kOff };
  Scan scan = Scan::kAuto;
  // The scanner executable. Empty: MOE_PLUGIN_SCANNER, else beside the running executable, else
  // <exe>/../libexec/moe_registry, else the install's libexec directory.
  std::string scanner;
  // The core's plugin directory (where the built-in plugins reference and gpu_oracle may load
  // from), besides the defaults found from the running executable: a host program linking the
  // installed core passes the package's MOE_REGISTRY_PLUGIN_DIR here (or sets
  // MOE_CORE_PLUGIN_DIR in the environment). One given here must be a directory (NOT_FOUND
  // otherwise); the environment's is ignored with a warning when it is not.
  std::string core_plugin_dir;
};

// Loads one library and checks it: a shared library, the entry point, ABI MAJOR, table size,
// required entries, init and info. Throws moe::Error naming the file and the problem.
std::shared_ptr<Plugin> load_plugin(const std::filesystem::path& path);

// Plugin files in a directory: regular files named *.so, sorted by name. Throws moe::Error
// (NOT_FOUND) naming the directory when it cannot be read; the second form sets `ec` instead.
std::vector<std::filesystem::path> plugin_files_in(const std::filesystem::path& dir);
std::vector<std::filesystem::path> plugin_files_in(const std::filesystem::path& dir,
                                                   std::error_code& ec);

// The default plugin directories that exist: <exe>/../plugins (build tree),
// <exe>/../lib/moe_registry/plugins and the configured install directory.
std::vector<std::filesystem::path> default_plugin_dirs();

class Registry {
 public:
  static Registry discover(const DiscoveryOptions& options);

  // Every plugin kept, in discovery order. With the scanner none is loaded yet: its info, path
  // and names come from the scan (and its cache); its table loads on first use.
  const std::vector<std::shared_ptr<Plugin>>& plugins() const { return plugins_; }
  const std::vector<SkippedLibrary>& skipped() const { return skipped_; }
  const std::vector<std::string>& searched() const { return searched_; }

  // By name or alias; nullptr when none answers to it. Loads nothing.
  std::shared_ptr<Plugin> find(std::string_view name) const;
  // The reference plugin from the core's own plugin directory, loaded: the oracle that routing,
  // runs and conformance are checked against. Throws moe::Error(NOT_FOUND) saying where it was
  // looked for and, when its library was skipped, why; or the error of loading it.
  std::shared_ptr<Plugin> oracle() const;
  std::string names() const;  // "a, b, c" (aliases in parentheses)

  // Scans one file (without a scanner: loads it) and adds it; a failure is recorded in skipped()
  // and rethrown when `strict`.
  void add_file(const std::filesystem::path& path, bool strict);

 private:
  void add_dir(const std::filesystem::path& dir);
  void add_files(const std::vector<std::filesystem::path>& files, bool strict);
  void add_plugin(std::shared_ptr<Plugin> plugin);
  // Throws moe::Error when `path` may not answer to one of `names`: a built-in name outside the
  // core's plugin directory, or a name another plugin kept already answers to.
  void check_claims(const std::filesystem::path& path, std::vector<std::string> names) const;
  void resolve_scanner(const DiscoveryOptions& options);

  std::shared_ptr<detail::PluginScanner> scanner_;  // null: load in-process
  bool scanner_resolved_ = false;
  std::vector<std::filesystem::path> core_dirs_;  // default_plugin_dirs(): where built-ins live
  std::vector<std::shared_ptr<Plugin>> plugins_;
  std::vector<SkippedLibrary> skipped_;
  std::vector<std::string> searched_;
};

}  // namespace moe
