// Persistent grouped-GEMM scheduling shared by the sm90a kernels that number their tiles on the
// device (deepgemm_style's own fp8 GEMM, the weight-only grouped GEMM; the one-launch permutation
// takes its prefix, with blocks of one row): group g owns prefix[g]..
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

// The group whose tiles contain tile t: the last g with prefix[g] * n_units <= t.
__device__ __forceinline__ int tile_group(const int* prefix, int groups, int n_units, int t) {
  int lo = 0, hi = groups;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (prefix[mid] * n_units <= t)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// Tile t: its group, then within the group its unit and row block, a unit's row blocks
// consecutive, so the CTAs running at once share weight tiles (each read from memory once, then
// from L2) rather than row blocks. It matters where a group has several row blocks and its
// weights outgrow L2 (Mixtral at T = 4096: 8 row blocks of 128 an expert, 115 MB of mxfp8
// weights an expert; the weight-only GEMM 6-8% faster, deepgemm_style's own fp8 GEMM 11%, than
// with a row block's units consecutive), and changes nothing at one row block a group.
__device__ __forceinline__ GroupTile group_tile_rows_first(const int* prefix, int groups,
                                                           int n_units, int t) {
  const int g = tile_group(prefix, groups, n_units, t);
  const int blocks = prefix[g + 1] - prefix[g];
  const int local = t - prefix[g] * n_units;
  return {g, local % blocks, local / blocks};
}

}  // namespace moe::gpu::kernels
