// A plugin's table is initialised while the host holds it: init() when the first Plugin handle on
// it is loaded (made, or for one known from the plugin scanner, first used), shutdown() (ABI 1.2,
// when the table has it) when the last one is destroyed. The same library found twice, or by two
// registries, shares one lease.
#pragma once

#include <string>

#include "moe/abi/moe_abi.h"

namespace moe::detail {

// Calls init() unless the table is already held; throws moe::Error naming `where` when it fails.
void acquire_table(const moe_plugin_api* api, const std::string& where);
// Drops one hold; the last calls shutdown(). A failing shutdown is logged, never thrown.
void release_table(const moe_plugin_api* api, const std::string& name) noexcept;

}  // namespace moe::detail
