// The fallback table of backend_table.hpp's broken_table(): every entry fails with the message
// the failed table build left (its thread's last error at the time, kept here).
#include <cstring>

#include "moe/sdk/backend.hpp"

namespace moe::sdk::detail {
namespace {

char g_reason[512] = "the plugin's function table could not be built";

moe_status fail() {
  set_last_error(g_reason);
  return MOE_STATUS_INTERNAL;
}
moe_status init(const moe_host_api*) {
  return fail();
}
const char* error() {
  return last_error();
}
moe_status get_info(moe_plugin_info*) {
  return fail();
}
moe_status supports(const moe_problem*, moe_support*) {
  return fail();
}
moe_status prepare(const moe_prepare_args*, moe_layer**) {
  return fail();
}
moe_status destroy_layer(moe_layer*) {
  return fail();
}
moe_status workspace_size(const moe_layer*, int64_t, size_t*) {
  return fail();
}
moe_status run(const moe_run_args*) {
  return fail();
}

}  // namespace

const moe_plugin_api* broken_table() noexcept {
  static moe_plugin_api t = [] {
    moe_plugin_api api{};
    api.struct_size = sizeof(api);
    api.abi_major = MOE_ABI_VERSION_MAJOR;
    api.abi_minor = MOE_ABI_VERSION_MINOR;
    api.init = init;
    api.last_error = error;
    api.get_info = get_info;
    api.supports = supports;
    api.prepare = prepare;
    api.destroy_layer = destroy_layer;
    api.workspace_size = workspace_size;
    api.run = run;
    return api;
  }();
  const char* why = last_error();
  if (why[0] != '\0') {
    std::strncpy(g_reason, why, sizeof(g_reason) - 1);
    g_reason[sizeof(g_reason) - 1] = '\0';
  }
  return &t;
}

}  // namespace moe::sdk::detail
