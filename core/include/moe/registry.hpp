// Plugin discovery and loading (docs/design.md §2 rules 2, 8, 9): directories from the config,
// then MOE_PLUGIN_PATH, then the install's plugin directory. Every library that is not loaded
// is kept with the reason, so `moe list` can say why.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "moe/plugin.hpp"

namespace moe {

struct SkippedLibrary {
  std::string path;
  std::string reason;
};

struct DiscoveryOptions {
  std::vector<std::string> config_dirs;  // must exist: a missing one is an error
  std::vector<std::string> files;        // explicit plugin files (moe conformance --plugin)
  bool use_env = true;                   // MOE_PLUGIN_PATH (':'-separated)
  bool use_default = true;               // the build tree's or install's plugin directory
};

// Loads one library and checks it: a shared library, the entry point, ABI MAJOR, table size,
// required entries, init and info. Throws moe::Error naming the file and the problem.
std::shared_ptr<Plugin> load_plugin(const std::filesystem::path& path);

// Plugin files in a directory: regular files named *.so, sorted by name.
std::vector<std::filesystem::path> plugin_files_in(const std::filesystem::path& dir);

// The default plugin directories that exist: <exe>/../plugins (build tree),
// <exe>/../lib/moe_registry/plugins and the configured install directory.
std::vector<std::filesystem::path> default_plugin_dirs();

class Registry {
 public:
  static Registry discover(const DiscoveryOptions& options);

  const std::vector<std::shared_ptr<Plugin>>& plugins() const { return plugins_; }
  const std::vector<SkippedLibrary>& skipped() const { return skipped_; }
  const std::vector<std::string>& searched() const { return searched_; }

  // By name or alias; nullptr when none answers to it.
  std::shared_ptr<Plugin> find(std::string_view name) const;
  std::string names() const;  // "a, b, c" (aliases in parentheses)

  // Loads one file and adds it; a failure is recorded in skipped() and rethrown when `strict`.
  void add_file(const std::filesystem::path& path, bool strict);

 private:
  void add_dir(const std::filesystem::path& dir);
  void add_loaded(std::shared_ptr<Plugin> plugin);

  std::vector<std::shared_ptr<Plugin>> plugins_;
  std::vector<SkippedLibrary> skipped_;
  std::vector<std::string> searched_;
};

}  // namespace moe
