#include "json_reports.hpp"

#include <fmt/format.h>

#include "commands.hpp"
#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/version.hpp"

namespace moe::tool {
namespace {

// null, or {"priority": 70, "max_tokens": 8, "max_tokens_by_format": {"mxfp4": 32}}: a plugin's
// decode rule (ABI 1.3), with the formats whose limits are their own (ABI 1.5; -1: none there).
nlohmann::json decode_rule_json(const DecodeRule& rule) {
  if (!rule.declared()) return nullptr;
  nlohmann::json by_format = nlohmann::json::object();
  for (int f = 0; f < MOE_DECODE_FORMATS; ++f) {
    const int64_t v = rule.by_format[size_t(f)];
    if (v == 0) continue;
    by_format[value_name(f, format_bit_name)] = v;
  }
  return {{"priority", rule.priority},
          {"max_tokens", rule.max_tokens},
          {"max_tokens_by_format", by_format}};
}

nlohmann::json candidate_json(const Candidate& c) {
  nlohmann::json supported, reason;  // null for a plugin not asked (chosen before its turn)
  if (c.asked) supported = c.supported;
  if (c.asked && !c.supported) reason = reason_name(c.reason);
  nlohmann::json out = {{"name", c.name},
                        {"priority", c.priority},
                        {"supported", supported},
                        {"reason", reason},
                        {"message", c.message}};
  // "applies": the problem's max_tokens is within the rule's limit in the problem's format
  // ("limit", 0 where the rule has none in it), so `priority` is the decode priority.
  out["decode_rule"] = decode_rule_json(c.decode);
  if (c.decode.declared()) {
    out["decode_rule"]["applies"] = c.decode_applies;
    out["decode_rule"]["limit"] = c.decode.limit(c.format);
  }
  return out;
}

}  // namespace

// What run() takes besides a plain run (ABI 1.4, 1.6), by name.
static nlohmann::json run_feature_names(const PluginInfo& i) {
  nlohmann::json names = nlohmann::json::array();
  if (i.accumulates()) names.push_back("accumulate");
  if (i.routes_in_run()) names.push_back("routes");
  return names;
}

nlohmann::json plugin_json(const Plugin& p) {
  const PluginInfo& i = p.info();
  nlohmann::json build;  // null: a plugin older than ABI 1.2 does not say
  if (i.build)
    build = {{"sdk_version", i.build->sdk_version},
             {"compiler", i.build->compiler},
             {"cuda_runtime", i.build->cuda_runtime},
             {"targets", i.build->targets}};
  return {{"name", i.name},
          {"version", i.version},
          {"abi", fmt::format("{}.{}", i.abi_major, i.abi_minor)},
          {"priority", i.priority},
          {"decode_rule", decode_rule_json(i.decode)},
          {"memory", memory_name(i.memory)},
          {"aliases", i.aliases},
          {"description", i.description},
          {"formats", mask_list(i.format_mask, format_bit_name)},
          {"activations", mask_list(i.activation_mask, activation_bit_name)},
          {"routings", mask_list(i.routing_mask, routing_bit_name)},
          {"run_features", run_feature_names(i)},
          {"path", p.path().string()},
          {"build", build}};
}

nlohmann::json list_json(const Registry& r) {
  nlohmann::json plugins = nlohmann::json::array(), skipped = nlohmann::json::array();
  for (const auto& p : r.plugins()) plugins.push_back(plugin_json(*p));
  for (const auto& s : r.skipped()) skipped.push_back({{"path", s.path}, {"reason", s.reason}});
  return {{"moe_registry", MOE_REGISTRY_SDK_VERSION},
          {"core_abi", fmt::format("{}.{}", MOE_ABI_VERSION_MAJOR, MOE_ABI_VERSION_MINOR)},
          {"searched", r.searched()},
          {"plugins", plugins},
          {"skipped", skipped}};
}

nlohmann::json select_json(const Config& cfg, const Registry& r,
                           const std::optional<Selection>& sel, const std::string& error) {
  nlohmann::json considered = nlohmann::json::array();
  // A failed selection leaves no Selection behind: ask every plugin again for the answers.
  for (const Candidate& c : sel ? sel->considered : evaluate(r, cfg.problem.c()))
    considered.push_back(candidate_json(c));
  nlohmann::json selected, rule, because;
  if (sel) {
    selected = {{"name", sel->plugin->name()},
                {"version", sel->plugin->info().version},
                {"path", sel->plugin->path().string()}};
    rule = selection_rule(*sel, cfg);
    because = sel->rule;
  }
  return {{"config", cfg.source},
          {"problem", describe_problem(cfg.problem.c())},
          {"backend", cfg.backend},
          {"fallback", cfg.fallback},
          {"selected", selected},
          {"rule", rule},
          {"because", because},
          {"error", error.empty() ? nlohmann::json() : nlohmann::json(error)},
          {"considered", considered}};
}

}  // namespace moe::tool
