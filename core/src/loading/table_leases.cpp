#include "loading/table_leases.hpp"

#include <spdlog/spdlog.h>

#include <map>
#include <mutex>

#include "loading/entry_guard.hpp"
#include "moe/logging.hpp"
#include "moe/sdk/error.hpp"

namespace moe::detail {
namespace {

struct Leases {
  std::mutex mutex;
  std::map<const moe_plugin_api*, int> holds;
};
Leases& leases() {
  static Leases* l = new Leases();  // plugins may be released while the process exits
  return *l;
}

}  // namespace

void acquire_table(const moe_plugin_api* api, const std::string& where) {
  Leases& l = leases();
  std::lock_guard lock(l.mutex);
  int& holds = l.holds[api];
  if (holds == 0) {
    moe_status st = MOE_STATUS_INTERNAL;
    try {
      st = guarded(where, "init", [&] { return api->init(host_api()); });
    } catch (...) {
      l.holds.erase(api);
      throw;
    }
    if (st != MOE_STATUS_OK) {
      l.holds.erase(api);
      MOE_FAIL(st, "{}: init failed: {}", where, last_error_of(where, api->last_error));
    }
  }
  ++holds;
}

void release_table(const moe_plugin_api* api, const std::string& name) noexcept {
  Leases& l = leases();
  std::lock_guard lock(l.mutex);
  const auto it = l.holds.find(api);
  if (it == l.holds.end() || --it->second > 0) return;
  l.holds.erase(it);
  if (!MOE_STRUCT_HAS(api, moe_plugin_api, shutdown) || api->shutdown == nullptr) return;
  const moe_shutdown_args args{sizeof(moe_shutdown_args), nullptr};
  const moe_status st = guarded_noexcept(
      name, "shutdown", [&] { return api->shutdown(&args); }, MOE_STATUS_OK);
  if (st == MOE_STATUS_OK) return;
  try {
    spdlog::warn("plugin '{}' shutdown failed: {}", name, last_error_of(name, api->last_error));
  } catch (...) {  // nothing may leave a destructor
  }
}

}  // namespace moe::detail
