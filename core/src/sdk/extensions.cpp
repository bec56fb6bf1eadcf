#include "moe/sdk/extensions.hpp"

#include "moe/sdk/error.hpp"

namespace moe::sdk {

void check_extension_chain(const moe_extension* chain, const char* owner) {
  int length = 0;
  for (const moe_extension* e = chain; e != nullptr; e = e->next) {
    MOE_CHECK(++length <= MOE_EXTENSION_MAX_CHAIN, MOE_STATUS_INVALID_ARGUMENT,
              "{}: the extension chain is longer than {} entries (a cycle?)", owner,
              MOE_EXTENSION_MAX_CHAIN);
    MOE_CHECK(e->struct_size >= sizeof(moe_extension), MOE_STATUS_INVALID_ARGUMENT,
              "{}: extension {} (type {}) has struct_size={}, below the {}-byte header", owner,
              length - 1, e->type, e->struct_size, sizeof(moe_extension));
  }
}

}  // namespace moe::sdk
