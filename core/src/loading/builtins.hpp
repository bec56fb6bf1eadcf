// Built-in plugins are pinned to the core's own plugin directory (docs/design.md §2 rule 9).
// The reference is the oracle every other plugin is judged by, and gpu_oracle the oracle of the
// model shapes: a library elsewhere (a user directory, searched first, or a --plugin file) that
// claims one of their names or aliases would make conformance judge everyone against an impostor,
// so it is refused, whatever the search order.
#pragma once

#include <array>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace moe::detail {

inline constexpr std::array<std::string_view, 2> kBuiltinNames = {"reference", "gpu_oracle"};

bool is_builtin_name(std::string_view name);

// The library that provides built-in `name`: libmoe_<name>.so in the first of `core_dirs` (the
// core's own plugin directories, default_plugin_dirs()) that has it; empty when none does.
std::filesystem::path builtin_home(std::string_view name,
                                   const std::vector<std::filesystem::path>& core_dirs);

// "" when the library at `path` may answer to `name`; otherwise why not, naming both files:
// "<path> claims the built-in name 'reference' of <home>; ...".
std::string builtin_claim_refusal(const std::filesystem::path& path, std::string_view name,
                                  const std::vector<std::filesystem::path>& core_dirs);

}  // namespace moe::detail
