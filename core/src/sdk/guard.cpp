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
  const size_t length = std::strlen(message);
  size_t n = std::min(length, kLastErrorCap - 1);
  // Cut at a character's start, not inside a UTF-8 sequence (a strict decoder refuses a lone
  // lead byte): back off the continuation bytes (10xxxxxx) and the lead byte they belong to.
  if (n < length)
    while (n > 0 && (static_cast<unsigned char>(message[n]) & 0xC0) == 0x80) --n;
  std::memcpy(t_last_error, message, n);
  t_last_error[n] = '\0';
}

}  // namespace moe::sdk
