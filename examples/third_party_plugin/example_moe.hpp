// An independent CPU implementation of a bf16 MoE layer: fp32 accumulation, routing in fp32.
// It exists to show how a third party writes a backend; the conformance suite checks it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moe/abi/moe_abi.h"
#include "moe/sdk/verdict.hpp"

namespace example {

// Yes, or the reason code and a sentence, for what the declared lists do not cover.
moe::sdk::Verdict check_support(const moe_problem& p);

class Layer {
 public:
  Layer(const moe_problem& p, const moe_weights& w);
  void run(const moe_run_args& args) const;

 private:
  moe_problem p_;
  std::vector<float> w13_;  // [E, 2I, H]
  std::vector<float> w2_;   // [E, H, I]
};

// softmax_topk / sigmoid_topk in fp32, ties to the lowest index.
void route(const moe_problem& p, const moe_route_args& args);

}  // namespace example
