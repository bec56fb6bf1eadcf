#include "loading/entry_guard.hpp"

#include <cxxabi.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <memory>
#include <typeinfo>

namespace moe::detail {
namespace {

std::string demangle(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(mangled);
}

// "plugin 'reference'" for a plugin's name ([a-z0-9_]+), "<path>:" for a file not yet named.
std::string subject(std::string_view who) {
  const bool name = !who.empty() && std::all_of(who.begin(), who.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
  return name ? fmt::format("plugin '{}'", who) : fmt::format("{}:", who);
}

}  // namespace

std::string describe_current_exception() noexcept {
  try {
    try {
      throw;
    } catch (const std::exception& e) {
      return demangle(typeid(e).name()) + ": " + e.what();
    } catch (...) {
      const std::type_info* type = abi::__cxa_current_exception_type();
      return "an exception of type '" + (type ? demangle(type->name()) : std::string("?")) +
             "' (not a std::exception)";
    }
  } catch (...) {  // e.what() or the allocation itself threw
    return "an exception that cannot be described";
  }
}

void throw_escaped(std::string_view who, std::string_view entry) {
  throw Error(MOE_STATUS_INTERNAL,
              fmt::format("{} {} threw {}; a plugin entry must return a status instead "
                          "(docs/design.md §2 rule 4)",
                          subject(who), entry, describe_current_exception()));
}

void log_escaped(std::string_view who, std::string_view entry) noexcept {
  try {
    spdlog::warn("{} {} threw {}; ignored", subject(who), entry, describe_current_exception());
  } catch (...) {  // nothing may leave a no-throw path
  }
}

std::string last_error_of(std::string_view who, const char* (*last_error)()) noexcept {
  try {
    const char* message = last_error != nullptr ? last_error() : nullptr;
    return message != nullptr && *message ? message : "no message";
  } catch (...) {
    log_escaped(who, "last_error");
    return "no message (last_error threw)";
  }
}

}  // namespace moe::detail
