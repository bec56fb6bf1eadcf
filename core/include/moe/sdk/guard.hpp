// The exception guard every ABI entry of a C++ plugin goes through, and the per-thread message
// of the last failed call (moe_plugin_api.last_error).
#pragma once

#include <exception>
#include <new>

#include "moe/abi/moe_abi.h"
#include "moe/sdk/error.hpp"

namespace moe::sdk {

// The calling thread's message of its last failed call (at most 2047 bytes kept).
const char* last_error() noexcept;
void set_last_error(const char* message) noexcept;

// Runs fn() and turns what it throws into a status and a message: no exception crosses the ABI.
template <class Fn>
moe_status guarded(Fn&& fn) noexcept {
  try {
    fn();
    set_last_error("");
    return MOE_STATUS_OK;
  } catch (const Error& e) {  // moe::Refusal too: UNSUPPORTED
    set_last_error(e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error("out of host memory");
    return MOE_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(e.what());
    return MOE_STATUS_INTERNAL;
  } catch (...) {
    set_last_error("unknown exception inside the plugin");
    return MOE_STATUS_INTERNAL;
  }
}

}  // namespace moe::sdk
