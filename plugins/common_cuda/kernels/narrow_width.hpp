// The weight-only GEMM's narrow last blocks (kernels/sm90_wo_grouped_gemm.cuh,
// moe_cuda/wo_gemm.hpp narrow_last_blocks): the tokens a block is computed at, one rule for the
// kernel and the host that reports and tests it.
#pragma once

#ifdef __CUDACC__
#define MOE_WO_HD __host__ __device__
#else
#define MOE_WO_HD
#endif

namespace moe::gpu::kernels::wo {

constexpr int kNarrowBoxRows = 16;  // a narrow block's token rows are loaded 16 at a time
constexpr int kNarrowestMost = 128;

// A block of `count` tokens (1..n) of an n-token tile whose CTAs come `cluster` to a token block:
// the narrowest of 16, 32, 64 and 128 under n that holds it (with a pair, at least 32: each CTA
// loads half, in whole boxes), else n.
MOE_WO_HD constexpr int narrow_width(int count, int n, int cluster) {
  for (int w = kNarrowBoxRows * cluster; w < n && w <= kNarrowestMost; w *= 2)
    if (count <= w) return w;
  return n;
}

}  // namespace moe::gpu::kernels::wo
