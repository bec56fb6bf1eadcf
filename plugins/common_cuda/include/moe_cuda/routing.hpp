// Routing of docs/design.md §4 on the device: the GPU twin of moe::reference::route
// (plugins/reference/routing.cpp), whose ids it reproduces exactly, ties and NaN included.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "moe/abi/moe_abi.h"
#include "moe/sdk/verdict.hpp"

namespace moe::gpu {

namespace kernels {
struct RouteParams;  // kernels/params.hpp
}

// Limits of the one-warp-per-token kernel (route_limits; launch_route refuses beyond them).
constexpr int64_t kRouteMaxWidth = 32;      // k + S: one lane per output column
constexpr int64_t kRouteMaxExperts = 8192;  // the warp's scores live in shared memory

// Whether the kernel takes `p` (its width and expert limits); a no names the limit, so the host
// routes with the reference instead (moe_support.routes).
sdk::Verdict route_limits(const moe_problem& p);

// Routes `tokens` tokens on `stream`, one launch, no workspace. Device pointers:
//   logits     [T, E + S] f32 (E routed columns, then S sink columns)
//   bias       [E] f32, given iff p.routing_bias, else null
//   is_padding [T] u8 or null: a padding token gets ids -1 and weights 0 in all k + S columns
//   ids        out: [T, k + S] i32 (k routed experts best first, then E..E+S-1 for sinks)
//   weights    out: [T, k + S] f32
// Computes in double with the reference's order of operations; ids are bit-identical to it and
// weights agree to ~1 ulp of double before the final rounding to float (see NOTES in
// kernels/routing.cuh). Throws moe::Error(INVALID_ARGUMENT) for the inputs the reference refuses.
void launch_route(const moe_problem& p, int64_t tokens, const float* logits, const float* bias,
                  const uint8_t* is_padding, int32_t* ids, float* weights, cudaStream_t stream);

// The arguments launch_route launches its kernel with, after the same checks and limits (same
// throws), for a kernel that routes inside its own launch with kernels/routing.cuh's route_token
// (cutlass_mega): all but warps_per_block and warp_smem_bytes, which are that kernel's to set.
void fill_route_params(kernels::RouteParams& out, const moe_problem& p, int64_t tokens,
                       const float* logits, const float* bias, const uint8_t* is_padding,
                       int32_t* ids, float* weights);

}  // namespace moe::gpu
