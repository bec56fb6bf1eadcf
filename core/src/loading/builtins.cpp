#include "loading/builtins.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fs = std::filesystem;

namespace moe::detail {

bool is_builtin_name(std::string_view name) {
  return std::find(kBuiltinNames.begin(), kBuiltinNames.end(), name) != kBuiltinNames.end();
}

fs::path builtin_home(std::string_view name, const std::vector<fs::path>& core_dirs) {
  for (const auto& dir : core_dirs) {
    const fs::path file = dir / fmt::format("libmoe_{}.so", name);
    std::error_code ec;
    if (fs::is_regular_file(file, ec)) return fs::weakly_canonical(file, ec);
  }
  return {};
}

std::string builtin_claim_refusal(const fs::path& path, std::string_view name,
                                  const std::vector<fs::path>& core_dirs) {
  if (!is_builtin_name(name)) return "";
  const fs::path home = builtin_home(name, core_dirs);
  std::error_code ec;
  if (!home.empty() && fs::weakly_canonical(path, ec) == home) return "";
  if (!home.empty()) {
    return fmt::format(
        "{} claims the built-in name '{}' of {}; built-in plugins load only from the core's "
        "plugin directory, so it is refused",
        path.string(), name, home.string());
  }
  std::string dirs;
  for (const auto& d : core_dirs) dirs += (dirs.empty() ? "" : ", ") + d.string();
  return fmt::format(
      "{} claims the built-in name '{}', which only the core's plugin directory may provide "
      "({}, which has no libmoe_{}.so), so it is refused",
      path.string(), name, dirs.empty() ? "none found" : dirs, name);
}

}  // namespace moe::detail
