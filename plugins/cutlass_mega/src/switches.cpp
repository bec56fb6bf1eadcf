// cutlass_mega's measurement switches and the values each knows (src/switches.hpp).
#include "switches.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <string_view>
#include <vector>

#include "moe/sdk/error.hpp"

extern "C" char** environ;

namespace moe::mega {
namespace {

constexpr std::string_view kPrefix = "MOE_MEGA_";
constexpr std::string_view kAnyPath = "";  // a switch whose value is a file path (not empty)

struct Switch {
  std::string_view name;
  std::vector<std::string_view> values;
};

// Each switch's values as src/mega_layer.cpp and src/timeline.cpp read them (docs/design.md §13).
const std::vector<Switch>& switches() {
  static const std::vector<Switch> table = {
      {"MOE_MEGA_BF16_STAGE", {"64"}},
      {"MOE_MEGA_CHUNKS", {"1"}},
      {"MOE_MEGA_FP4_STAGE", {"128", "256", "512"}},
      {"MOE_MEGA_FP4_WGMMA", {"1"}},
      {"MOE_MEGA_FP8_OWN_ROWS", {"0", "1"}},
      {"MOE_MEGA_FP8_PREFETCH", {"late", "late0", "late1"}},
      {"MOE_MEGA_FP8_STAGE", {"128", "256"}},  // 256: the default since session 44, retired
      {"MOE_MEGA_FP8_TOKENS", {"e4m3"}},
      {"MOE_MEGA_FP8_WGMMA", {"0", "1", "2"}},
      {"MOE_MEGA_GEMM2", {"early"}},
      {"MOE_MEGA_LAUNCH", {"pdl"}},
      {"MOE_MEGA_ROUTE", {"apart", "fused", "fused64"}},  // fused: the default since session 51
      {"MOE_MEGA_SINKS", {"apart"}},  // apart: the default since session 50, retired
      {"MOE_MEGA_SPLIT2", {"fill", "fit", "waves"}},  // fill: the default since session 55
      {"MOE_MEGA_TIMELINE", {kAnyPath}},
  };
  return table;
}

const Switch* find(std::string_view name) {
  for (const Switch& s : switches())
    if (s.name == name) return &s;
  return nullptr;
}

bool knows(const Switch& s, std::string_view value) {
  for (std::string_view v : s.values)
    if (v == kAnyPath ? !value.empty() : v == value) return true;
  return false;
}

std::string accepted(const Switch& s) {
  return s.values.size() == 1 && s.values[0] == kAnyPath
             ? std::string("a file path")
             : fmt::format("{}", fmt::join(s.values, ", "));
}

}  // namespace

bool env_is(const char* name, const char* value) {
  const Switch* s = find(name);
  MOE_CHECK(s != nullptr && knows(*s, value), MOE_STATUS_INTERNAL,
            "cutlass_mega: {}={} is not in the switch table (src/switches.cpp)", name, value);
  const char* v = std::getenv(name);
  return v != nullptr && std::string_view(v) == value;
}

std::string switch_error(const char* const* env) {
  if (env == nullptr) return {};
  for (; *env != nullptr; ++env) {
    const std::string_view entry(*env);
    if (entry.substr(0, kPrefix.size()) != kPrefix) continue;
    const size_t eq = entry.find('=');
    const std::string_view name = entry.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view() : entry.substr(eq + 1);
    const Switch* s = find(name);
    if (s == nullptr) {
      std::vector<std::string_view> names;
      for (const Switch& known : switches()) names.push_back(known.name);
      return fmt::format(
          "the environment sets {}, which is not a cutlass_mega switch (those are {}); unset it",
          entry, fmt::join(names, ", "));
    }
    if (!knows(*s, value))
      return fmt::format("the environment sets {}=\"{}\", which {} does not know (it takes {})",
                         name, value, name, accepted(*s));
  }
  return {};
}

void check_switches() {
  const std::string error = switch_error(environ);
  MOE_CHECK(error.empty(), MOE_STATUS_CONFIG_ERROR, "cutlass_mega: {}", error);
}

}  // namespace moe::mega
