#include "example_moe.hpp"

#include <algorithm>
#include <cmath>

#include "moe/sdk/formats.hpp"
#include "moe/sdk/struct_io.hpp"
#include "moe/sdk/tensor_checks.hpp"
#include "moe/sdk/weights.hpp"

namespace example {
namespace {

std::vector<float> to_float(const moe_tensor& t, int64_t n) {
  std::vector<float> out(n);
  const auto* bits = static_cast<const uint16_t*>(t.data);
  for (int64_t i = 0; i < n; ++i) out[i] = moe::bf16_to_float(bits[i]);
  return out;
}

// Only the activations the declaration lists reach here.
float activate(moe_activation a, float g, float u) {
  if (a == MOE_ACTIVATION_GELU_MUL) return 0.5f * g * (1.0f + std::erf(g * float(M_SQRT1_2))) * u;
  return g / (1.0f + std::exp(-g)) * u;  // silu_mul
}

}  // namespace

moe::sdk::Verdict check_support(const moe_problem& p) {
  using moe::sdk::Verdict;
  if (p.input_format != MOE_INPUT_BF16)
    return Verdict::no(MOE_REASON_INPUT_FORMAT, "only bf16 activations");
  if (p.activation == MOE_ACTIVATION_GELU_MUL && p.gelu_tanh)
    return Verdict::no(MOE_REASON_ACTIVATION, "only the erf form of gelu_mul");
  if (p.expert_bias) return Verdict::no(MOE_REASON_BIAS, "no expert biases");
  if (p.shared_intermediate || p.sink_experts)
    return Verdict::no(MOE_REASON_SHARED, "no shared or sink experts");
  if (p.ep_placement != MOE_EP_NONE || p.redundant_experts)
    return Verdict::no(MOE_REASON_EP, "no expert parallelism");
  return Verdict::yes("bf16, silu_mul or erf gelu_mul, softmax or sigmoid top-k");
}

Layer::Layer(const moe_problem& p, const moe_weights& w) : p_(p) {
  moe::check_weights(p, w);
  p_.ep_map = nullptr;  // borrowed for the call only; this plugin takes no EP anyway
  w13_ = to_float(w.w13, p.experts * 2 * p.intermediate * p.hidden);
  w2_ = to_float(w.w2, p.experts * p.hidden * p.intermediate);
}

void Layer::run(const moe_run_args& a) const {
  const int64_t tokens = moe::sdk::check_run_tensors(p_, a, 0);
  const int64_t h = p_.hidden, in = p_.intermediate, k = p_.top_k;
  const auto* ids = static_cast<const int32_t*>(a.topk_ids.data);
  const auto* weights = static_cast<const float*>(a.topk_weights.data);
  const std::vector<float> x = to_float(a.hidden, tokens * h);
  std::vector<float> gu(2 * in), act(in), out(h);
  for (int64_t t = 0; t < tokens; ++t) {
    std::fill(out.begin(), out.end(), 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ids[t * k + j];
      if (e < 0) continue;
      MOE_CHECK(e < p_.experts, MOE_STATUS_INVALID_ARGUMENT, "topk_ids[{}][{}]={} >= experts={}", t,
                j, e, p_.experts);
      const float* w13 = w13_.data() + e * 2 * in * h;
      for (int64_t r = 0; r < 2 * in; ++r) {
        float acc = 0.0f;
        for (int64_t c = 0; c < h; ++c) acc += w13[r * h + c] * x[t * h + c];
        gu[r] = acc;
      }
      for (int64_t i = 0; i < in; ++i)
        act[i] = activate(static_cast<moe_activation>(p_.activation), gu[i], gu[in + i]);
      const float* w2 = w2_.data() + e * h * in;
      for (int64_t r = 0; r < h; ++r) {
        float acc = 0.0f;
        for (int64_t i = 0; i < in; ++i) acc += w2[r * in + i] * act[i];
        out[r] += weights[t * k + j] * acc;
      }
    }
    auto* y = static_cast<uint16_t*>(a.output.data) + t * h;
    for (int64_t c = 0; c < h; ++c) y[c] = moe::float_to_bf16(out[c]);
  }
}

void route(const moe_problem& p, const moe_route_args& a) {
  const int64_t tokens = moe::sdk::check_route_tensors(p, a);
  MOE_CHECK(!p.routing_bias, MOE_STATUS_UNSUPPORTED, "routing bias is not supported");
  const int64_t e = p.experts, k = p.top_k;
  const auto* logits = static_cast<const float*>(a.logits.data);
  const auto* padding = static_cast<const uint8_t*>(a.is_padding.data);
  auto* ids = static_cast<int32_t*>(a.topk_ids.data);
  auto* weights = static_cast<float*>(a.topk_weights.data);
  std::vector<float> score(e);
  std::vector<bool> taken(e);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* l = logits + t * e;
    if (p.routing == MOE_ROUTING_SOFTMAX_TOPK) {
      const float m = *std::max_element(l, l + e);
      float sum = 0.0f;
      for (int64_t i = 0; i < e; ++i) sum += score[i] = std::exp(l[i] - m);
      for (float& s : score) s /= sum;
    } else {
      for (int64_t i = 0; i < e; ++i) score[i] = 1.0f / (1.0f + std::exp(-l[i]));
    }
    std::fill(taken.begin(), taken.end(), false);
    float total = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t i = 0; i < e; ++i)
        if (!taken[i] && (best < 0 || score[i] > score[best])) best = i;
      taken[best] = true;
      ids[t * k + j] = static_cast<int32_t>(best);
      total += weights[t * k + j] = score[best];
    }
    for (int64_t j = 0; j < k; ++j) {
      if (padding && padding[t])
        ids[t * k + j] = -1, weights[t * k + j] = 0.0f;
      else if (p.renormalize)
        weights[t * k + j] /= total;
    }
  }
}

}  // namespace example
