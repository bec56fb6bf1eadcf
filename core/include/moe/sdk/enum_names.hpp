// The spellings of the ABI's enums (as written in YAML and printed by the tool), and which values
// this build knows: a value outside these comes from a newer header and is refused, never mapped
// to a neighbour (docs/design.md §2 rule 13). Also the one host-only enum spelled the same way,
// the router GEMM's precision.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "moe/abi/moe_abi.h"

namespace moe {

// Enum spellings, as written in YAML and printed by the tool.
const char* format_name(moe_format v);
const char* input_format_name(moe_input_format v);
const char* activation_name(moe_activation v);
const char* routing_name(moe_routing v);
const char* score_function_name(moe_score_function v);
const char* ep_placement_name(moe_ep_placement v);
const char* reason_name(moe_reason v);
const char* memory_name(moe_memory v);

std::optional<moe_format> parse_format(std::string_view s);
std::optional<moe_input_format> parse_input_format(std::string_view s);
std::optional<moe_activation> parse_activation(std::string_view s);
std::optional<moe_routing> parse_routing(std::string_view s);
std::optional<moe_score_function> parse_score_function(std::string_view s);
std::optional<moe_ep_placement> parse_ep_placement(std::string_view s);

// All spellings of one enum, comma separated (for error messages).
std::string format_names();
std::string input_format_names();
std::string activation_names();
std::string routing_names();

// The values of each enum this build knows (formats: format_table()), in enum order. A value
// outside these lists comes from a newer header and is refused, never mapped to a neighbour.
std::vector<moe_input_format> known_input_formats();
std::vector<moe_activation> known_activations();
std::vector<moe_routing> known_routings();

bool known_input_format(int32_t v);
bool known_activation(int32_t v);
bool known_routing(int32_t v);
bool known_score_function(int32_t v);
bool known_ep_placement(int32_t v);

// Precision of the router GEMM (hidden [T, H] x router weight^T [H, E + S] -> logits), spelled
// like the enums above. A host setting, not an ABI value: plugins take logits, never compute
// them (docs/design.md §3.4), so only the core's checkpoint runner reads it.
enum class RouterDtype : int32_t {
  kBf16 = 0,  // both operands rounded to bf16, as a bf16 model runs its gate; fp32 sums
  kFp32 = 1,  // both operands as given (bf16 ones widened exactly); fp32 sums
};
const char* router_dtype_name(RouterDtype v);
std::optional<RouterDtype> parse_router_dtype(std::string_view s);
std::string router_dtype_names();

}  // namespace moe
