#include "moe/sdk/guard.hpp"

#include <string>

namespace moe::sdk {
namespace {
thread_local std::string t_last_error;
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

}  // namespace moe::sdk
