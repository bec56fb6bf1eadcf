// The weights' 128x128 block scales as the GEMM kernels read them. Host code (any machine).
#pragma once

#include <cstdint>
#include <vector>

#include "moe/abi/moe_abi.h"

namespace moe::deepgemm {

constexpr float kScaleFloor = 1e-10f;  // docs/design.md §6: a dead or padded block is not NaN

// `scales` holds `matrices` matrices of [n_blocks, k_blocks] f32 (the canonical layout, K blocks
// contiguous); the result holds each as [k_blocks][n_blocks] (MN-major, what the sm90
// blockwise mainloop reads), with every scale below kScaleFloor raised to it. A scale that is
// not finite or not positive is an INVALID_ARGUMENT naming `name`, the matrix and the block: it
// means a corrupt or misrouted tensor, not a dead block.
std::vector<float> mn_major_block_scales(const moe_tensor& scales, const char* name,
                                         int64_t matrices, int64_t n_blocks, int64_t k_blocks);

}  // namespace moe::deepgemm
