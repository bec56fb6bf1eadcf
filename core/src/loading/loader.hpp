// The loader's one step below load_plugin (registry.hpp): a library opened in this process, its
// table checked and initialised, its info read, with no Plugin made yet. load_plugin wraps it in a
// Plugin at once; a Plugin known from the plugin scanner (deferred_load.hpp) calls it the first
// time its table is needed.
#pragma once

#include <filesystem>

#include "moe/plugin.hpp"

namespace moe::detail {

struct OpenedTable {
  const moe_plugin_api* api;  // static in the library, which stays loaded until exit
  PluginInfo info;
};

// The file's checks, dlopen (RTLD_NOW | RTLD_LOCAL), the entry point, the table's checks, init and
// get_info. Returns with one hold on the table (table_leases.hpp) that the caller gives back with
// release_table. Throws moe::Error naming the file and the problem (no hold is left then).
OpenedTable open_table(const std::filesystem::path& path);

}  // namespace moe::detail
