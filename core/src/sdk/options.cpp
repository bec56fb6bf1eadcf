#include "moe/sdk/options.hpp"

#include "moe/sdk/error.hpp"

namespace moe {

Options read_options(const moe_option* options, int64_t count) {
  MOE_CHECK(count >= 0 && (count == 0 || options != nullptr), MOE_STATUS_INVALID_ARGUMENT,
            "options is NULL with num_options={}", count);
  // A layer takes a handful: a count past this is a caller's garbage, not an array to read.
  constexpr int64_t kMaxOptions = 4096;
  MOE_CHECK(count <= kMaxOptions, MOE_STATUS_INVALID_ARGUMENT,
            "num_options={} is more than {}: options are a few key=value pairs", count,
            kMaxOptions);
  Options out;
  out.reserve(size_t(count));
  for (int64_t i = 0; i < count; ++i) {
    MOE_CHECK(options[i].key != nullptr && options[i].value != nullptr, MOE_STATUS_INVALID_ARGUMENT,
              "option {} has a NULL key or value", i);
    out.emplace_back(options[i].key, options[i].value);
  }
  return out;
}

}  // namespace moe
