// libFuzzer target: any text into moe::Config::parse. A moe::Error is the expected answer to a
// bad config; a crash, a sanitizer report, a hang or another exception escaping is a finding.
#include <cstdint>
#include <string>

#include "moe/config.hpp"
#include "moe/sdk/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    moe::Config::parse(text, "fuzz.yaml");
  } catch (const moe::Error&) {
    // expected: a refused config
  }
  return 0;
}
