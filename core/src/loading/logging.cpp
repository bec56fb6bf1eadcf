#include "moe/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <mutex>

#include "moe/sdk/error.hpp"

namespace moe {
namespace {

std::shared_ptr<spdlog::logger> make_logger() {
  // A program that already registered a logger named "moe" keeps it (creating a second would
  // throw). Otherwise logs go to stderr so that stdout carries only results.
  if (auto existing = spdlog::get("moe")) return existing;
  auto logger = spdlog::stderr_color_mt("moe");
  logger->set_pattern("[%^%l%$] %v");
  logger->set_level(spdlog::level::warn);
  return logger;
}

// Also spdlog's default logger: the core logs through spdlog::warn() and the like, and spdlog's
// own default writes to stdout.
spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> l = [] {
    auto lg = make_logger();
    spdlog::set_default_logger(lg);
    return lg;
  }();
  return *l;
}

moe_log_level to_abi(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace:
      return MOE_LOG_TRACE;
    case spdlog::level::debug:
      return MOE_LOG_DEBUG;
    case spdlog::level::info:
      return MOE_LOG_INFO;
    case spdlog::level::warn:
      return MOE_LOG_WARN;
    default:
      return MOE_LOG_ERROR;
  }
}

void plugin_log(void* /*user*/, int32_t level, const char* plugin, const char* message) {
  static const spdlog::level::level_enum kLevels[] = {spdlog::level::trace, spdlog::level::debug,
                                                      spdlog::level::info, spdlog::level::warn,
                                                      spdlog::level::err};
  const auto lvl = (level >= 0 && level <= 4) ? kLevels[level] : spdlog::level::err;
  logger().log(lvl, "[{}] {}", plugin ? plugin : "?", message ? message : "");
}

moe_host_api g_host{};

}  // namespace

void set_log_level(std::string_view level) {
  const auto l = spdlog::level::from_str(std::string(level));
  MOE_CHECK(l != spdlog::level::off || level == "off", MOE_STATUS_CONFIG_ERROR,
            "log level '{}' is not one of trace, debug, info, warn, error, off", level);
  logger().set_level(l);
  g_host.log_level = to_abi(l);
}

void init_logging_from_env() {
  logger();
  static std::once_flag once;
  std::call_once(once, [] {
    // A bad value is not worth failing every call over (--version, --help, a library user's
    // first call): it is named in a warning and the default level stays.
    if (const char* env = std::getenv("MOE_LOG_LEVEL"); env && *env) {
      try {
        set_log_level(env);
      } catch (const std::exception& e) {
        logger().warn("MOE_LOG_LEVEL ignored: {}", e.what());
      }
    }
  });
}

const moe_host_api* host_api() {
  if (g_host.struct_size == 0) {
    g_host.struct_size = sizeof(moe_host_api);
    g_host.core_abi_major = MOE_ABI_VERSION_MAJOR;
    g_host.core_abi_minor = MOE_ABI_VERSION_MINOR;
    g_host.log = plugin_log;
    g_host.log_user = nullptr;
    g_host.log_level = to_abi(logger().level());
  }
  return &g_host;
}

}  // namespace moe
