#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "commands.hpp"
#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/version.hpp"

namespace moe::tool {

Registry Discovery::discover(const std::vector<std::string>& config_dirs,
                             const std::string& config_source) const {
  // Each missing directory named by where it came from (the registry's own check cannot tell).
  for (const auto& dir : plugin_dirs) {
    std::error_code ec;
    MOE_CHECK(std::filesystem::is_directory(dir, ec), MOE_STATUS_NOT_FOUND,
              "--plugin-dir '{}' is not a directory", dir);
  }
  for (const auto& dir : config_dirs) {
    std::error_code ec;
    MOE_CHECK(
        std::filesystem::is_directory(dir, ec), MOE_STATUS_NOT_FOUND,
        "plugin directory '{}' (plugin_dirs of {}) does not exist{}", dir,
        config_source.empty() ? "the config" : config_source,
        std::filesystem::path(dir).is_relative() ? " (relative to the current directory)" : "");
  }
  DiscoveryOptions o;
  o.config_dirs = plugin_dirs;
  o.config_dirs.insert(o.config_dirs.end(), config_dirs.begin(), config_dirs.end());
  o.files = plugin_files;
  return Registry::discover(o);
}

void check_writable(const std::string& path, const char* what) {
  namespace fs = std::filesystem;
  MOE_CHECK(!path.empty(), MOE_STATUS_INVALID_ARGUMENT, "{} was given an empty path", what);
  std::error_code ec;
  MOE_CHECK(!fs::is_directory(path, ec), MOE_STATUS_IO_ERROR, "{} '{}' is a directory", what, path);
  const fs::path parent =
      fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  MOE_CHECK(fs::exists(parent, ec), MOE_STATUS_IO_ERROR,
            "{} '{}' cannot be written: its directory '{}' does not exist", what, path,
            parent.string());
  MOE_CHECK(fs::is_directory(parent, ec), MOE_STATUS_IO_ERROR,
            "{} '{}' cannot be written: '{}' is not a directory", what, path, parent.string());
  MOE_CHECK(::access(parent.c_str(), W_OK) == 0, MOE_STATUS_IO_ERROR,
            "{} '{}' cannot be written: directory '{}': {}", what, path, parent.string(),
            std::strerror(errno));
  MOE_CHECK(!fs::exists(path, ec) || ::access(path.c_str(), W_OK) == 0, MOE_STATUS_IO_ERROR,
            "{} '{}' cannot be written: {}", what, path, std::strerror(errno));
}

void append_line(const std::string& path, const std::string& line, const char* what) {
  errno = 0;
  std::ofstream out(path, std::ios::app);
  out << line << "\n";
  out.close();
  MOE_CHECK(!out.fail(), MOE_STATUS_IO_ERROR, "{} '{}': the record could not be written{}", what,
            path, errno != 0 ? fmt::format(": {}", std::strerror(errno)) : std::string());
}

int& exit_code() {
  static int code = 0;
  return code;
}

std::string value_name(int value, const char* (*name)(int)) {
  const std::string n = name(value);  // a value newer than this build: its number
  return n == "invalid" ? "#" + std::to_string(value) : n;
}

std::vector<std::string> mask_list(uint32_t mask, const char* (*name)(int)) {
  std::vector<std::string> out;
  for (int i = 0; i < 32; ++i)
    if (mask >> i & 1u) out.push_back(value_name(i, name));
  return out;
}

std::string mask_names(uint32_t mask, const char* (*name)(int)) {
  const std::vector<std::string> names = mask_list(mask, name);
  return names.empty() ? "-" : fmt::format("{}", fmt::join(names, ","));
}

const char* format_bit_name(int bit) {
  return format_name(static_cast<moe_format>(bit));
}
const char* activation_bit_name(int bit) {
  return activation_name(static_cast<moe_activation>(bit));
}
const char* routing_bit_name(int bit) {
  return routing_name(static_cast<moe_routing>(bit));
}

std::string version_line() {
  return fmt::format("moe-registry {}, core ABI {}.{}", MOE_REGISTRY_SDK_VERSION,
                     MOE_ABI_VERSION_MAJOR, MOE_ABI_VERSION_MINOR);
}

}  // namespace moe::tool
