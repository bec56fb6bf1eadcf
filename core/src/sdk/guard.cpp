#include "moe/sdk/guard.hpp"

#include <algorithm>
#include <cstring>

namespace moe::sdk {
namespace {

// A plain buffer, not a std::string: the host may call an entry (shutdown, destroy_layer) while
// the process exits, after this thread's non-trivial thread_locals are gone.
constexpr size_t kLastErrorCap = 2048;
thread_local char t_last_error[kLastErrorCap];

}  // namespace

const char* last_error() noexcept {
  return t_last_error;
}

void set_last_error(const char* message) noexcept {
  const size_t n = std::min(std::strlen(message), kLastErrorCap - 1);
  std::memcpy(t_last_error, message, n);
  t_last_error[n] = '\0';
}

}  // namespace moe::sdk
