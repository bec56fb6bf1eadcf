#include "moe/sdk/guard.hpp"

#include <algorithm>
#include <cstring>

namespace moe::sdk {
namespace {

// A plain buffer, not a std::string: the host may call an entry (shutdown, destroy_layer) while
// the process exits, after this thread's non-trivial thread_locals are gone.
constexpr size_t kLastErrorCap = 2048;
thread_local char t_last_error[kLastErrorCap];

// The length of the valid UTF-8 character at s[0..n), 0 where s does not start one (a stray
// continuation byte, an overlong form, a surrogate, a code point past U+10FFFF, a cut sequence).
size_t utf8_char(const unsigned char* s, size_t n) noexcept {
  const unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (n < len || s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; ++i)
    if ((s[i] & 0xC0) != 0x80) return 0;
  return len;
}

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
  // Messages quote what callers gave (a config's keys, a path, a plugin's text) byte for byte: a
  // byte that starts no valid UTF-8 character becomes '?', so every reader can decode the message
  // as text (Python's str() refuses it otherwise, replacing the error with a UnicodeDecodeError).
  auto* text = reinterpret_cast<unsigned char*>(t_last_error);
  for (size_t i = 0; i < n;) {
    const size_t len = utf8_char(text + i, n - i);
    if (len == 0) {
      text[i++] = '?';
    } else {
      i += len;
    }
  }
}

}  // namespace moe::sdk
