// cutlass_mega: the flags that let GEMM2 start without a grid barrier (MOE_MEGA_GEMM2=early,
// Params::gemm2_ready; docs/design.md §13). A GEMM1 item's consumers write its intermediate rows
// and meet at their named barrier; then one thread stores the run's tag into the item's flag with
// release semantics. A GEMM2 item's producer warp polls its chunk's flags (relaxed: an acquire load
// would invalidate L1 on every pass), each lane a share of them, until every lane saw its share
// hold the tag; then fences (acquire), and only then copies the rows.
//
// Why a tag and not a count: the flags live in the caller's workspace, which holds anything when a
// run starts (another layer's data, an earlier run's flags, poison). A count would need zeroing and
// a grid barrier behind it before the first GEMM1 item adds to it (measured: that barrier costs
// what skipping the GEMM1 -> GEMM2 barrier saves). A tag that no earlier run wrote needs neither:
// the tag is a bijective mix of the launch's %gridid (PTX: the temporal grid launch number of the
// context, the same in every CTA of one launch, another in every stream launch) plus a random salt
// drawn when the plugin loads. So no flag an earlier stream launch left, whatever the layer or
// stream, equals this launch's tag, and every CTA knows the tag without talking to the others.
// Not so for a CUDA graph: its replays of one kernel node share the %gridid (measured on an H100:
// the second replay read the first one's flags and started GEMM2 on stale rows), so a launch being
// captured passes no flags and takes the grid barrier (DeviceLayer::launch). (A device-wide
// counter read at the start and incremented at the end was the first design: a run on another
// stream could increment it while this run's CTAs read it, giving CTAs of one run different tags,
// and a wait that never ends.) The mix and the salt make the tag look random, so other data
// (small integers, zeros, poison) equals it with probability 2^-64 a flag.
#pragma once

#include <cstdint>

namespace moe::mega::kernels {

// splitmix64's finaliser: a bijection on 64-bit words, so distinct launches give distinct tags.
__host__ __device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// This launch's tag: its %gridid plus the salt, mixed.
__device__ __forceinline__ unsigned long long launch_tag(unsigned long long salt) {
  unsigned long long grid;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(grid));
  return mix64(grid + salt);
}

__device__ __forceinline__ void flag_release(unsigned long long* flag, unsigned long long tag) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(flag), "l"(tag) : "memory");
}

__device__ __forceinline__ unsigned long long flag_relaxed(const unsigned long long* flag) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(flag) : "memory");
  return v;
}

// True in every lane of the (full) warp when each of flags[0, n) holds `tag`: lane l reads
// l, l + 32, ...
__device__ __forceinline__ bool flags_hold(const unsigned long long* flags, int n,
                                           unsigned long long tag) {
  bool mine = true;
  for (int i = int(threadIdx.x % 32); i < n; i += 32) mine = mine && flag_relaxed(flags + i) == tag;
  return __all_sync(~0u, mine);
}

// Every lane of the warp polls until flags[0, n) all hold `tag`. A flag that never gets there is
// a bug (every GEMM1 item flags once, and GEMM1 items wait on nothing): after 2^26 polls (seconds)
// the kernel traps, so the launch fails (DEVICE_ERROR) instead of hanging. (No printf: a call
// would serialise the wgmma instances' pipelines.)
__device__ __forceinline__ void wait_flags(const unsigned long long* flags, int n,
                                           unsigned long long tag) {
  for (uint32_t polls = 1; !flags_hold(flags, n, tag); ++polls) {
    __nanosleep(128);
    if (polls == (1u << 26)) __trap();
  }
}

// After the warp saw every flag (each lane its share): each lane's acquire fence, the warp's
// barrier (it orders memory among its lanes), and a fence again, so what every flagged item wrote
// is visible to the loads and copies any lane issues next (cp.async, and the async proxy's bulk
// copies).
__device__ __forceinline__ void flags_acquired() {
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
  __syncwarp();
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

}  // namespace moe::mega::kernels
