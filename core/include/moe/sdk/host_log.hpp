// Logging from a plugin through the host's callback (moe_host_api.log), so plugin lines land in
// the host's log with the plugin's name and honour the host's level.
#pragma once

#include <fmt/format.h>

#include <string_view>
#include <utility>

#include "moe/abi/moe_abi.h"

namespace moe::sdk {

// Stores the host table (checked) and the plugin's name for log lines. Called from init().
void init_host(const moe_host_api* host, const char* plugin_name);
void log(moe_log_level level, std::string_view message);
template <class... Args>
void logf(moe_log_level level, fmt::format_string<Args...> f, Args&&... args) {
  log(level, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace moe::sdk
