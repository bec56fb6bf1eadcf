#include "loading/scan_cache.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "loading/scan_json.hpp"
#include "moe/abi/moe_abi.h"
#include "moe/sdk/version.hpp"

namespace fs = std::filesystem;

namespace moe::detail {
namespace {

// The file's layout; a file of another layout is ignored (and replaced on the next save).
// 3: each info carries the table's ABI version, which the registry now takes from the cache.
constexpr int kFormat = 3;
// Identities kept in the file, the current one included: enough for a few builds taking turns,
// few enough that every rebuild of a dev scanner does not grow the file for ever.
constexpr size_t kKeptIdentities = 8;

int64_t ns(const timespec& t) {
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

nlohmann::json entry_to_json(const ScanKey& k, const PluginInfo& info) {
  return {{"dev", k.dev},           {"ino", k.ino},           {"size", k.size},
          {"mtime_ns", k.mtime_ns}, {"ctime_ns", k.ctime_ns}, {"info", info_to_json(info)}};
}

ScanKey key_from_json(const std::string& path, const nlohmann::json& e) {
  return ScanKey{path,
                 e.at("dev").get<uint64_t>(),
                 e.at("ino").get<uint64_t>(),
                 e.at("size").get<int64_t>(),
                 e.at("mtime_ns").get<int64_t>(),
                 e.at("ctime_ns").get<int64_t>()};
}

// `text` into `file` through a temporary of a unique name in the same directory, renamed over it:
// a reader sees the old file or the new one, and concurrent writers never share a temporary.
std::error_code write_atomically(const fs::path& file, const std::string& text) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  if (ec) return ec;
  std::string tmp = file.string() + ".XXXXXX";
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return {errno, std::generic_category()};
  for (size_t done = 0; done < text.size() && !ec;) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n > 0) done += size_t(n);
    if (n == 0) ec = std::make_error_code(std::errc::io_error);
    if (n < 0 && errno != EINTR) ec = {errno, std::generic_category()};
  }
  if (close(fd) != 0 && !ec) ec = {errno, std::generic_category()};
  if (!ec && rename(tmp.c_str(), file.c_str()) != 0) ec = {errno, std::generic_category()};
  if (ec) unlink(tmp.c_str());
  return ec;
}

}  // namespace

std::optional<ScanKey> scan_key(const fs::path& file) {
  std::error_code ec;
  ScanKey key;
  key.path = fs::canonical(file, ec).string();
  struct stat st;
  if (ec || stat(key.path.c_str(), &st) != 0) return std::nullopt;
  key.dev = st.st_dev;
  key.ino = st.st_ino;
  key.size = st.st_size;
  key.mtime_ns = ns(st.st_mtim);
  key.ctime_ns = ns(st.st_ctim);
  return key;
}

bool same_file(const ScanKey& key, const fs::path& file) {
  const auto now = scan_key(file);
  return now && *now == key;
}

std::string scan_identity(const fs::path& scanner) {
  const auto k = scan_key(scanner);
  return fmt::format("moe-registry {} ABI {}.{} scan protocol {}; scanner {} size {} mtime_ns {}",
                     MOE_REGISTRY_SDK_VERSION, MOE_ABI_VERSION_MAJOR, MOE_ABI_VERSION_MINOR,
                     kScanProtocol, k ? k->path : scanner.string(), k ? k->size : -1,
                     k ? k->mtime_ns : -1);
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

ScanCache::ScanCache(fs::path file, std::string identity)
    : file_(std::move(file)), identity_(std::move(identity)) {
  auto sections = read_file();
  const auto it = sections.find(identity_);
  if (it == sections.end()) return;
  for (const auto& [path, e] : it->second.libraries.items()) {
    try {  // an entry this core cannot read is scanned again
      entries_[path] = Entry{key_from_json(path, e), info_from_json(e.at("info"))};
    } catch (const std::exception& ex) {
      spdlog::debug("plugin scan cache {}: entry {} is unreadable ({}); ignored", file_.string(),
                    path, ex.what());
    }
  }
}

std::map<std::string, ScanCache::Section> ScanCache::read_file() const {
  std::map<std::string, Section> sections;
  std::ifstream in(file_);
  if (!in) return sections;  // none yet
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    if (!j.is_object() || j.value("format", 0) != kFormat) {
      spdlog::debug("plugin scan cache {} has another layout; replaced", file_.string());
      return sections;
    }
    for (const auto& [identity, s] : j.at("cores").items()) {
      try {
        Section section{s.at("saved_ns").get<int64_t>(), s.at("libraries")};
        if (!section.libraries.is_object()) throw std::runtime_error("libraries is no object");
        sections[identity] = std::move(section);
      } catch (const std::exception& e) {
        spdlog::debug("plugin scan cache {}: the section of '{}' is unreadable ({}); dropped",
                      file_.string(), identity, e.what());
      }
    }
  } catch (const std::exception& e) {
    spdlog::debug("plugin scan cache {} is unreadable ({}); ignored", file_.string(), e.what());
    sections.clear();
  }
  return sections;
}

std::optional<PluginInfo> ScanCache::find(const ScanKey& key) const {
  const auto it = entries_.find(key.path);
  if (it == entries_.end() || !(it->second.key == key)) return std::nullopt;
  return it->second.info;
}

void ScanCache::put(const ScanKey& key, const PluginInfo& info) {
  const Entry e{key, info};
  entries_[key.path] = e;
  added_[key.path] = e;
}

void ScanCache::save() {
  if (added_.empty()) return;
  std::map<std::string, Section> sections = read_file();
  Section& mine = sections[identity_];
  for (const auto& [path, e] : added_) mine.libraries[path] = entry_to_json(e.key, e.info);
  mine.saved_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  // Libraries since removed go, then identities left empty, then the oldest beyond the limit.
  std::vector<std::pair<int64_t, std::string>> by_age;
  for (auto& [identity, s] : sections) {
    for (auto it = s.libraries.begin(); it != s.libraries.end();) {
      std::error_code ec;
      it = fs::exists(it.key(), ec) ? std::next(it) : s.libraries.erase(it);
    }
    if (identity != identity_) by_age.emplace_back(s.saved_ns, identity);
  }
  std::sort(by_age.rbegin(), by_age.rend());
  for (size_t i = 0; i < by_age.size(); ++i) {
    const Section& s = sections[by_age[i].second];
    if (i + 1 >= kKeptIdentities || s.libraries.empty()) sections.erase(by_age[i].second);
  }
  nlohmann::json cores = nlohmann::json::object();
  for (auto& [identity, s] : sections)
    cores[identity] = {{"saved_ns", s.saved_ns}, {"libraries", std::move(s.libraries)}};
  const nlohmann::json j = {{"format", kFormat}, {"cores", std::move(cores)}};
  if (const std::error_code ec = write_atomically(file_, dump_json(j, 1) + "\n")) {
    spdlog::debug("plugin scan cache {} cannot be written ({}); scans are not kept", file_.string(),
                  ec.message());
    return;
  }
  added_.clear();
}

}  // namespace moe::detail
