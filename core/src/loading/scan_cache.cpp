#include "loading/scan_cache.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "loading/scan_json.hpp"
#include "moe/abi/moe_abi.h"
#include "moe/sdk/version.hpp"

namespace fs = std::filesystem;

namespace moe::detail {
namespace {

// Entries written by another core version are ignored (and replaced on the next save).
std::string core_id() {
  return fmt::format("moe-registry {} ABI {}.{} scan protocol {}", MOE_REGISTRY_SDK_VERSION,
                     MOE_ABI_VERSION_MAJOR, MOE_ABI_VERSION_MINOR, kScanProtocol);
}

}  // namespace

std::optional<FileKey> file_key(const fs::path& file) {
  std::error_code ec;
  FileKey key;
  key.path = fs::canonical(file, ec).string();
  if (ec) return std::nullopt;
  key.size = fs::file_size(key.path, ec);
  if (ec) return std::nullopt;
  const auto mtime = fs::last_write_time(key.path, ec);
  if (ec) return std::nullopt;
  key.mtime_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch()).count();
  return key;
}

std::optional<fs::path> ScanCache::default_file() {
  if (const char* off = std::getenv("MOE_PLUGIN_SCAN_CACHE"); off && std::string(off) == "0")
    return std::nullopt;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg && fs::path(xdg).is_absolute())
    return fs::path(xdg) / "moe-registry" / "plugin_scan.json";
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".cache" / "moe-registry" / "plugin_scan.json";
  return std::nullopt;
}

ScanCache::ScanCache(fs::path file) : file_(std::move(file)), entries_(read_file()) {}

std::map<std::string, ScanCache::Entry> ScanCache::read_file() const {
  std::map<std::string, Entry> entries;
  std::ifstream in(file_);
  if (!in) return entries;  // none yet
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    if (j.at("core").get<std::string>() != core_id()) return entries;
    for (const auto& [path, e] : j.at("libraries").items()) {
      entries[path] = Entry{e.at("size").get<uintmax_t>(), e.at("mtime_ns").get<int64_t>(),
                            info_from_json(e.at("info"))};
    }
  } catch (const std::exception& e) {
    spdlog::debug("plugin scan cache {} is unreadable ({}); ignored", file_.string(), e.what());
    entries.clear();
  }
  return entries;
}

std::optional<PluginInfo> ScanCache::find(const FileKey& key) const {
  const auto it = entries_.find(key.path);
  if (it == entries_.end() || it->second.size != key.size || it->second.mtime_ns != key.mtime_ns)
    return std::nullopt;
  return it->second.info;
}

void ScanCache::put(const FileKey& key, const PluginInfo& info) {
  const Entry e{key.size, key.mtime_ns, info};
  entries_[key.path] = e;
  added_[key.path] = e;
}

void ScanCache::save() {
  if (added_.empty()) return;
  std::map<std::string, Entry> merged = read_file();
  for (const auto& [path, e] : added_) merged[path] = e;
  nlohmann::json libraries = nlohmann::json::object();
  for (const auto& [path, e] : merged) {
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;  // a library since removed
    libraries[path] = {{"size", e.size}, {"mtime_ns", e.mtime_ns}, {"info", info_to_json(e.info)}};
  }
  const nlohmann::json j = {{"core", core_id()}, {"libraries", libraries}};
  const fs::path tmp = file_.string() + "." + std::to_string(getpid()) + ".tmp";
  std::error_code ec;
  fs::create_directories(file_.parent_path(), ec);
  {
    std::ofstream out(tmp);
    out << j.dump(1) << "\n";
    if (!out.flush()) ec = std::make_error_code(std::errc::io_error);
  }
  if (!ec) fs::rename(tmp, file_, ec);
  if (ec) {
    spdlog::debug("plugin scan cache {} cannot be written ({}); scans are not kept", file_.string(),
                  ec.message());
    fs::remove(tmp, ec);
    return;
  }
  added_.clear();
}

}  // namespace moe::detail
