#include "routing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"

namespace moe::reference {
namespace {

// One token's answer, best first: k routed experts, then the S sinks for sigmoid_bias_sink.
struct Choice {
  std::vector<int64_t> ids;
  std::vector<double> weights;
};

// NaN ranks below every number, so a NaN score never displaces a real one.
bool better(double a, double b) {
  return !std::isnan(a) && (std::isnan(b) || a > b);
}

// Indices of the k best scores, best first. `better` is strict, so on a tie the index found first
// (the lowest) stays: this is the one place the tie rule lives. Only indices with allowed[i]
// compete (empty = all).
std::vector<int64_t> top_k_indices(std::span<const double> scores, int64_t k,
                                   const std::vector<bool>& allowed = {}) {
  const int64_t n = static_cast<int64_t>(scores.size());
  std::vector<bool> taken(n, false);
  std::vector<int64_t> out;
  for (int64_t slot = 0; slot < k; ++slot) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (taken[i] || (!allowed.empty() && !allowed[i])) continue;
      if (best < 0 || better(scores[i], scores[best])) best = i;
    }
    MOE_CHECK(best >= 0, MOE_STATUS_INTERNAL, "top-{} of {} candidates: too few candidates", k, n);
    taken[best] = true;
    out.push_back(best);
  }
  return out;
}

std::vector<double> sigmoid_scores(const float* logits, int64_t n) {
  std::vector<double> s(n);
  for (int64_t i = 0; i < n; ++i) s[i] = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[i])));
  return s;
}

// Subtracting the max keeps exp() finite; it cancels in the ratio.
std::vector<double> softmax_scores(std::span<const double> x) {
  double max = x[0];
  for (double v : x) max = std::max(max, v);
  std::vector<double> p(x.size());
  double sum = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    p[i] = std::exp(x[i] - max);
    sum += p[i];
  }
  for (double& v : p) v /= sum;
  return p;
}

std::vector<double> softmax_scores(const float* logits, int64_t n) {
  return softmax_scores(std::vector<double>(logits, logits + n));
}

// The score selection looks at: bias only steers the choice, weights come from `s` itself.
std::vector<double> with_bias(const std::vector<double>& s, const float* bias) {
  std::vector<double> b = s;
  if (bias != nullptr)
    for (size_t i = 0; i < b.size(); ++i) b[i] += bias[i];
  return b;
}

std::vector<double> gather(const std::vector<double>& s, const std::vector<int64_t>& ids) {
  std::vector<double> w;
  for (int64_t id : ids) w.push_back(s[id]);
  return w;
}

// log(sigmoid(a)) written so that exp() never overflows: exp(-|a|) <= 1.
double log_sigmoid(double a) {
  return std::min(a, 0.0) - std::log1p(std::exp(-std::abs(a)));
}

// The chosen scores `w` divided by their sum. Where the sum is below the smallest normal double
// (every chosen score underflowed: a sigmoid logit below about -708, or softmax numerators that a
// selection bias chose far below the row's max), w / sum would be 0 / 0 or lose its digits: the
// weights are then the ratio's limit, a softmax of the scores' logs (`logs`: log-sigmoid, or the
// logit for softmax, whose normaliser cancels). A NaN sum stays NaN (docs/design.md §4).
void renormalize(std::vector<double>& w, const std::vector<double>& logs) {
  double sum = 0.0;
  for (double v : w) sum += v;
  if (!(sum < std::numeric_limits<double>::min())) {
    for (double& v : w) v /= sum;
    return;
  }
  w = softmax_scores(logs);
}

// The logs of the chosen experts' unbiased scores, for renormalize.
std::vector<double> score_logs(bool softmax, const float* logits, const std::vector<int64_t>& ids) {
  std::vector<double> l;
  for (int64_t id : ids)
    l.push_back(softmax ? static_cast<double>(logits[id]) : log_sigmoid(logits[id]));
  return l;
}

// softmax_topk and sigmoid_topk.
Choice route_topk(const moe_problem& p, const float* logits, const float* bias) {
  const std::vector<double> s = p.routing == MOE_ROUTING_SOFTMAX_TOPK
                                    ? softmax_scores(logits, p.experts)
                                    : sigmoid_scores(logits, p.experts);
  Choice c;
  c.ids = top_k_indices(with_bias(s, bias), p.top_k);
  c.weights = gather(s, c.ids);
  if (p.renormalize)
    renormalize(c.weights, score_logs(p.routing == MOE_ROUTING_SOFTMAX_TOPK, logits, c.ids));
  return c;
}

// Experts of the best topk_group groups (contiguous runs of E / num_groups). A group scores the
// sum of its top-2 biased scores when there is a bias (noaux_tc), else its best unbiased score.
std::vector<bool> kept_experts(const moe_problem& p, const std::vector<double>& s,
                               const std::vector<double>& b, bool has_bias) {
  const int64_t per_group = p.experts / p.num_groups;
  std::vector<double> group_score(p.num_groups);
  for (int64_t g = 0; g < p.num_groups; ++g) {
    const std::span<const double> members((has_bias ? b : s).data() + g * per_group, per_group);
    double score = 0.0;
    for (int64_t i : top_k_indices(members, has_bias ? 2 : 1)) score += members[i];
    group_score[g] = score;
  }
  std::vector<bool> kept(p.experts, false);
  for (int64_t g : top_k_indices(group_score, p.topk_group))
    for (int64_t i = 0; i < per_group; ++i) kept[g * per_group + i] = true;
  return kept;
}

// grouped_topk (DeepSeek-V3 noaux_tc).
Choice route_grouped(const moe_problem& p, const float* logits, const float* bias) {
  const std::vector<double> s = p.score_function == MOE_SCORE_SOFTMAX
                                    ? softmax_scores(logits, p.experts)
                                    : sigmoid_scores(logits, p.experts);
  const std::vector<double> b = with_bias(s, bias);
  Choice c;
  c.ids = top_k_indices(b, p.top_k, kept_experts(p, s, b, bias != nullptr));
  c.weights = gather(s, c.ids);
  if (p.renormalize)
    renormalize(c.weights, score_logs(p.score_function == MOE_SCORE_SOFTMAX, logits, c.ids));
  for (double& w : c.weights) w *= p.routed_scaling_factor;
  return c;
}

// sigmoid_bias_sink (Inkling): routed experts chosen on sigmoid + bias, then the k chosen and the
// S sink logits share one softmax of their log-sigmoids. renormalize does not apply.
Choice route_sink(const moe_problem& p, const float* logits, const float* bias) {
  const int64_t E = p.experts, S = p.sink_experts;
  Choice c;
  c.ids = top_k_indices(with_bias(sigmoid_scores(logits, E), bias), p.top_k);
  for (int64_t s = 0; s < S; ++s) c.ids.push_back(E + s);
  std::vector<double> lp;
  for (int64_t id : c.ids) lp.push_back(log_sigmoid(logits[id]));  // sink ids index their column
  c.weights = softmax_scores(lp);
  const double scale = static_cast<double>(p.route_scale) * p.global_scale;
  for (double& w : c.weights) w *= scale;
  return c;
}

Choice route_token(const moe_problem& p, const float* logits, const float* bias) {
  switch (static_cast<moe_routing>(p.routing)) {
    case MOE_ROUTING_SOFTMAX_TOPK:
    case MOE_ROUTING_SIGMOID_TOPK:
      return route_topk(p, logits, bias);
    case MOE_ROUTING_GROUPED_TOPK:
      return route_grouped(p, logits, bias);
    case MOE_ROUTING_SIGMOID_BIAS_SINK:
      return route_sink(p, logits, bias);
  }
  MOE_REFUSE(MOE_REASON_ROUTING, "routing={} is not a routing method this build knows", p.routing);
}

}  // namespace

void route(const moe_problem& p, int64_t tokens, const float* logits, const float* bias,
           const uint8_t* is_padding, int32_t* ids, float* weights) {
  check_routing_args(p, tokens, logits, bias, ids, weights);
  const int64_t in_width = p.experts + p.sink_experts;
  const int64_t out_width = topk_width(p);
  for (int64_t t = 0; t < tokens; ++t) {
    int32_t* ids_row = ids + t * out_width;        // (k + S)
    float* weights_row = weights + t * out_width;  // (k + S)
    if (is_padding != nullptr && is_padding[t] != 0) {
      std::fill(ids_row, ids_row + out_width, -1);
      std::fill(weights_row, weights_row + out_width, 0.0f);
      continue;
    }
    const Choice c = route_token(p, logits + t * in_width, bias);
    for (int64_t j = 0; j < out_width; ++j) {
      ids_row[j] = static_cast<int32_t>(c.ids[j]);
      weights_row[j] = static_cast<float>(c.weights[j]);
    }
  }
}

}  // namespace moe::reference
