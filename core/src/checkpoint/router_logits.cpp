// The router GEMM of a checkpoint's layer: hidden [T, H] x router weight^T -> logits [T, E + S],
// in the precision `router_dtype` names (docs/design.md §3.4). Plugins take logits; this is the
// only place the project computes them from hidden states.
#include <fmt/format.h>

#include <limits>
#include <vector>

#include "moe/checkpoint.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/host_tensor.hpp"
#include "source_base.hpp"

namespace moe {
namespace {

// One GEMM operand as f32 values in the router's precision: under bf16 an f32 value is rounded
// to nearest even (a bf16 one stays as it is), under fp32 it is kept and a bf16 one widened.
std::vector<float> operand(const HostTensor& t, RouterDtype dtype, const char* what) {
  MOE_CHECK(t.dtype() == MOE_DTYPE_BF16 || t.dtype() == MOE_DTYPE_F32, MOE_STATUS_DTYPE_MISMATCH,
            "router GEMM: {} must be bf16 or f32", what);
  std::vector<float> out = detail::to_floats(t);
  if (dtype == RouterDtype::kBf16 && t.dtype() == MOE_DTYPE_F32)
    for (float& v : out) v = bf16_to_float(float_to_bf16(v));
  return out;
}

}  // namespace

HostTensor router_logits(const LayerCheckpoint& layer, const moe_problem& p,
                         const HostTensor& hidden, RouterDtype dtype) {
  MOE_CHECK(!layer.router_weight.empty(), MOE_STATUS_NOT_FOUND,
            "the checkpoint has no router weight: give router_logits with --inputs");
  MOE_CHECK(hidden.shape().size() == 2 && hidden.shape()[1] == p.hidden, MOE_STATUS_SHAPE_MISMATCH,
            "router GEMM: hidden states must be [T, {}]", p.hidden);
  const int64_t tokens = hidden.shape()[0], h = p.hidden, real = layer.real_experts;
  const int64_t rows = layer.router_weight.shape()[0];  // real + sinks
  const int64_t cols = p.experts + p.sink_experts;
  const std::vector<float> x = operand(hidden, dtype, "hidden states");            // (T, H)
  const std::vector<float> w = operand(layer.router_weight, dtype, "the router");  // (E_real+S, H)
  HostTensor logits(MOE_DTYPE_F32, {tokens, cols});
  for (int64_t t = 0; t < tokens; ++t) {
    float* out = logits.data<float>() + t * cols;
    for (int64_t c = 0; c < cols; ++c) out[c] = -std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
      float acc = 0.0f;  // fp32 sums in both precisions, as a bf16 tensor-core GEMM accumulates
      for (int64_t k = 0; k < h; ++k) acc += w[r * h + k] * x[t * h + k];
      // The bias (gpt-oss) is added to the f32 sum as stored, outside the GEMM.
      if (!layer.router_bias.empty()) acc += layer.router_bias.data<float>()[r];
      // Routed experts fill [0, real); sinks sit after the padded routed columns.
      out[r < real ? r : p.experts + (r - real)] = acc;
    }
  }
  return logits;
}

}  // namespace moe
