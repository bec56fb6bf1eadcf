// The core's side of the plugin scanner (docs/design.md §2 rule 9): before a library is loaded
// into this process, `moe-plugin-scanner <library>` loads it in a child process with the same
// checks (load_plugin) and reports its info or the error, so a library that crashes or hangs in a
// static constructor, moe_plugin_get_api, init or get_info is skipped with the reason instead of
// taking down every command. Why a child that execs a small binary rather than a bare fork(): this
// process may run threads (spdlog, parallel_for, CUDA, NCCL), and a forked copy of it inherits
// their locks (malloc, the dynamic loader's) held, so its dlopen could deadlock.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loading/scan_cache.hpp"
#include "loading/scan_process.hpp"
#include "moe/registry.hpp"

namespace moe::detail {

struct ScanResult {
  bool loadable = false;
  PluginInfo info;                          // when loadable
  moe_status status = MOE_STATUS_INTERNAL;  // when not
  std::string reason;                       // when not: names the library and why
  // The file that was scanned (nullopt: it could not be stat'ed). Before loading the library
  // in-process, same_file(*key, path) says it is still that file.
  std::optional<ScanKey> key;
};

class PluginScanner {
 public:
  // The scanner `options` ask for: options.scanner, else MOE_PLUGIN_SCANNER, else the first of
  // <exe dir>/moe-plugin-scanner, <exe dir>/../libexec/moe_registry/ and the install's libexec
  // directory. nullptr (load in-process) when options.scan is kOff, or when none is found and
  // options.scan is kAuto (with a warning). Throws CONFIG_ERROR for a named scanner that is not an
  // executable file, a bad MOE_PLUGIN_SCAN_TIMEOUT_S, or none found under kRequired.
  static std::shared_ptr<PluginScanner> find(const DiscoveryOptions& options);

  PluginScanner(std::filesystem::path executable, double timeout_s);

  // One result per file, in order. Libraries run in parallel, each in its own child; cached
  // successes need none. A library that changed while it was scanned is not loadable.
  std::vector<ScanResult> scan(const std::vector<std::filesystem::path>& files);

 private:
  ScanResult interpret(const std::filesystem::path& file, const ProcessResult& p) const;

  std::filesystem::path executable_;
  double timeout_s_;
  std::optional<ScanCache> cache_;
};

}  // namespace moe::detail
