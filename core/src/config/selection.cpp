#include "moe/selection.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"

namespace moe {
namespace {

const Candidate& candidate_of(const std::vector<Candidate>& all, const Plugin& plugin) {
  for (const auto& c : all)
    if (c.name == plugin.name()) return c;
  throw Error(MOE_STATUS_INTERNAL, "plugin '" + plugin.name() + "' was not evaluated");
}

std::string why_not(const Candidate& c) {
  return fmt::format("{} ({}): {}", c.name, reason_name(c.reason), c.message);
}

std::string supporters(const std::vector<Candidate>& all) {
  std::string out;
  for (const auto& c : all)
    if (c.supported) out += (out.empty() ? "" : ", ") + c.name;
  return out.empty() ? "none" : out;
}

std::shared_ptr<Plugin> find_or_throw(const Registry& registry, const std::string& name,
                                      const char* key) {
  auto plugin = registry.find(name);
  MOE_CHECK(plugin != nullptr, MOE_STATUS_CONFIG_ERROR,
            "unknown backend '{}' in {}; available: {} (or auto)", name, key, registry.names());
  return plugin;
}

}  // namespace

std::vector<Candidate> evaluate(const Registry& registry, const moe_problem& problem) {
  std::vector<Candidate> out;
  for (const auto& plugin : registry.plugins()) {
    Candidate c{plugin->name(), plugin->info().priority, false, MOE_REASON_OTHER, ""};
    try {
      const Support s = plugin->supports(problem);
      c.supported = s.supported;
      c.reason = s.supported ? MOE_REASON_NONE : s.reason;
      c.message = s.message;
    } catch (const Error& e) {
      c.message = fmt::format("supports() failed: {}", e.what());
    }
    out.push_back(std::move(c));
  }
  return out;
}

Selection select_backend(const Registry& registry, const Config& config) {
  const moe_problem problem = config.problem.c();
  Selection sel;
  sel.considered = evaluate(registry, problem);
  const std::string desc = describe_problem(problem);

  std::vector<std::shared_ptr<Plugin>> fallbacks;
  for (const auto& name : config.fallback)
    fallbacks.push_back(find_or_throw(registry, name, "fallback"));

  if (config.backend == "auto") {
    std::shared_ptr<Plugin> best;
    for (const auto& plugin : registry.plugins()) {
      const auto& c = candidate_of(sel.considered, *plugin);
      if (c.supported && (!best || c.priority > best->info().priority)) best = plugin;
    }
    if (best) {
      sel.plugin = best;
      sel.rule = fmt::format("auto: highest priority ({}) among the plugins that support {}",
                             best->info().priority, desc);
      return sel;
    }
    std::string reasons;
    for (const auto& c : sel.considered) reasons += "\n  " + why_not(c);
    MOE_FAIL(MOE_STATUS_UNSUPPORTED, "no plugin supports {} (searched: {}){}", desc,
             registry.names(), reasons);
  }

  auto primary = find_or_throw(registry, config.backend, "backend");
  const Candidate& pc = candidate_of(sel.considered, *primary);
  if (pc.supported) {
    sel.plugin = primary;
    sel.rule = fmt::format("named in {} (backend: {})", config.source, config.backend);
    return sel;
  }
  for (const auto& fb : fallbacks) {
    if (candidate_of(sel.considered, *fb).supported) {
      sel.plugin = fb;
      sel.rule = fmt::format("fallback: backend '{}' does not support the problem [{}]",
                             config.backend, why_not(pc));
      return sel;
    }
  }
  MOE_FAIL(MOE_STATUS_UNSUPPORTED,
           "backend '{}' does not support {}: {} ({}). No fallback fits either. Backends that "
           "support it: {}",
           config.backend, desc, pc.message, reason_name(pc.reason), supporters(sel.considered));
}

std::string Selection::explain() const {
  std::string out = fmt::format("selected: {}\n  because: {}\nconsidered:\n",
                                plugin ? plugin->name() : "none", rule);
  for (const auto& c : considered) {
    out += fmt::format("  {:<20} priority {:>4}  {}\n", c.name, c.priority,
                       c.supported ? "supports" : "no: " + why_not(c).substr(c.name.size() + 1));
  }
  return out;
}

}  // namespace moe
