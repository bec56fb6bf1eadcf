#include "moe/selection.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"

namespace moe {
namespace {

std::string why_not(const Candidate& c) {
  return fmt::format("{} ({}): {}", c.name, reason_name(c.reason), c.message);
}

std::string supporters(const std::vector<Candidate>& all) {
  std::string out;
  for (const auto& c : all)
    if (c.supported) out += (out.empty() ? "" : ", ") + c.name;
  return out.empty() ? "none" : out;
}

// "bf16,fp8_block": the values of an ABI enum whose bits are set in `mask`.
template <class E>
std::string declared(uint32_t mask, const char* (*name)(E)) {
  std::string out;
  for (int bit = 0; bit < 32; ++bit) {
    if (!(mask >> bit & 1u)) continue;
    if (!out.empty()) out += ',';
    out += name(static_cast<E>(bit));
  }
  return out.empty() ? "no" : out;
}

// A plugin's entry before its answer: what it ranks by for this problem, and its decode rule.
Candidate unanswered(const Plugin& plugin, const moe_problem& p) {
  const PluginInfo& i = plugin.info();
  Candidate c;
  c.name = plugin.name();
  c.priority = i.priority_for(p.max_tokens, p.format);
  c.decode = i.decode;
  c.format = p.format;
  c.decode_applies = i.decode.covers(p.max_tokens, p.format);
  return c;
}

// The no that a plugin's declared capabilities (get_info's masks, known from the scan) already
// give, without loading it: a weight format or an activation it does not list.
std::optional<Candidate> refused_by_declaration(const Plugin& plugin, const moe_problem& p) {
  const PluginInfo& i = plugin.info();
  Candidate c = unanswered(plugin, p);
  if (p.format >= 0 && p.format < 32 && !(i.format_mask >> p.format & 1u)) {
    c.reason = MOE_REASON_FORMAT;
    c.message = fmt::format("only {} weights in its format_mask, not {}",
                            declared(i.format_mask, format_name),
                            format_name(static_cast<moe_format>(p.format)));
    return c;
  }
  if (p.activation >= 0 && p.activation < 32 && !(i.activation_mask >> p.activation & 1u)) {
    c.reason = MOE_REASON_ACTIVATION;
    c.message = fmt::format("only {} activations in its activation_mask, not {}",
                            declared(i.activation_mask, activation_name),
                            activation_name(static_cast<moe_activation>(p.activation)));
    return c;
  }
  return std::nullopt;
}

// One plugin's answer: from its declaration when that excludes the problem, else from its
// supports(), which loads it. Failing to load or to answer is a no.
Candidate answer_of(const Plugin& plugin, const moe_problem& problem) {
  if (auto refused = refused_by_declaration(plugin, problem)) return *refused;
  Candidate c = unanswered(plugin, problem);
  try {
    plugin.load();
  } catch (const Error& e) {
    spdlog::warn("{}; selection goes on without it", e.what());
    c.message = e.what();
    return c;
  }
  try {
    const Support s = plugin.supports(problem);
    c.supported = s.supported;
    c.reason = s.supported ? MOE_REASON_NONE : s.reason;
    c.message = s.message;
  } catch (const Error& e) {
    c.message = fmt::format("supports() failed: {}", e.what());
  }
  return c;
}

// The answers of one selection, each asked at most once, in discovery order.
class Answers {
 public:
  Answers(const Registry& registry, const moe_problem& problem)
      : plugins_(registry.plugins()), problem_(problem), answers_(plugins_.size()) {}

  size_t index_of(const Plugin& plugin) const {
    for (size_t i = 0; i < plugins_.size(); ++i)
      if (plugins_[i].get() == &plugin) return i;
    throw Error(MOE_STATUS_INTERNAL, "plugin '" + plugin.name() + "' is not in the registry");
  }
  const Candidate& of(size_t i) {
    if (!answers_[i]) answers_[i] = answer_of(*plugins_[i], problem_);
    return *answers_[i];
  }
  const Candidate& of(const Plugin& plugin) { return of(index_of(plugin)); }
  void ask_all() {
    for (size_t i = 0; i < plugins_.size(); ++i) of(i);
  }
  // Every plugin; those not asked say who was chosen before their turn.
  std::vector<Candidate> all(const Plugin* chosen) const {
    std::vector<Candidate> out;
    for (size_t i = 0; i < plugins_.size(); ++i) {
      if (answers_[i]) {
        out.push_back(*answers_[i]);
        continue;
      }
      Candidate c = unanswered(*plugins_[i], problem_);
      c.message = fmt::format("not asked: '{}' was chosen first", chosen ? chosen->name() : "");
      c.asked = false;
      out.push_back(std::move(c));
    }
    return out;
  }

 private:
  const std::vector<std::shared_ptr<Plugin>>& plugins_;
  moe_problem problem_;
  std::vector<std::optional<Candidate>> answers_;
};

// The name of a weight format, for the decode rule's words ("format 9" past the known ones).
std::string format_words(int format) {
  if (format >= 0 && format < MOE_FORMAT_COUNT_)
    return format_name(static_cast<moe_format>(format));
  return fmt::format("format {}", format);
}

// "max_tokens <= 8", or "mxfp4 at max_tokens <= 32" where the format has a limit of its own (ABI
// 1.5): the decode rule's limit in the problem's format, which must have one.
std::string limit_words(const DecodeRule& rule, int format) {
  return rule.own(format) > 0
             ? fmt::format("{} at max_tokens <= {}", format_words(format), rule.limit(format))
             : fmt::format("max_tokens <= {}", rule.limit(format));
}

// "70, cutlass_mega's decode priority for max_tokens <= 8, here 8": the priority that won under
// `backend: auto`, and whether the winner's decode rule gave it.
std::string winning_priority(const PluginInfo& i, int64_t max_tokens, int format) {
  if (!i.decode.declared()) return std::to_string(i.priority);
  if (i.decode.covers(max_tokens, format))
    return fmt::format("{}, {}'s decode priority for {}, here {}", i.decode.priority, i.name,
                       limit_words(i.decode, format), max_tokens);
  if (i.decode.limit(format) == 0)
    return fmt::format("{}; {}'s decode priority {} is not for {} weights", i.priority, i.name,
                       i.decode.priority, format_words(format));
  return fmt::format("{}; {}'s decode priority {} is for {}, not {}", i.priority, i.name,
                     i.decode.priority, limit_words(i.decode, format), max_tokens);
}

// The decode rule beside a plugin's answer in `moe select`'s table ("" without one).
std::string decode_note(const Candidate& c) {
  if (!c.decode.declared()) return "";
  if (c.decode_applies)
    return fmt::format("  [decode priority for {}]", limit_words(c.decode, c.format));
  if (c.decode.limit(c.format) == 0)
    return fmt::format("  [decode priority {} not for {} weights]", c.decode.priority,
                       format_words(c.format));
  return fmt::format("  [decode priority {} only for {}]", c.decode.priority,
                     limit_words(c.decode, c.format));
}

std::shared_ptr<Plugin> find_or_throw(const Registry& registry, const std::string& name,
                                      const char* key, const std::string& source) {
  const bool fallback = std::string(key) == "fallback";
  MOE_CHECK(!(fallback && name == "auto"), MOE_STATUS_CONFIG_ERROR,
            "{}: 'auto' in fallback: auto chooses the backend (backend: auto), a fallback names "
            "one; list the backends to try, in order",
            source);
  auto plugin = registry.find(name);
  MOE_CHECK(plugin != nullptr, MOE_STATUS_CONFIG_ERROR,
            "{}: unknown backend '{}' in {}; available: {}{}", source, name, key, registry.names(),
            fallback ? "" : " (or auto)");
  return plugin;
}

}  // namespace

Support declared_support(const Plugin& plugin, const moe_problem& problem) {
  if (const auto no = refused_by_declaration(plugin, problem))
    return {false, no->reason, no->message, -1};
  return plugin.supports(problem);
}

std::vector<Candidate> evaluate(const Registry& registry, const moe_problem& problem) {
  Answers answers(registry, problem);
  answers.ask_all();
  return answers.all(nullptr);
}

Options options_for(const Registry& registry, const Config& config, const Plugin& plugin) {
  Options out;
  if (config.backend != "auto" && plugin.answers_to(config.backend)) out = config.options;
  for (const auto& section : config.plugin_options) {
    const auto named = registry.find(section.plugin);
    MOE_CHECK(named != nullptr, MOE_STATUS_CONFIG_ERROR,
              "{}: options.{}: no plugin of that name or alias was found; available: {}",
              section.where, section.plugin, registry.names());
    if (named.get() != &plugin) continue;
    for (const auto& entry : section.options) {  // no structured binding: the lambda names it
      const bool twice = std::any_of(out.begin(), out.end(),
                                     [&](const auto& kv) { return kv.first == entry.first; });
      MOE_CHECK(!twice, MOE_STATUS_CONFIG_ERROR,
                "{}: options.{}.{} is given twice for plugin '{}' (in its section and as a plain "
                "entry, or in two sections naming it): give it once",
                section.where, section.plugin, entry.first, plugin.name());
      out.push_back(entry);
    }
  }
  return out;
}

Selection select_backend(const Registry& registry, const Config& config, Ask ask) {
  const moe_problem problem = config.problem.c();
  const std::string desc = describe_problem(problem);
  Answers answers(registry, problem);
  Selection sel;
  auto chosen = [&](std::shared_ptr<Plugin> plugin, std::string rule) {
    sel.plugin = std::move(plugin);
    sel.rule = std::move(rule);
    sel.considered = answers.all(sel.plugin.get());
    sel.options = options_for(registry, config, *sel.plugin);
    if (config.backend != "auto" && !sel.plugin->answers_to(config.backend))
      for (const auto& kv : config.options) sel.options_left_out.push_back(kv.first);
    return sel;
  };

  std::vector<std::shared_ptr<Plugin>> fallbacks;
  for (const auto& name : config.fallback)
    fallbacks.push_back(find_or_throw(registry, name, "fallback", config.source));
  if (ask == Ask::kEvery) answers.ask_all();

  if (config.backend == "auto") {
    // By priority for this problem's max_tokens (a decode rule may raise a plugin's), the first
    // found first on a tie: the first that says yes is the choice.
    const int64_t max_tokens = problem.max_tokens;
    const int format = problem.format;
    std::vector<std::shared_ptr<Plugin>> order = registry.plugins();
    std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
      return a->info().priority_for(max_tokens, format) >
             b->info().priority_for(max_tokens, format);
    });
    for (const auto& plugin : order) {
      if (answers.of(*plugin).supported) {
        return chosen(plugin,
                      fmt::format("auto: highest priority ({}) among the plugins that support {}",
                                  winning_priority(plugin->info(), max_tokens, format), desc));
      }
    }
    std::string reasons;
    for (const auto& c : answers.all(nullptr)) reasons += "\n  " + why_not(c);
    MOE_FAIL(MOE_STATUS_UNSUPPORTED, "no plugin supports {} (searched: {}){}", desc,
             registry.names(), reasons);
  }

  auto primary = find_or_throw(registry, config.backend, "backend", config.source);
  const Candidate pc = answers.of(*primary);
  if (pc.supported)
    return chosen(primary, fmt::format("named in {} (backend: {})", config.source, config.backend));
  for (const auto& fb : fallbacks) {
    if (answers.of(*fb).supported) {
      return chosen(fb, fmt::format("fallback: backend '{}' does not support the problem [{}]",
                                    config.backend, why_not(pc)));
    }
  }
  answers.ask_all();  // to say who would fit
  MOE_FAIL(MOE_STATUS_UNSUPPORTED,
           "backend '{}' does not support {}: {} ({}). {}Backends that support it: {}",
           config.backend, desc, pc.message, reason_name(pc.reason),
           fallbacks.empty() ? "The config names no fallback. " : "No fallback fits either. ",
           supporters(answers.all(nullptr)));
}

std::string Selection::explain() const {
  std::string out = fmt::format("selected: {}\n  because: {}\nconsidered:\n",
                                plugin ? plugin->name() : "none", rule);
  for (const auto& c : considered) {
    out += fmt::format("  {:<20} priority {:>4}  {}{}\n", c.name, c.priority,
                       c.supported ? "supports"
                       : !c.asked  ? c.message
                                   : "no: " + why_not(c).substr(c.name.size() + 1),
                       decode_note(c));
  }
  if (plugin && !options.empty()) {
    std::string given;
    for (const auto& [key, value] : options)
      given += fmt::format("{}{}={}", given.empty() ? "" : ", ", key, value);
    out += fmt::format("options for {}: {}\n", plugin->name(), given);
  }
  if (!options_left_out.empty())
    out += fmt::format("options left out (the named backend's, not its fallback's): {}\n",
                       fmt::join(options_left_out, ", "));
  return out;
}

std::string priority_text(const PluginInfo& i) {
  if (!i.decode.declared()) return fmt::format("priority {}", i.priority);
  std::string out = fmt::format("priority {}, decode priority {}", i.priority, i.decode.priority);
  out += i.decode.max_tokens > 0 ? fmt::format(" for max_tokens <= {}", i.decode.max_tokens)
                                 : std::string(" only in these formats");
  // The formats with limits of their own, grouped by limit in the order of the first format of
  // each (moe_format's): " (fp8_block: none; mxfp4, nvfp4: <= 32)".
  std::vector<std::pair<int64_t, std::string>> groups;
  for (int f = 0; f < MOE_DECODE_FORMATS; ++f) {
    const int64_t v = i.decode.by_format[size_t(f)];
    if (v == 0) continue;
    auto g =
        std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == v; });
    if (g == groups.end())
      groups.emplace_back(v, format_words(f));
    else
      g->second += ", " + format_words(f);
  }
  std::string own;
  for (const auto& [v, names] : groups)
    own += (own.empty() ? "" : "; ") + names + ": " + (v > 0 ? fmt::format("<= {}", v) : "none");
  return own.empty() ? out : out + " (" + own + ")";
}

}  // namespace moe
