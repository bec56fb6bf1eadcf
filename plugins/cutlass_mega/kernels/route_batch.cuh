// cutlass_mega's routing inside the fused launch (docs/design.md §13): every CTA routes the batch
// into its shared memory with common_cuda's route_token, the routing kernel's own code.
#pragma once

#include <cstdint>

#include "kernels/config.cuh"
#include "kernels/routing.cuh"

namespace moe::mega::kernels {

// Routing in the launch (Params::route): the batch's `tokens` tokens, a token a warp of the CTA,
// their ids into `routed` [tokens, width] and each warp's scratch from `scratch` (shared memory);
// CTA 0 also writes ids and weights to r.ids and r.weights. Out of line (each kernel's cubin
// holds its own copy): a launch that does not route skips a call, and the routing's registers do
// not become the kernel's (bench/NOTES.md, sessions 51-53).
__device__ __noinline__ void route_batch(const gpu::kernels::RouteParams& r, int tokens, int width,
                                         int32_t* routed, uint8_t* scratch) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int t = warp; t < tokens; t += kThreads / 32) {  // warp-uniform: full shuffles inside
    int id = -1;
    float weight = 0.0f;
    gpu::kernels::route_token<kRouteSlots>(r, scratch + warp * r.warp_smem_bytes, t, lane, id,
                                           weight);
    if (lane < width) {
      routed[t * width + lane] = id;
      if (blockIdx.x == 0) {
        r.ids[t * width + lane] = id;
        r.weights[t * width + lane] = weight;
      }
    }
  }
}

}  // namespace moe::mega::kernels
