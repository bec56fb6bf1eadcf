// Backend selection as the tool uses it: a config's `fallback:` replacing the backend it names is
// worth a warning (the user asked for one backend and gets another), and an error with --strict.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "commands.hpp"
#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"

namespace moe::tool {
namespace {

// "backend 'x' named in FILE does not support PROBLEM (reason: message)".
std::string why_replaced(const Selection& s, const Registry& r, const Config& c) {
  const auto named = r.find(c.backend);
  for (const Candidate& k : s.considered) {
    if (named == nullptr || k.name != named->name()) continue;
    return fmt::format("backend '{}' named in {} does not support {} ({}: {})", c.backend, c.source,
                       describe_problem(c.problem.c()), reason_name(k.reason), k.message);
  }
  return fmt::format("backend '{}' named in {} was not chosen", c.backend, c.source);
}

}  // namespace

bool& strict() {
  static bool on = false;
  return on;
}

std::string selection_rule(const Selection& s, const Config& c) {
  if (c.backend == "auto") return "auto";
  return s.plugin->answers_to(c.backend) ? "named" : "fallback";
}

Selection select_checked(const Registry& r, const Config& c, Ask ask) {
  Selection s = select_backend(r, c, ask);
  if (selection_rule(s, c) != "fallback") return s;
  const std::string why = why_replaced(s, r, c);
  MOE_CHECK(!strict(), MOE_STATUS_UNSUPPORTED, "{}; --strict refuses its fallback '{}'", why,
            s.plugin->name());
  // The named backend's plain options are not the fallback's to take: say which were left out.
  spdlog::warn("{}; running its fallback '{}' instead{} (--strict makes this an error)", why,
               s.plugin->name(),
               s.options_left_out.empty()
                   ? std::string()
                   : fmt::format(", without the options given for '{}' ({}); give a "
                                 "fallback's own as options: {{{}: {{...}}}}",
                                 c.backend, fmt::join(s.options_left_out, ", "), s.plugin->name()));
  return s;
}

}  // namespace moe::tool
