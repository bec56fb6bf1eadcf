// Persistent grouped-GEMM scheduling shared by the sm90a kernels that number their tiles on the
// device (deepgemm_style's own fp8 GEMM, the weight-only grouped GEMM): group g owns prefix[g]..
// prefix[g + 1] - 1 row blocks, each row block n_units consecutive tiles. Every CTA derives the
// same numbering from the group row counts, which live on the device, so a launch reads nothing
// back to the host.
#pragma once

#include <cstdint>

namespace moe::gpu::kernels {

// prefix[0] = 0, prefix[g + 1] = row blocks of `block` rows in groups 0..g, for count(g) rows in
// group g. Every thread of the block calls it; it ends with __syncthreads.
template <class Count>
__device__ __forceinline__ void build_tile_prefix(int groups, int block, Count count, int* prefix) {
  for (int g = threadIdx.x; g < groups; g += blockDim.x) {
    const int64_t c = count(g);
    prefix[g + 1] = int((c + block - 1) / block);
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int carry = 0;
    if (lane == 0) prefix[0] = 0;
    for (int base = 0; base < groups; base += 32) {
      int v = base + lane < groups ? prefix[base + lane + 1] : 0;
      for (int d = 1; d < 32; d <<= 1) {
        const int u = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += u;
      }
      if (base + lane < groups) prefix[base + lane + 1] = v + carry;
      carry += __shfl_sync(0xffffffffu, v, 31);
    }
  }
  __syncthreads();
}

struct GroupTile {
  int group, block_m, block_n;
};

// Tile t: the group whose tiles contain t, then its row block and unit, units consecutive.
__device__ __forceinline__ GroupTile group_tile(const int* prefix, int groups, int n_units, int t) {
  int lo = 0, hi = groups;  // the last g with prefix[g] * n_units <= t
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (prefix[mid] * n_units <= t)
      lo = mid;
    else
      hi = mid;
  }
  const int local = t - prefix[lo] * n_units;
  return {lo, local / n_units, local % n_units};
}

}  // namespace moe::gpu::kernels
