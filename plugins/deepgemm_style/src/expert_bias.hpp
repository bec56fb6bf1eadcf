// Expert biases (b13, b2) as the device kernels read them: f32. Host code (any machine).
#pragma once

#include <cstdint>
#include <vector>

#include "moe/abi/moe_abi.h"

namespace moe::deepgemm {

// The `count` values of a bf16 or f32 bias tensor as floats (bf16 widens exactly). Another dtype
// or another element count is an INVALID_ARGUMENT naming `name`.
std::vector<float> bias_values(const moe_tensor& bias, const char* name, int64_t count);

}  // namespace moe::deepgemm
