// The reference layer: canonical weights kept as given, dequantised exactly on use, every sum
// in double. Slow on purpose and never clever; it is the oracle the other backends answer to.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "moe/moe_abi.h"
#include "moe/problem.hpp"

namespace moe::reference {

// One matrix [rows, cols] of canonical weights, copied at prepare.
struct QuantMatrix {
  moe_format format = MOE_FORMAT_BF16;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> q;       // elements as stored (bf16 bits, e4m3, packed e2m1)
  std::vector<uint8_t> scales;  // scale bytes as stored (f32, ue8m0 or e4m3)
  float scale_2 = 1.0f;         // nvfp4 global scale

  std::vector<double> dequantize() const;  // [rows, cols]
};

// One expert MLP: GEMM1 (+b13), activation, GEMM2 (+b2).
struct Mlp {
  QuantMatrix w13, w2;
  std::vector<double> b13, b2;  // empty without biases
};

class Layer {
 public:
  Layer(const moe_problem& problem, const moe_weights& weights);
  // Host tensors. Output may be bf16 (as every backend) or f32/f64 (oracle use).
  void run(const moe_run_args& args) const;

 private:
  Problem problem_;
  std::vector<Mlp> experts_;                  // local experts, local order
  std::optional<Mlp> shared_;                 // weight-1 shared expert, layer format
  std::vector<Mlp> sinks_;                    // bf16 silu_mul sink experts
  float a13_scale_ = 0.0f, a2_scale_ = 0.0f;  // fp8_tensor_static activation scales
};

}  // namespace moe::reference
