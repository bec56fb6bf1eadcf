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

// A valid request that this code does not support (a format, activation or routing method it
// does not take, or a value newer than this build): MOE_STATUS_UNSUPPORTED at the ABI, and in a
// supports() answer "no" with this reason code.
class Refusal : public Error {
 public:
  Refusal(moe_reason reason, const std::string& message)
      : Error(MOE_STATUS_UNSUPPORTED, message), reason_(reason) {}
  moe_reason reason() const noexcept { return reason_; }

 private:
  moe_reason reason_;
};

const char* status_name(moe_status status) noexcept;

}  // namespace moe

// Never compiled out: a failed check throws moe::Error(status, formatted message).
#define MOE_CHECK(cond, status, ...)                                     \
  do {                                                                   \
    if (!(cond)) throw ::moe::Error((status), fmt::format(__VA_ARGS__)); \
  } while (0)

#define MOE_FAIL(status, ...) throw ::moe::Error((status), fmt::format(__VA_ARGS__))

// Throws moe::Refusal(reason, formatted message).
#define MOE_REFUSE(reason, ...) throw ::moe::Refusal((reason), fmt::format(__VA_ARGS__))
