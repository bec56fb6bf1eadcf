// Expert biases (b13, b2 and the shared expert's) as device kernels read them: f32. The canonical
// tensors may be bf16 or f32 (docs/design.md §3.1).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "moe/abi/moe_abi.h"

namespace moe::sdk {

// The `count` values of a bf16 or f32 tensor as floats (bf16 widens exactly). Another dtype,
// another element count, a strided view or an absent tensor is an INVALID_ARGUMENT naming `name`
// and what it is.
std::vector<float> bias_values(const moe_tensor& bias, std::string_view name, int64_t count);

}  // namespace moe::sdk
