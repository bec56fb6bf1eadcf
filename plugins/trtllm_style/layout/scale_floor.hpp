// FP8 block scales below 1e-10 are raised to 1e-10: an all-zero block (a dead or padded
// expert) otherwise has scale 0, and kernels that divide by a scale or multiply 0 * inf produce
// NaN. Not invertible: unprepare leaves the raised values.
#pragma once

#include <cstdint>

#include "matrix_stack.hpp"
#include "moe/sdk/block_scales.hpp"

namespace moe::trtllm {

constexpr float kFp8BlockScaleFloor = sdk::kBlockScaleFloor;

// `scales` holds f32 values (any count). Every value below `floor` (zero and negatives
// included; NaN is left alone) becomes `floor`. Returns how many were raised.
int64_t raise_small_scales(Bytes& scales, float floor = kFp8BlockScaleFloor);

}  // namespace moe::trtllm
