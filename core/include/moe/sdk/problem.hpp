// The MoE problem descriptor on the C++ side: defaults, names of every enum (the YAML spellings),
// normalisation, validation, and expert-parallel helpers. Shared by the core and the plugins.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "moe/abi/moe_abi.h"
#include "moe/sdk/enum_names.hpp"

namespace moe {

// A moe_problem with every field at its documented default (struct_size = sizeof).
moe_problem default_problem();

// Throws moe::Refusal with the matching reason (format, input_format, activation, routing, ep)
// for an enum value this build does not know.
void check_known_values(const moe_problem& p);

// Gated activations read [gate | up] from a GEMM1 of 2I rows; relu2 reads I rows.
bool is_gated(moe_activation a);
inline int64_t w13_rows(const moe_problem& p) {
  return is_gated(static_cast<moe_activation>(p.activation)) ? 2 * p.intermediate : p.intermediate;
}
inline int64_t topk_width(const moe_problem& p) {
  return p.top_k + p.sink_experts;
}
bool is_fp4(moe_format f);

// Resolves MOE_INPUT_DEFAULT (the format table's natural input) and local_experts /
// local_expert_offset from the EP fields.
void normalize_problem(moe_problem& p);

// The most experts a problem may have (validate_problem): bounds every per-expert table, the EP
// map included, before anything is sized from `experts`.
inline constexpr int64_t kMaxProblemExperts = int64_t(1) << 16;

// Throws moe::Refusal for an unknown enum value (check_known_values), else
// moe::Error(INVALID_ARGUMENT) naming the first inconsistent field. Expects a normalised problem.
// Checks only what every backend agrees on; support is the plugin's business.
void validate_problem(const moe_problem& p);

// The checks routing needs on its own, without a full validate_problem (routing reads only the
// routing fields): shared by the reference's route() and the GPU routing kernels, so both refuse
// the same inputs with the same messages. Throws moe::Error(INVALID_ARGUMENT).
void check_routing_args(const moe_problem& p, int64_t tokens, const void* logits, const float* bias,
                        const void* ids, const void* weights);

// Global expert id -> local id on this rank, or -1 when the expert lives elsewhere.
int32_t local_expert_id(const moe_problem& p, int64_t global_id);

// One line, e.g. "E=8 k=2 H=256 I=192 bf16/bf16 silu_mul softmax_topk".
std::string describe_problem(const moe_problem& p);

// A problem plus storage for its EP map, safe to copy. c() returns the C view whose ep_map
// points into this object (valid while it lives and is not modified).
class Problem {
 public:
  Problem() : raw_(default_problem()) {}
  explicit Problem(const moe_problem& p);

  moe_problem& raw() { return raw_; }
  const moe_problem& raw() const { return raw_; }
  moe_problem c() const;

  // Fills the EP map from placement, size and rank (call after changing them), then normalises.
  void finalize();
  const std::vector<int32_t>& ep_map() const { return ep_map_; }

 private:
  moe_problem raw_;
  std::vector<int32_t> ep_map_;
};

}  // namespace moe
