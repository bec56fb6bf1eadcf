// A failed moe_host_* call, or an argument the binding refuses, as a C++ exception that the module
// turns into moe_registry.MoeError(status name, message) (module.cpp). It lives on the Python side
// of the host C API only: nothing is thrown across the C API.
#pragma once

#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include "moe/host/moe_host.h"

namespace moe::py {

class StatusError : public std::exception {
 public:
  StatusError(moe_status status, std::string message)
      : status_(status), message_(std::move(message)) {}
  moe_status status() const { return status_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  moe_status status_;
  std::string message_;
};

// Throws the calling thread's last C API error when `status` is not OK. Call it on the thread that
// made the call, before any other moe_host_* call (the message is per thread).
inline void check(moe_status status) {
  if (status != MOE_STATUS_OK) throw StatusError(status, moe_host_last_error());
}

// A C API struct as this binding fills it: zeroed, struct_size set (its fields' defaults are 0).
template <class T>
T sized() {
  T s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  return s;
}

template <class... Args>
[[noreturn]] void fail(moe_status status, fmt::format_string<Args...> format, Args&&... args) {
  throw StatusError(status, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace moe::py
