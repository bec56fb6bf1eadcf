// The arguments of GEMM1's fused activation epilogue (sm90_activation_epilogue.cuh) as a plain
// struct: built by the host code (g++), passed by value to the kernel (nvcc).
#pragma once

#include <cstdint>

#include "kernels/params.hpp"  // plugins/common_cuda: ActivationParams

namespace moe::trtllm::kernels {

struct FusedActivation {
  moe::gpu::kernels::ActivationParams act{};  // activation, gelu_tanh, alpha, limit
  const float* group_scale = nullptr;         // [groups]: accumulators x this first (e4m3's
                                              // alpha_g); null = 1
  const float* bias = nullptr;                // b13 [bias_groups, N1] in GEMM1's column order
  int64_t bias_stride = 0;                    // floats between groups' rows
  int32_t bias_groups = 0;                    // groups >= this take no bias (sinks, shared)
  int32_t silu_begin = 0, silu_end = 0;       // groups in [begin, end) use silu_mul (sinks)
  int64_t out_ld = 0;                         // elements between output rows (I; N1 for relu2)
  int32_t gated = 1;                          // 0: relu2, elementwise
};

}  // namespace moe::trtllm::kernels
