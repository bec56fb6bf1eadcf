// The host C API's errors and versions, and how it reads what every call shares (problems,
// string arrays).
#include "handles.hpp"
#include "moe/abi/moe_abi.h"

namespace moe::capi {

Problem read_problem(const moe_problem* problem, const char* name) {
  sdk::check_struct(problem, MOE_PROBLEM_MIN_SIZE, name);
  Problem p(sdk::read_struct(problem, default_problem()));  // copies the caller's EP map, if any
  if (p.ep_map().empty()) p.finalize();
  const moe_problem view = p.c();
  sdk::read_problem(&view);  // the extension chain, normalisation and validation, checked
  normalize_problem(p.raw());
  return p;
}

std::vector<std::string> read_strings(const char* const* items, int32_t count, const char* name) {
  MOE_CHECK(count >= 0 && (count == 0 || items != nullptr), MOE_STATUS_INVALID_ARGUMENT,
            "{} is NULL with a count of {}", name, count);
  std::vector<std::string> out;
  for (int32_t i = 0; i < count; ++i) {
    MOE_CHECK(items[i] != nullptr, MOE_STATUS_INVALID_ARGUMENT, "{}[{}] is NULL", name, i);
    out.emplace_back(items[i]);
  }
  return out;
}

std::vector<std::string> read_paths(const char* const* items, int32_t count, const char* name) {
  std::vector<std::string> out = read_strings(items, count, name);
  for (size_t i = 0; i < out.size(); ++i)
    MOE_CHECK(!out[i].empty(), MOE_STATUS_INVALID_ARGUMENT, "{}[{}] is an empty path", name, i);
  return out;
}

std::string read_backend(const char* backend, const std::string& unset, const char* name) {
  if (backend == nullptr) return unset;
  MOE_CHECK(*backend != '\0', MOE_STATUS_INVALID_ARGUMENT,
            "{} is an empty string: name a plugin, \"auto\", or pass NULL for {}", name,
            unset == "auto" ? "auto" : "the selection's backend ('" + unset + "')");
  return backend;
}

}  // namespace moe::capi

extern "C" {

const char* moe_host_last_error(void) {
  return moe::sdk::last_error();
}

const char* moe_host_status_name(moe_status status) {
  return moe::status_name(status);
}

moe_status moe_host_version(uint32_t* host_major, uint32_t* host_minor, uint32_t* abi_major,
                            uint32_t* abi_minor) {
  return moe::capi::guarded([&] {
    moe::capi::deref(host_major, "host_major") = MOE_HOST_VERSION_MAJOR;
    moe::capi::deref(host_minor, "host_minor") = MOE_HOST_VERSION_MINOR;
    moe::capi::deref(abi_major, "abi_major") = MOE_ABI_VERSION_MAJOR;
    moe::capi::deref(abi_minor, "abi_minor") = MOE_ABI_VERSION_MINOR;
  });
}

moe_status moe_host_default_problem(moe_problem* problem) {
  return moe::capi::guarded([&] {
    moe::capi::write_out(problem, MOE_PROBLEM_MIN_SIZE, "moe_problem", moe::default_problem());
  });
}

}  // extern "C"
