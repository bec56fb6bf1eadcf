// cutlass_mega: the counts that let GEMM2 start without a grid barrier (MOE_MEGA_GEMM2=early,
// Params::gemm2_ready; docs/design.md §13). A GEMM1 item's consumers write its intermediate rows,
// meet at their named barrier, and one thread adds the item to its chunk's count with release
// semantics; a GEMM2 item's producer warp reads the count (relaxed: an acquire load would
// invalidate L1 on every pass), waits until it holds every GEMM1 slice, then fences (acquire), and
// only then copies the rows.
#pragma once

#include <cstdint>

namespace moe::mega::kernels {

__device__ __forceinline__ void count_release(int32_t* count) {
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(count) : "memory");
}

__device__ __forceinline__ int32_t count_relaxed(const int32_t* count) {
  int32_t v;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
  return v;
}

// Each calling thread polls until it reads `target` itself. A count that never gets there is a
// bug (every GEMM1 item counts once, and GEMM1 items wait on nothing): after 2^26 polls (seconds)
// the kernel traps, so the launch fails (DEVICE_ERROR) instead of hanging. (No printf: a call
// would serialise the wgmma instances' pipelines.)
__device__ __forceinline__ void wait_count(const int32_t* count, int32_t target) {
  for (uint32_t polls = 1; count_relaxed(count) < target; ++polls) {
    __nanosleep(128);
    if (polls == (1u << 26)) __trap();
  }
}

// After the thread read the count complete: what the counted items wrote is visible to its loads
// and to the copies it issues next (cp.async, and the async proxy's bulk copies).
__device__ __forceinline__ void count_acquired() {
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

}  // namespace moe::mega::kernels
