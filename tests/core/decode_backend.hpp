// A backend on the SDK's table builder that only declares a decode rule (ABI 1.3): priority 40, 70
// up to kMaxTokens, and Limits::value() as its limits by format (ABI 1.5), for the tests of what
// get_info writes (abi_decode_rule_test.cpp, abi_decode_by_format_test.cpp).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "moe/sdk/backend.hpp"

namespace moe::test {

struct NoFormatLimits {
  static std::vector<std::pair<moe_format, int64_t>> value() { return {}; }
};

template <int64_t kMaxTokens, class Limits = NoFormatLimits>
class DecodeBackend {
 public:
  struct Layer {};

  static sdk::BackendInfo info() {
    return {.name = "sdk_decode_test",
            .version = "test",
            .description = "test backend: a decode rule",
            .aliases = {},
            .priority = 40,
            .decode_priority = 70,
            .decode_max_tokens = kMaxTokens,
            .decode_max_tokens_by_format = Limits::value(),
            .formats = {MOE_FORMAT_BF16, MOE_FORMAT_MXFP4},
            .activations = {MOE_ACTIVATION_SILU_MUL},
            .routings = {}};
  }
  sdk::Verdict supports(const moe_problem&) const { return sdk::Verdict::yes(); }
  std::unique_ptr<Layer> prepare(const sdk::PrepareRequest&) const {
    return std::make_unique<Layer>();
  }
  void run(Layer&, const moe_run_args&) const {}
};

}  // namespace moe::test
