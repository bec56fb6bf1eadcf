#include <fmt/format.h>

#include "commands.hpp"
#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/version.hpp"

namespace moe::tool {

Registry Discovery::discover(const std::vector<std::string>& config_dirs) const {
  DiscoveryOptions o;
  o.config_dirs = plugin_dirs;
  o.config_dirs.insert(o.config_dirs.end(), config_dirs.begin(), config_dirs.end());
  o.files = plugin_files;
  return Registry::discover(o);
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
