// Logging: spdlog in the core, and the callback handed to plugins so their lines land there too.
// Every line goes to stderr, so that stdout carries only results.
#pragma once

#include <string_view>

#include "moe/abi/moe_abi.h"

namespace moe {

// "trace", "debug", "info", "warn", "error" or "off"; throws CONFIG_ERROR otherwise.
void set_log_level(std::string_view level);
// Makes the core's logger (stderr) spdlog's default and reads MOE_LOG_LEVEL once (default "warn").
void init_logging_from_env();

// The host table given to every plugin's init(): its log callback forwards to spdlog.
const moe_host_api* host_api();

}  // namespace moe
