// Backend selection that explains itself: the chosen plugin, the rule that chose it, and for
// every plugin found whether it supports the problem and why not.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "moe/config.hpp"
#include "moe/registry.hpp"

namespace moe {

struct Candidate {
  std::string name;
  int32_t priority = 0;
  bool supported = false;
  moe_reason reason = MOE_REASON_OTHER;
  std::string message;
};

struct Selection {
  std::shared_ptr<Plugin> plugin;
  std::string rule;                   // why this one, in words
  std::vector<Candidate> considered;  // every plugin found, in discovery order
  std::string explain() const;        // multi-line report for `moe select`
};

// Asks every plugin found whether it supports the problem (a failing supports() is a "no").
std::vector<Candidate> evaluate(const Registry& registry, const moe_problem& problem);

// backend: NAME -> that plugin, else the first supporting `fallback`; backend: auto -> the
// supporting plugin of highest priority. Throws CONFIG_ERROR for unknown names (listing the
// available ones) and UNSUPPORTED when nothing fits (with each reason and who would fit).
Selection select_backend(const Registry& registry, const Config& config);

}  // namespace moe
