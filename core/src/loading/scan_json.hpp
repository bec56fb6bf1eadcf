// What the plugin scanner (core/scanner) tells the core about one library, as JSON on its stdout,
// and how a PluginInfo is kept in the scan cache. One object per scan:
//   {"protocol": 5, "abi": [1, 5], "ok": true, "info": {"name": ..., "abi_major": 1, ...}}
//   {"protocol": 5, "abi": [1, 5], "ok": false, "status": 7, "error": "<path>: <why>"}
// The info is everything the registry keeps of a library it has not loaded (registry.hpp): what
// `moe list`, `describe` and selection read without loading it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "moe/plugin.hpp"

namespace moe::detail {

// Bumped when the answer's shape changes; the core refuses an answer of another protocol.
// 2: the info carries the table's ABI version (abi_major, abi_minor).
// 3: and the decode rule (decode_priority, decode_max_tokens; ABI 1.3).
// 4: and the run features (run_features; ABI 1.4).
// 5: and the decode rule's limits by format (decode_max_tokens_by_format; ABI 1.5).
inline constexpr int kScanProtocol = 5;

// j.dump(indent), but text that is not valid UTF-8 (a Latin-1 description, a message cut in the
// middle of a character) comes out with U+FFFD in its place: plain dump() throws there (error 316),
// which would abort the scanner and make a good plugin look like a crash, or lose the cache.
inline std::string dump_json(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json info_to_json(const PluginInfo& info);
// Throws nlohmann::json::exception when a field is missing or of the wrong type.
PluginInfo info_from_json(const nlohmann::json& j);

}  // namespace moe::detail
