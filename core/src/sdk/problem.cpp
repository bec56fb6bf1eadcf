#include "moe/sdk/problem.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bitset>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "moe/sdk/error.hpp"
#include "moe/sdk/format_table.hpp"

namespace moe {
namespace {

void require(bool cond, const std::string& message) {
  if (!cond) throw Error(MOE_STATUS_INVALID_ARGUMENT, "invalid problem: " + message);
}

// The first scale of the problem's routing that multiplies its weights and is not finite and
// positive (0 would zero the layer, a negative value negate it), as a message; "" when none.
std::string routing_scale_error(const moe_problem& p) {
  if (p.routing == MOE_ROUTING_GROUPED_TOPK &&
      !(std::isfinite(p.routed_scaling_factor) && p.routed_scaling_factor > 0))
    return fmt::format("routed_scaling_factor={} must be finite and > 0", p.routed_scaling_factor);
  if (p.routing == MOE_ROUTING_SIGMOID_BIAS_SINK)
    for (const auto& [name, value] :
         {std::pair{"route_scale", p.route_scale}, std::pair{"global_scale", p.global_scale}})
      if (!(std::isfinite(value) && value > 0))
        return fmt::format("{}={} must be finite and > 0", name, value);
  return {};
}

}  // namespace

moe_problem default_problem() {
  moe_problem p;
  std::memset(&p, 0, sizeof(p));
  p.struct_size = sizeof(moe_problem);
  p.format = MOE_FORMAT_BF16;
  p.input_format = MOE_INPUT_DEFAULT;
  p.activation = MOE_ACTIVATION_SILU_MUL;
  p.activation_alpha = 1.702f;
  p.activation_limit = 7.0f;
  p.routing = MOE_ROUTING_SOFTMAX_TOPK;
  p.renormalize = 1;
  p.score_function = MOE_SCORE_SIGMOID;
  p.num_groups = 1;
  p.topk_group = 1;
  p.routed_scaling_factor = 1.0f;
  p.route_scale = 1.0f;
  p.global_scale = 1.0f;
  p.ep_placement = MOE_EP_NONE;
  p.ep_size = 1;
  p.max_tokens = 16384;
  return p;
}

bool is_gated(moe_activation a) {
  switch (a) {
    case MOE_ACTIVATION_SILU_MUL:
    case MOE_ACTIVATION_SILU_MUL_CLAMP:
    case MOE_ACTIVATION_SWIGLU_OAI:
    case MOE_ACTIVATION_GELU_MUL:
      return true;
    case MOE_ACTIVATION_RELU2:
      return false;
  }
  MOE_REFUSE(MOE_REASON_ACTIVATION, "activation={} is not one this build knows ({})", int(a),
             activation_names());
}
bool is_fp4(moe_format f) {
  const FormatSpec* spec = find_format(f);
  return spec != nullptr && spec->packed_fp4;
}

void check_known_values(const moe_problem& p) {
  // Values from a newer header are refused (UNSUPPORTED), never read as a neighbour's.
  if (find_format(p.format) == nullptr)
    MOE_REFUSE(MOE_REASON_FORMAT, "format={} is not a weight format this build knows ({})",
               p.format, format_names());
  if (p.input_format != MOE_INPUT_DEFAULT && !known_input_format(p.input_format))
    MOE_REFUSE(MOE_REASON_INPUT_FORMAT, "input_format={} is not one this build knows ({})",
               p.input_format, input_format_names());
  if (!known_activation(p.activation))
    MOE_REFUSE(MOE_REASON_ACTIVATION, "activation={} is not one this build knows ({})",
               p.activation, activation_names());
  if (!known_routing(p.routing))
    MOE_REFUSE(MOE_REASON_ROUTING, "routing={} is not a routing method this build knows ({})",
               p.routing, routing_names());
  if (p.routing == MOE_ROUTING_GROUPED_TOPK && !known_score_function(p.score_function))
    MOE_REFUSE(MOE_REASON_ROUTING, "score_function={} is not sigmoid or softmax", p.score_function);
  if (!known_ep_placement(p.ep_placement))
    MOE_REFUSE(MOE_REASON_EP,
               "ep_placement={} is not one this build knows (none, linear, "
               "round_robin)",
               p.ep_placement);
}

void normalize_problem(moe_problem& p) {
  const FormatSpec* format = find_format(p.format);
  if (p.input_format == MOE_INPUT_DEFAULT && format != nullptr)
    p.input_format = format->natural_input;
  if (p.ep_placement == MOE_EP_NONE) {
    p.local_experts = p.experts;
    p.local_expert_offset = 0;
  } else if (p.ep_size > 0) {
    p.local_experts = p.experts / p.ep_size;
    p.local_expert_offset = p.ep_placement == MOE_EP_LINEAR ? p.ep_rank * p.local_experts : 0;
  }
}

void validate_problem(const moe_problem& p) {
  require(
      p.struct_size >= MOE_PROBLEM_MIN_SIZE,
      fmt::format("struct_size {} is below the minimum {}", p.struct_size, MOE_PROBLEM_MIN_SIZE));
  // Upper bounds keep every size product (E * 2I * H bytes and the like) inside int64.
  constexpr int64_t kMaxWidth = 1 << 20, kMaxTokens = 1 << 24;
  require(p.experts >= 1 && p.experts <= kMaxProblemExperts,
          fmt::format("experts={} must be in [1, {}]", p.experts, kMaxProblemExperts));
  for (const auto& [name, value] :
       {std::pair{"hidden", p.hidden}, std::pair{"intermediate", p.intermediate},
        std::pair{"shared_intermediate", p.shared_intermediate},
        std::pair{"sink_intermediate", p.sink_intermediate}})
    require(value <= kMaxWidth, fmt::format("{}={} must be <= {}", name, value, kMaxWidth));
  require(p.sink_experts <= 64, fmt::format("sink_experts={} must be <= 64", p.sink_experts));
  require(p.max_tokens <= kMaxTokens,
          fmt::format("max_tokens={} must be <= {}", p.max_tokens, kMaxTokens));
  require(p.top_k >= 1 && p.top_k <= p.experts,
          fmt::format("top_k={} must be in [1, experts={}]", p.top_k, p.experts));
  require(p.hidden >= 1, fmt::format("hidden={} must be >= 1", p.hidden));
  require(p.intermediate >= 1, fmt::format("intermediate={} must be >= 1", p.intermediate));
  check_known_values(p);
  require(p.input_format != MOE_INPUT_DEFAULT,
          fmt::format("input_format={} is not resolved to one of {}", p.input_format,
                      input_format_names()));
  const auto format = static_cast<moe_format>(p.format);
  if (is_fp4(format)) {
    require(p.hidden % 2 == 0 && p.intermediate % 2 == 0,
            fmt::format("{} packs two values per byte: hidden={} and intermediate={} must be even",
                        format_name(format), p.hidden, p.intermediate));
  }
  if (p.activation == MOE_ACTIVATION_SILU_MUL_CLAMP || p.activation == MOE_ACTIVATION_SWIGLU_OAI) {
    require(std::isfinite(p.activation_limit) && p.activation_limit > 0,
            fmt::format("activation_limit={} must be finite and > 0", p.activation_limit));
    require(std::isfinite(p.activation_alpha), "activation_alpha must be finite");
  }
  if (p.routing == MOE_ROUTING_GROUPED_TOPK) {
    require(p.num_groups >= 1 && p.experts % p.num_groups == 0,
            fmt::format("num_groups={} must divide experts={}", p.num_groups, p.experts));
    require(p.topk_group >= 1 && p.topk_group <= p.num_groups,
            fmt::format("topk_group={} must be in [1, num_groups={}]", p.topk_group, p.num_groups));
    const int64_t per_group = p.experts / p.num_groups;
    require(p.top_k <= p.topk_group * per_group,
            fmt::format("top_k={} exceeds the {} experts in topk_group={} groups", p.top_k,
                        p.topk_group * per_group, p.topk_group));
    require(!p.routing_bias || per_group >= 2,
            fmt::format("grouped_topk with a routing bias scores groups by their top-2: "
                        "experts/num_groups={} must be >= 2",
                        per_group));
  }
  const std::string scale_error = routing_scale_error(p);
  require(scale_error.empty(), scale_error);
  require(p.sink_experts >= 0, fmt::format("sink_experts={} must be >= 0", p.sink_experts));
  require(p.sink_experts == 0 || p.routing == MOE_ROUTING_SIGMOID_BIAS_SINK,
          fmt::format("sink_experts={} needs routing sigmoid_bias_sink (it makes their gammas)",
                      p.sink_experts));
  require(p.sink_experts == 0 || p.sink_intermediate >= 1,
          fmt::format("sink_intermediate={} must be >= 1 with {} sink experts", p.sink_intermediate,
                      p.sink_experts));
  require(p.shared_intermediate >= 0,
          fmt::format("shared_intermediate={} must be >= 0", p.shared_intermediate));
  if (is_fp4(format)) {
    require(p.shared_intermediate % 2 == 0,
            fmt::format("shared_intermediate={} must be even for {}", p.shared_intermediate,
                        format_name(format)));
  }
  require(p.redundant_experts >= 0,
          fmt::format("redundant_experts={} must be >= 0", p.redundant_experts));
  require(p.max_tokens >= 1, fmt::format("max_tokens={} must be >= 1", p.max_tokens));
  switch (static_cast<moe_ep_placement>(p.ep_placement)) {
    case MOE_EP_NONE:
      require(p.ep_size == 1 && p.ep_rank == 0,
              fmt::format("ep_size={} ep_rank={} need an ep_placement (linear or round_robin)",
                          p.ep_size, p.ep_rank));
      break;
    case MOE_EP_LINEAR:
    case MOE_EP_ROUND_ROBIN:
      require(p.ep_size >= 1, fmt::format("ep_size={} must be >= 1", p.ep_size));
      require(p.ep_rank >= 0 && p.ep_rank < p.ep_size,
              fmt::format("ep_rank={} must be in [0, ep_size={})", p.ep_rank, p.ep_size));
      require(p.experts % p.ep_size == 0,
              fmt::format("ep_size={} does not divide experts={}: pad the expert count to a "
                          "multiple of the EP size",
                          p.ep_size, p.experts));
      require(p.local_experts == p.experts / p.ep_size,
              fmt::format("local_experts={} must equal experts/ep_size={}", p.local_experts,
                          p.experts / p.ep_size));
      break;
  }
  if (p.ep_map != nullptr) {
    int64_t count = 0;
    // Each local id once: two experts on one slot would run one's weights for both. A bit per id
    // on the stack (validation runs on every route call: no allocation there).
    std::bitset<size_t(kMaxProblemExperts)> seen;
    for (int64_t e = 0; e < p.experts; ++e) {
      const int32_t l = p.ep_map[e];
      require(
          l >= -1 && l < p.local_experts,
          fmt::format("ep_map[{}]={} is outside [-1, local_experts={})", e, l, p.local_experts));
      if (l < 0) continue;
      if (size_t(l) < seen.size() && seen.test(size_t(l))) {
        int64_t first = 0;
        while (p.ep_map[first] != l) ++first;
        require(false, fmt::format("ep_map[{}] and ep_map[{}] are both local expert {}: each "
                                   "local id holds one expert",
                                   first, e, l));
      }
      if (size_t(l) < seen.size()) seen.set(size_t(l));
      ++count;
    }
    require(count == p.local_experts, fmt::format("ep_map maps {} experts to this rank, expected "
                                                  "local_experts={}",
                                                  count, p.local_experts));
  }
}

void check_routing_args(const moe_problem& p, int64_t tokens, const void* logits, const float* bias,
                        const void* ids, const void* weights) {
  constexpr auto kInvalid = MOE_STATUS_INVALID_ARGUMENT;
  if (!known_routing(p.routing))
    MOE_REFUSE(MOE_REASON_ROUTING, "routing={} is not a routing method this build knows ({})",
               p.routing, routing_names());
  MOE_CHECK(p.experts >= 1 && p.top_k >= 1 && p.top_k <= p.experts, kInvalid,
            "top_k={} must be in [1, experts={}]", p.top_k, p.experts);
  MOE_CHECK(
      p.sink_experts == 0 || (p.sink_experts > 0 && p.routing == MOE_ROUTING_SIGMOID_BIAS_SINK),
      kInvalid, "sink_experts={} needs routing sigmoid_bias_sink", p.sink_experts);
  if (p.routing == MOE_ROUTING_GROUPED_TOPK && !known_score_function(p.score_function))
    MOE_REFUSE(MOE_REASON_ROUTING, "score_function={} is not sigmoid or softmax", p.score_function);
  if (p.routing == MOE_ROUTING_GROUPED_TOPK) {
    MOE_CHECK(p.num_groups >= 1 && p.experts % p.num_groups == 0, kInvalid,
              "num_groups={} must divide experts={}", p.num_groups, p.experts);
    MOE_CHECK(p.topk_group >= 1 && p.topk_group <= p.num_groups, kInvalid,
              "topk_group={} must be in [1, num_groups={}]", p.topk_group, p.num_groups);
    const int64_t per_group = p.experts / p.num_groups;
    MOE_CHECK(p.top_k <= p.topk_group * per_group, kInvalid,
              "top_k={} exceeds the {} experts in topk_group={} groups", p.top_k,
              p.topk_group * per_group, p.topk_group);
    MOE_CHECK(!p.routing_bias || per_group >= 2, kInvalid,
              "grouped_topk with a routing bias needs experts/num_groups={} >= 2", per_group);
  }
  MOE_CHECK(p.sink_experts <= 64, kInvalid, "sink_experts={} must be <= 64", p.sink_experts);
  const std::string scale_error = routing_scale_error(p);
  MOE_CHECK(scale_error.empty(), kInvalid, "{}", scale_error);
  MOE_CHECK((bias != nullptr) == (p.routing_bias != 0), kInvalid, "bias is {} but routing_bias={}",
            bias != nullptr ? "given" : "null", p.routing_bias);
  MOE_CHECK(tokens >= 0, kInvalid, "tokens={} must be >= 0", tokens);
  MOE_CHECK(tokens == 0 || (logits != nullptr && ids != nullptr && weights != nullptr), kInvalid,
            "logits, ids and weights must not be null with tokens={}", tokens);
}

int32_t local_expert_id(const moe_problem& p, int64_t global_id) {
  if (global_id < 0 || global_id >= p.experts) return -1;
  if (p.ep_map != nullptr) return p.ep_map[global_id];
  if (!known_ep_placement(p.ep_placement))
    MOE_REFUSE(MOE_REASON_EP, "ep_placement={} is not one this build knows", p.ep_placement);
  switch (static_cast<moe_ep_placement>(p.ep_placement)) {
    case MOE_EP_NONE:
      return static_cast<int32_t>(global_id);
    case MOE_EP_LINEAR: {
      const int64_t l = global_id - p.local_expert_offset;
      return (l >= 0 && l < p.local_experts) ? static_cast<int32_t>(l) : -1;
    }
    case MOE_EP_ROUND_ROBIN:
      return global_id % p.ep_size == p.ep_rank ? static_cast<int32_t>(global_id / p.ep_size) : -1;
  }
  MOE_REFUSE(MOE_REASON_EP, "ep_placement={} is not one this build knows", p.ep_placement);
}

std::string describe_problem(const moe_problem& p) {
  std::string s = fmt::format("E={} k={} H={} I={} {}/{} {} {}", p.experts, p.top_k, p.hidden,
                              p.intermediate, format_name(static_cast<moe_format>(p.format)),
                              input_format_name(static_cast<moe_input_format>(p.input_format)),
                              activation_name(static_cast<moe_activation>(p.activation)),
                              routing_name(static_cast<moe_routing>(p.routing)));
  if (p.expert_bias) s += " +bias";
  if (p.shared_intermediate) s += fmt::format(" shared(I={})", p.shared_intermediate);
  if (p.sink_experts) s += fmt::format(" sinks={}(I={})", p.sink_experts, p.sink_intermediate);
  if (p.ep_placement != MOE_EP_NONE)
    s += fmt::format(" ep={}/{} {}", p.ep_rank, p.ep_size,
                     ep_placement_name(static_cast<moe_ep_placement>(p.ep_placement)));
  return s;
}

Problem::Problem(const moe_problem& p) : raw_(default_problem()) {
  std::memcpy(&raw_, &p, std::min(sizeof(moe_problem), p.struct_size));
  raw_.struct_size = sizeof(moe_problem);
  // An EP map of an expert count out of range is not read (validation then names the count).
  if (p.ep_map != nullptr && p.experts >= 1 && p.experts <= kMaxProblemExperts)
    ep_map_.assign(p.ep_map, p.ep_map + p.experts);
  raw_.ep_map = nullptr;
}

moe_problem Problem::c() const {
  moe_problem p = raw_;
  p.ep_map = ep_map_.empty() ? nullptr : ep_map_.data();
  return p;
}

void Problem::finalize() {
  normalize_problem(raw_);
  ep_map_.clear();
  if (raw_.ep_placement != MOE_EP_NONE && raw_.ep_size >= 1 && raw_.experts >= 1 &&
      raw_.experts <= kMaxProblemExperts && raw_.experts % raw_.ep_size == 0) {
    ep_map_.resize(raw_.experts);
    moe_problem view = raw_;
    view.ep_map = nullptr;
    for (int64_t e = 0; e < raw_.experts; ++e) ep_map_[e] = local_expert_id(view, e);
  }
}

}  // namespace moe
