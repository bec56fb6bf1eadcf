// The expert MLPs of a layer as the canonical weights give them: which MLPs there are, their
// shapes, and each one's matrices borrowed from moe_weights (prepare time only). The reference
// copies them; the GPU oracle dequantises and uploads them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "moe/abi/moe_abi.h"

namespace moe::reference {

// Routed experts (local order), the weight-1 shared expert, the bf16 silu_mul sink experts.
enum class MlpKind { kRouted, kShared, kSink };
const char* mlp_kind_name(MlpKind kind);

struct MlpId {
  MlpKind kind = MlpKind::kRouted;
  int64_t index = 0;  // local expert, 0 for the shared expert, sink number
};

// w13 [rows13, hidden], w2 [hidden, inter]; rows13 = 2 * inter for gated activations.
struct MlpShape {
  moe_format format = MOE_FORMAT_BF16;
  int64_t rows13 = 0, hidden = 0, inter = 0;
};
MlpShape mlp_shape(const moe_problem& p, MlpKind kind);

// One matrix [rows, cols] of canonical weights, borrowed from the caller's tensors.
struct MatrixRef {
  moe_format format = MOE_FORMAT_BF16;
  int64_t rows = 0, cols = 0;
  const uint8_t* q = nullptr;       // elements as stored (bf16 bits, e4m3, packed e2m1)
  const uint8_t* scales = nullptr;  // scale bytes as stored (f32, ue8m0 or e4m3); NULL if none
  float scale_2 = 1.0f;             // nvfp4 global scale
  size_t q_bytes = 0, scale_bytes = 0;

  void dequantize(double* out /* out, [rows, cols] */) const;  // exact (formats.hpp)
  // The scale bytes the layer computes with: as stored, fp8_block's floored at 1e-10 (§6).
  std::vector<uint8_t> scales_as_used() const;
};

struct MlpRef {
  MlpId id;
  MatrixRef w13, w2;
  std::vector<double> b13, b2;  // [rows13], [hidden] widened from the tensors; empty without
};

// Every MLP of the layer in the order routed 0.., shared, sinks 0... Checks the weights
// (check_weights, finite positive scale_2) and throws moe::Error naming what is wrong.
std::vector<MlpRef> layer_mlps(const moe_problem& p, const moe_weights& w);

}  // namespace moe::reference
