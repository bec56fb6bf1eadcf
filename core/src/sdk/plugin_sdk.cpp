#include "moe/sdk/plugin_sdk.hpp"

#include <atomic>
#include <mutex>

namespace moe::sdk {
namespace {

thread_local std::string t_last_error;

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

const char* last_error() noexcept {
  return t_last_error.c_str();
}

void set_last_error(const char* message) noexcept {
  try {
    t_last_error = message;
  } catch (...) {
    // Out of memory while storing the message: keep the old one rather than throw.
  }
}

void init_host(const moe_host_api* api, const char* plugin_name) {
  check_struct(api, MOE_HOST_API_MIN_SIZE, "moe_host_api");
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

void check_struct_size(const void* ptr, size_t struct_size, size_t min_size, const char* name) {
  if (ptr == nullptr) MOE_FAIL(MOE_STATUS_INVALID_ARGUMENT, "{} is NULL", name);
  if (struct_size < min_size) {
    MOE_FAIL(MOE_STATUS_ABI_MISMATCH,
             "{}.struct_size={} is smaller than the minimum {} of ABI {}.x: the caller was built "
             "against an incompatible moe_abi.h or forgot to set struct_size",
             name, struct_size, min_size, MOE_ABI_VERSION_MAJOR);
  }
}

moe_problem read_problem(const moe_problem* problem) {
  check_struct(problem, MOE_PROBLEM_MIN_SIZE, "moe_problem");
  moe_problem p = read_struct(problem, default_problem());
  normalize_problem(p);
  validate_problem(p);
  return p;
}

void answer_support(moe_support* out, moe_reason reason, std::string_view message) {
  check_struct(out, MOE_SUPPORT_MIN_SIZE, "moe_support");
  out->supported = reason == MOE_REASON_NONE ? 1 : 0;
  out->reason = reason;
  const size_t n = std::min(message.size(), size_t(MOE_SUPPORT_MESSAGE_CAP - 1));
  std::memcpy(out->message, message.data(), n);
  out->message[n] = '\0';
}

}  // namespace moe::sdk
