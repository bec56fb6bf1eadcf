#include "loading/deferred_load.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "loading/loader.hpp"
#include "loading/table_leases.hpp"
#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/error.hpp"

namespace fs = std::filesystem;

namespace moe::detail {
namespace {

// What the registry's checks and a caller's memory handling rest on, in words.
std::string identity(const PluginInfo& info) {
  return fmt::format(
      "'{}' (aliases: {}), {} memory, ABI {}.{}", info.name,
      info.aliases.empty() ? "none" : fmt::format("{}", fmt::join(info.aliases, ", ")),
      memory_name(info.memory), info.abi_major, info.abi_minor);
}

}  // namespace

const moe_plugin_api* load_deferred(const fs::path& path, const PluginInfo& scanned,
                                    const DeferredLoad& deferred) {
  const std::string where = path.string();
  MOE_CHECK(same_file(deferred.key, path), MOE_STATUS_INVALID_ARGUMENT,
            "{}: changed after the plugin scanner read it; not loaded (run again)", where);
  OpenedTable table = open_table(path);
  struct Hold {
    const moe_plugin_api* api;
    const std::string& where;
    bool kept = false;
    ~Hold() {
      if (!kept) release_table(api, where);
    }
  } hold{table.api, where};
  const std::string here = identity(table.info), there = identity(scanned);
  MOE_CHECK(here == there, MOE_STATUS_INVALID_ARGUMENT,
            "{}: answered the plugin scanner as {} but this process as {}; not loaded", where,
            there, here);
  spdlog::debug("loaded plugin '{}' from {} on first use", scanned.name, where);
  hold.kept = true;
  return table.api;
}

}  // namespace moe::detail

namespace moe {

void Plugin::load() const {
  if (loaded()) return;
  std::lock_guard lock(load_mutex_);
  if (loaded()) return;
  if (!load_failure_) {
    try {
      MOE_CHECK(deferred_ != nullptr, MOE_STATUS_INTERNAL, "{}: no way to load it is known",
                path_.string());
      // The hold it returns is this Plugin's, given back by ~Plugin.
      api_.store(detail::load_deferred(path_, info_, *deferred_), std::memory_order_release);
      return;
    } catch (const Error& e) {
      load_failure_.emplace(e.status(), e.what());
    } catch (const std::exception& e) {
      load_failure_.emplace(MOE_STATUS_INTERNAL, e.what());
    }
  }
  throw Error(load_failure_->first, fmt::format("plugin '{}' cannot be loaded in this process: {}",
                                                info_.name, load_failure_->second));
}

const moe_plugin_api& Plugin::table() const {
  if (const moe_plugin_api* api = api_.load(std::memory_order_acquire)) return *api;
  load();
  return *api_.load(std::memory_order_acquire);
}

}  // namespace moe
