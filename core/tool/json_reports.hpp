// `moe list --json` and `moe select --json`: one JSON document each, so that scripts read fields
// instead of parsing the text reports.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "moe/config.hpp"
#include "moe/registry.hpp"
#include "moe/selection.hpp"

namespace moe::tool {

// Name, version, ABI, priority and decode rule, memory, capabilities, aliases, description, path
// and build info.
nlohmann::json plugin_json(const Plugin& plugin);

// The tool's version, the directories searched, every plugin and every skipped library.
nlohmann::json list_json(const Registry& registry);

// The chosen plugin and the rule that chose it ("selected": null and "error" when none could
// be), and every plugin's answer for the config's problem.
nlohmann::json select_json(const Config& config, const Registry& registry,
                           const std::optional<Selection>& selection, const std::string& error);

}  // namespace moe::tool
