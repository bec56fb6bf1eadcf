#include "commands.hpp"

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

std::string mask_names(uint32_t mask, const char* (*name)(int)) {
  std::string out;
  for (int i = 0; i < 32; ++i) {
    if (!(mask >> i & 1u)) continue;
    const std::string n = name(i);  // a value newer than this build: its number
    out += (out.empty() ? "" : ",") + (n == "invalid" ? "#" + std::to_string(i) : n);
  }
  return out.empty() ? "-" : out;
}

}  // namespace moe::tool
