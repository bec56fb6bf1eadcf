// fp8 weight and activation scales checked and copied into the order a kernel reads them.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "moe/abi/moe_abi.h"

namespace moe::sdk {

// A dead or padded block (amax 0) is not a NaN: scales below this are raised to it
// (docs/design.md §6, the fp8 block-scale floor).
constexpr float kBlockScaleFloor = 1e-10f;

enum class BlockScaleOrder {
  kKMajor,   // each matrix [n_blocks][k_blocks], as the canonical tensor holds it
  kMnMajor,  // each matrix [k_blocks][n_blocks] (the sm90 blockwise mainloops read this)
};

// `scales` holds `matrices` matrices of [n_blocks, k_blocks] f32 (the canonical layout); the
// result holds them in `order`, every scale below kBlockScaleFloor raised to it. A scale that is
// not finite or not positive is an INVALID_ARGUMENT naming `name`, the matrix and the block: it
// means a corrupt or misrouted tensor, not a dead block.
std::vector<float> checked_block_scales(const moe_tensor& scales, std::string_view name,
                                        int64_t matrices, int64_t n_blocks, int64_t k_blocks,
                                        BlockScaleOrder order);

// `count` per-tensor scales (f32 [count]: fp8_tensor's per-matrix weight scales, or the static
// activation scales a13_scale and a2_scale, their shapes checked by check_weights), used as
// given. One that is not finite or not positive is an INVALID_ARGUMENT naming `name` and the
// index: a corrupt or misrouted tensor.
std::vector<float> checked_tensor_scales(const moe_tensor& scales, std::string_view name,
                                         int64_t count);

// `count` scale values of one weight format at `data`, as `dtype` stores them: f32 (fp8_tensor,
// fp8_block) finite and > 0; ue8m0 (mxfp4, mxfp8) not the NaN code 0xff; e4m3 (nvfp4 block
// scales) neither NaN nor negative (zero is an all-zero block's). Anything else is an
// INVALID_ARGUMENT naming `name` and the index: a corrupt or misrouted tensor, which would give
// NaN or sign-flipped weights. Other dtypes: nothing to check.
void check_scale_values(const void* data, moe_dtype dtype, int64_t count, std::string_view name);

}  // namespace moe::sdk
