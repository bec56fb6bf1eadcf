// Backend selection that explains itself: the chosen plugin, the rule that chose it, and for
// every plugin found whether it supports the problem and why not. Selection loads only the
// plugins it has to ask (docs/design.md §2 rule 6).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "moe/config.hpp"
#include "moe/registry.hpp"

namespace moe {

struct Candidate {
  std::string name;
  int32_t priority = 0;  // what `backend: auto` ranks it by for this problem (priority_for)
  bool supported = false;
  moe_reason reason = MOE_REASON_OTHER;
  std::string message;
  bool asked = true;  // false: the choice was made before its turn came (`message` says so)
  DecodeRule decode;  // the plugin's decode rule (ABI 1.3), if it declares one
  int format = -1;    // the problem's weight format: the rule's limit is per format (ABI 1.5)
  bool decode_applies = false;  // the problem's max_tokens is within it: `priority` is its own
};

struct Selection {
  std::shared_ptr<Plugin> plugin;
  std::string rule;                   // why this one, in words
  std::vector<Candidate> considered;  // every plugin found, in discovery order
  Options options;                    // what `plugin`'s prepare gets: options_for(its config)
  std::vector<std::string> options_left_out;  // the named backend's plain options, a fallback won
  std::string explain() const;                // multi-line report for `moe select`
};

// The config's options for `plugin`: its section (options: {NAME: {...}}, NAME its name or an
// alias), and the plain entries when `plugin` is the backend the config names. An entry in both
// is a CONFIG_ERROR, and so is a section naming no plugin the registry found.
Options options_for(const Registry& registry, const Config& config, const Plugin& plugin);

// How many plugins select_backend asks. kNeeded: in the rule's order (by priority for auto; the
// named backend, then its fallbacks) until one supports the problem, so only those are loaded;
// the others are listed as not asked. kEvery: every plugin answers (`moe select`: why not the
// others). Either way a plugin whose declared formats or activations exclude the problem answers
// no without being loaded, and one that cannot be loaded answers no with a warning naming it.
enum class Ask { kNeeded, kEvery };

// A plugin's answer as selection gives it: the no of its declared format and activation masks
// (without loading it), else its supports(). `moe describe` and moe_host_supports answer through
// it, so they agree with `moe select`.
Support declared_support(const Plugin& plugin, const moe_problem& problem);

// Asks every plugin found whether it supports the problem, loading each one whose declared
// capabilities do not already say no (a failing load or supports() is a "no").
std::vector<Candidate> evaluate(const Registry& registry, const moe_problem& problem);

// backend: NAME -> that plugin, else the first supporting `fallback`; backend: auto -> the
// supporting plugin of highest priority for the problem (its decode priority where its decode
// rule covers the problem's max_tokens in the problem's weight format; the first found on a tie).
// Throws CONFIG_ERROR for unknown names (listing the available ones) and UNSUPPORTED when nothing
// fits (with each plugin's reason and who would fit: every plugin is asked then).
Selection select_backend(const Registry& registry, const Config& config, Ask ask = Ask::kNeeded);

// "priority 40" or "priority 40, decode priority 70 for max_tokens <= 8 (fp8_block: none;
// mxfp4, nvfp4: <= 32)": what `backend: auto` ranks a plugin by, as `moe list`, `moe describe` and
// moe_host_describe print it.
std::string priority_text(const PluginInfo& info);

}  // namespace moe
