// The answer a backend gives to "can you take this problem?": yes, or no with a reason code and
// one sentence (moe_support.reason / .message).
#pragma once

#include <string>
#include <utility>

#include "moe/abi/moe_abi.h"

namespace moe::sdk {

// An answer of supports() / can_route(): yes, or no with a reason code and one sentence.
struct Verdict {
  moe_reason reason = MOE_REASON_NONE;
  std::string message;
  static Verdict yes(std::string message = "") { return {MOE_REASON_NONE, std::move(message)}; }
  static Verdict no(moe_reason reason, std::string message) { return {reason, std::move(message)}; }
  bool ok() const { return reason == MOE_REASON_NONE; }
};

}  // namespace moe::sdk
