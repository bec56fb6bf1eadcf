// The plugin scanner's results, kept between runs so that only new or changed libraries cost a
// child process: $XDG_CACHE_HOME/moe-registry/plugin_scan.json (else ~/.cache/...), keyed by the
// library's canonical path, size and modification time. Only successes are kept: a refusal may
// depend on the environment (a missing dependency, a time-out on a busy machine) and is re-checked
// every time. A hit only spares the child process; the in-process load still runs every check.
// The cache is an optimisation: a file that cannot be read or written is a debug line, no more.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "moe/plugin.hpp"

namespace moe::detail {

struct FileKey {
  std::string path;  // canonical
  uintmax_t size = 0;
  int64_t mtime_ns = 0;
};

// The key of a file; nullopt when it cannot be stat'ed.
std::optional<FileKey> file_key(const std::filesystem::path& file);

class ScanCache {
 public:
  // The cache file: MOE_PLUGIN_SCAN_CACHE=0 disables it (nullopt), as does having neither
  // XDG_CACHE_HOME nor HOME.
  static std::optional<std::filesystem::path> default_file();

  explicit ScanCache(std::filesystem::path file);  // reads it now

  std::optional<PluginInfo> find(const FileKey& key) const;
  void put(const FileKey& key, const PluginInfo& info);
  // Writes the entries put since the last save, merged into what the file holds by then (other
  // processes share it): a temporary file renamed over it, so a reader never sees half a file.
  void save();

 private:
  struct Entry {
    uintmax_t size;
    int64_t mtime_ns;
    PluginInfo info;
  };
  std::map<std::string, Entry> read_file() const;

  std::filesystem::path file_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, Entry> added_;
};

}  // namespace moe::detail
