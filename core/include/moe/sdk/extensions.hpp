// Extension chains (moe_extension, ABI 1.2): checking a chain a caller hands over, and finding
// one type in it.
#pragma once

#include "moe/abi/moe_abi.h"

namespace moe::sdk {

// Throws INVALID_ARGUMENT naming `owner` (e.g. "moe_run_args.ext") when an entry's struct_size is
// below sizeof(moe_extension) or the chain is longer than MOE_EXTENSION_MAX_CHAIN (a cycle).
void check_extension_chain(const moe_extension* chain, const char* owner);

// The first extension of `type` in a checked chain whose struct_size covers T, else nullptr
// (an older writer's smaller struct is skipped rather than read past its end).
template <class T>
const T* find_extension(const moe_extension* chain, moe_extension_type type) {
  for (const moe_extension* e = chain; e != nullptr; e = e->next)
    if (e->type == type && e->struct_size >= sizeof(T)) return reinterpret_cast<const T*>(e);
  return nullptr;
}

}  // namespace moe::sdk
