// The reference layer: canonical weights kept as given, dequantised exactly on use, every sum
// in double. Slow on purpose and never clever; it is the oracle the other backends answer to.
// Its GEMMs go through ExpertGemms, so the GPU oracle (plugins/gpu_oracle) runs this same layer
// with cuBLAS GEMMs and inherits everything else.
#pragma once

#include <memory>

#include "expert_gemms.hpp"
#include "moe/abi/moe_abi.h"
#include "moe/sdk/problem.hpp"

namespace moe::reference {

class Layer {
 public:
  // The reference: Fp64Gemms over copies of the weights.
  Layer(const moe_problem& problem, const moe_weights& weights);
  // The same layer with the GEMMs of `gemms`, made from layer_mlps(problem, weights).
  Layer(const moe_problem& problem, const moe_weights& weights,
        std::unique_ptr<const ExpertGemms> gemms);
  // Host tensors. Output may be bf16 (as every backend) or f32/f64 (oracle use).
  void run(const moe_run_args& args) const;

 private:
  void read_activation_scales(const moe_weights& w);

  Problem problem_;
  std::unique_ptr<const ExpertGemms> gemms_;
  float a13_scale_ = 0.0f, a2_scale_ = 0.0f;  // fp8_tensor_static activation scales
};

}  // namespace moe::reference
