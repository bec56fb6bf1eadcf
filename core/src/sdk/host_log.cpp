#include "moe/sdk/host_log.hpp"

#include <mutex>
#include <string>

#include "moe/sdk/extensions.hpp"
#include "moe/sdk/struct_io.hpp"

namespace moe::sdk {
namespace {

struct Host {
  std::mutex mutex;
  moe_host_api api{};
  bool present = false;
  std::string plugin_name = "plugin";
};
Host& host() {
  static Host* h = new Host();  // lives until exit: plugins are never unloaded before it
  return *h;
}

}  // namespace

void init_host(const moe_host_api* api, const char* plugin_name) {
  check_struct(api, MOE_HOST_API_MIN_SIZE, "moe_host_api");
  check_extension_chain(api->ext, "moe_host_api.ext");
  Host& h = host();
  std::lock_guard lock(h.mutex);
  h.api = read_struct(
      api, moe_host_api{sizeof(moe_host_api), nullptr, 0, 0, nullptr, nullptr, MOE_LOG_INFO});
  h.present = true;
  h.plugin_name = plugin_name;
}

void log(moe_log_level level, std::string_view message) {
  Host& h = host();
  moe_log_fn fn = nullptr;
  void* user = nullptr;
  std::string name;
  {
    std::lock_guard lock(h.mutex);
    if (!h.present || h.api.log == nullptr || level < h.api.log_level) return;
    fn = h.api.log;
    user = h.api.log_user;
    name = h.plugin_name;
  }
  const std::string text(message);
  fn(user, level, name.c_str(), text.c_str());
}

}  // namespace moe::sdk
