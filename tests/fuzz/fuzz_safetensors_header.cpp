// libFuzzer target: any bytes into parse_safetensors_header. A moe::Error is the expected answer
// to a bad header; a crash, a sanitizer report, another exception escaping, or an accepted
// header that breaks the guarantees below is a finding.
//
// Input: the header JSON, then (when the input has at least 8 bytes) the data section size as
// a trailing u64 little-endian, so a seed is a real header followed by its data size.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "moe/safetensors.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"

namespace {

// What an accepted header promises to every reader of the data section.
void check_accepted(const moe::SafetensorsHeader& h, uint64_t data_size) {
  for (size_t i = 0; i < h.entries.size(); ++i) {
    const auto& e = h.entries[i];
    uint64_t numel = 1;
    for (int64_t d : e.shape) {
      if (d < 0) __builtin_trap();
      numel *= uint64_t(d);  // cannot overflow: the parser refused shapes whose count does
    }
    if (e.begin > e.end || e.end > data_size) __builtin_trap();
    // Sizes by the file's dtype (also those no reader takes, F4 and F6 below a byte), and a
    // dtype the readers take agrees with its moe_dtype's size.
    const uint64_t bits = numel * e.bits;  // the parser counted it without overflow too
    if (e.bits == 0 || bits % 8 != 0 || e.end - e.begin != bits / 8) __builtin_trap();
    if (e.dtype != MOE_DTYPE_INVALID && e.bits != 8 * moe::dtype_size(e.dtype)) __builtin_trap();
    if (i > 0 && !(h.entries[i - 1].name < e.name)) __builtin_trap();  // sorted, unique
  }
  // No two non-empty ranges overlap (quadratic, but fuzz inputs hold few tensors).
  for (const auto& a : h.entries)
    for (const auto& b : h.entries)
      if (&a != &b && a.begin < a.end && b.begin < b.end && a.begin < b.end && b.begin < a.end)
        __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint64_t data_size = 0;
  if (size >= 8) {
    size -= 8;
    for (int i = 7; i >= 0; --i) data_size = (data_size << 8) | data[size + i];
  }
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  try {
    check_accepted(moe::parse_safetensors_header(json, data_size, "fuzz.safetensors"), data_size);
  } catch (const moe::Error&) {
    // expected: a refused header
  }
  return 0;
}
