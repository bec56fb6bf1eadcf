// A failed moe_host_* call, or an argument the binding refuses, as a C++ exception that the module
// turns into moe_registry.MoeError(status name, message) (module.cpp). It lives on the Python side
// of the host C API only: nothing is thrown across the C API.
#pragma once

#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <optional>
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

// A Python string as the C API reads it, up to its first NUL: one holding a NUL would be cut
// there without a word (a path or a backend name that names something else), so it is refused,
// naming the argument. An absent optional string is NULL.
inline const char* c_text(const std::string& text, const std::string& name) {
  const size_t nul = text.find('\0');
  if (nul != std::string::npos)
    fail(MOE_STATUS_INVALID_ARGUMENT,
         "{}: the string holds a NUL character (byte {}); the C API would read only what is "
         "before it",
         name, nul);
  return text.c_str();
}
inline const char* c_text(const std::optional<std::string>& text, const std::string& name) {
  return text ? c_text(*text, name) : nullptr;
}

}  // namespace moe::py
