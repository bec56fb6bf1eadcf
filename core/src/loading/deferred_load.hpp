// Loading a plugin that discovery knows only from the plugin scanner's answer (docs/design.md §2
// rule 9): the registry keeps what the scan learned and makes a Plugin that is not loaded; the
// first use of its table loads the library here (Plugin::load, defined in deferred_load.cpp). The
// scan vouches only for the file it read, and the registry's claims checks (built-in names,
// duplicates) were made on the names the scanner saw, so the library is loaded only while it is
// that file, and kept only if it answers to the same names here.
#pragma once

#include <filesystem>

#include "loading/scan_cache.hpp"
#include "moe/plugin.hpp"

namespace moe::detail {

struct DeferredLoad {
  ScanKey key;  // the file the scanner read
};

// Loads `path` in this process for a Plugin the scanner answered `scanned` for: refused when the
// file is no longer the one of `deferred.key`, or when its table answers to another name, other
// aliases, another memory kind or another ABI version than it told the scanner. Returns the table
// with one hold on it (table_leases.hpp), the Plugin's. Throws moe::Error naming the file and why.
const moe_plugin_api* load_deferred(const std::filesystem::path& path, const PluginInfo& scanned,
                                    const DeferredLoad& deferred);

}  // namespace moe::detail
