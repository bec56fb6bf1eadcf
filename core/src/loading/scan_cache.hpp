// The plugin scanner's results, kept between runs so that only new or changed libraries cost a
// child process: $XDG_CACHE_HOME/moe-registry/plugin_scan.json (else ~/.cache/...). An entry is
// keyed by the library's canonical path, device, inode, size, mtime and ctime: path, size and
// mtime alone would let a same-size replacement that kept its mtime (cp -p, rsync -a, tar) reuse
// a stale "loadable", and an unscanned library would then be loaded in-process. The ctime cannot
// be set back by a copy tool, and a file renamed into place has another inode.
// Entries belong to the identity of the core and the scanner executable that produced them (the
// core's version, and the scanner's path, size and mtime: dev builds at different commits never
// share answers); those of other identities are kept in the file, unused, so that two builds
// taking turns do not wipe each other's entries.
// Only successes are kept: a refusal may depend on the environment (a missing dependency, a
// time-out on a busy machine) and is re-checked every time. A hit only spares the child process;
// the in-process load still runs every check. The cache is an optimisation: a file that cannot be
// read or written is a debug line, no more.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "moe/plugin.hpp"

namespace moe::detail {

// What identifies the contents of a library file without reading it.
struct ScanKey {
  std::string path;  // canonical
  uint64_t dev = 0, ino = 0;
  int64_t size = 0, mtime_ns = 0, ctime_ns = 0;
  bool operator==(const ScanKey&) const = default;
};

// The key of a file; nullopt when it cannot be stat'ed.
std::optional<ScanKey> scan_key(const std::filesystem::path& file);

// Whether `file` is still the file `key` was taken of (same canonical path, inode, size, times).
// The registry calls it right before it loads a scanned library in-process: a library replaced
// since its scan must not be loaded on the strength of the scan.
bool same_file(const ScanKey& key, const std::filesystem::path& file);

// The identity that scan answers belong to: this core's version, ABI and scan protocol, and the
// scanner executable's canonical path, size and mtime.
std::string scan_identity(const std::filesystem::path& scanner);

class ScanCache {
 public:
  // The cache file: MOE_PLUGIN_SCAN_CACHE=0 disables it (nullopt), as does having neither
  // XDG_CACHE_HOME nor HOME.
  static std::optional<std::filesystem::path> default_file();

  ScanCache(std::filesystem::path file, std::string identity);  // reads it now

  std::optional<PluginInfo> find(const ScanKey& key) const;
  void put(const ScanKey& key, const PluginInfo& info);
  // Writes the entries put since the last save, merged into what the file holds by then (other
  // processes share it; of two concurrent writers the last wins): a temporary file of a unique
  // name renamed over it, so a reader never sees half a file.
  void save();

 private:
  struct Entry {
    ScanKey key;
    PluginInfo info;
  };
  using Entries = std::map<std::string, Entry>;  // by canonical path
  // Each identity's section as the file holds it: only this core's libraries are read as its
  // PluginInfo (another core's, of another scan protocol, may have other fields), and a section
  // that cannot be read is dropped alone.
  struct Section {
    int64_t saved_ns = 0;  // when its identity last saved: the oldest are dropped first
    nlohmann::json libraries = nlohmann::json::object();  // canonical path -> entry
  };
  std::map<std::string, Section> read_file() const;  // by identity

  std::filesystem::path file_;
  std::string identity_;
  Entries entries_;
  Entries added_;
};

}  // namespace moe::detail
