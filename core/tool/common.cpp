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

std::string mask_names(uint32_t mask, const char* (*name)(int), int count) {
  std::string out;
  for (int i = 0; i < count; ++i)
    if (mask >> i & 1u) out += (out.empty() ? "" : ",") + std::string(name(i));
  return out.empty() ? "-" : out;
}

}  // namespace moe::tool
