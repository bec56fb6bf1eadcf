// moe::Error and MOE_CHECK: how C++ code inside the core and the plugins reports failures.
// The status travels with the message so the ABI guard can return it unchanged.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "moe/abi/moe_abi.h"

namespace moe {

class Error : public std::runtime_error {
 public:
  Error(moe_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  moe_status status() const noexcept { return status_; }

 private:
  moe_status status_;
};

const char* status_name(moe_status status) noexcept;

}  // namespace moe

// Never compiled out: a failed check throws moe::Error(status, formatted message).
#define MOE_CHECK(cond, status, ...)                                     \
  do {                                                                   \
    if (!(cond)) throw ::moe::Error((status), fmt::format(__VA_ARGS__)); \
  } while (0)

#define MOE_FAIL(status, ...) throw ::moe::Error((status), fmt::format(__VA_ARGS__))
