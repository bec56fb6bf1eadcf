// Calls into a plugin's function table, guarded on the core's side. The ABI says an entry returns
// a status and never throws (docs/design.md §2 rule 4), and the SDK's table keeps that promise,
// but a raw plugin (one that writes its table by hand) may let anything out, even `throw 42`.
// These wrappers turn whatever escapes into a moe::Error naming the plugin and the entry, so one
// careless plugin cannot terminate the process or pass for a core error.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "moe/sdk/error.hpp"

namespace moe::detail {

// The exception being handled, in words: "std::runtime_error: <what>", or "an exception of type
// 'int'" for what does not derive from std::exception. Call only inside a catch block.
std::string describe_current_exception() noexcept;

// `who` names the plugin in messages: its name ("plugin '<name>' <entry> threw ..."), or its file
// before the name is known ("<path>: <entry> threw ...").
// Throws moe::Error(MOE_STATUS_INTERNAL, "<who> <entry> threw <the exception>; ...").
[[noreturn]] void throw_escaped(std::string_view who, std::string_view entry);

// Logs "<who> <entry> threw <the exception>" as a warning (no-throw paths).
void log_escaped(std::string_view who, std::string_view entry) noexcept;

// Runs `call` (one call through the table, nothing of the core's own) and returns its result.
template <class Call>
decltype(auto) guarded(std::string_view who, std::string_view entry, Call&& call) {
  try {
    return std::forward<Call>(call)();
  } catch (...) {
    throw_escaped(who, entry);
  }
}

// For destructors and other paths that must not throw: an escaping exception is logged and
// swallowed, and `fallback` is returned instead.
template <class Call, class Result>
Result guarded_noexcept(std::string_view who, std::string_view entry, Call&& call,
                        Result fallback) noexcept {
  try {
    return std::forward<Call>(call)();
  } catch (...) {
    log_escaped(who, entry);
    return fallback;
  }
}

// last_error() of a table, guarded: a throwing or NULL-returning last_error gives a placeholder.
std::string last_error_of(std::string_view who, const char* (*last_error)()) noexcept;

}  // namespace moe::detail
