// cutlass_mega's hand-offs between CTAs without a grid barrier (docs/design.md §13, "counts"):
// words the layer owns, zero at rest, each counted up by the items that produce something and
// put back to zero by the last item that consumes it, so the next run finds them zero without a
// barrier or a memset. Every CTA of a cooperative launch is resident, so a wait ends once the
// items it waits for run; no CTA waits before it has issued all of its own earlier items.
#pragma once

#include <cstdint>
#include <cstdio>

#include "kernels/config.cuh"

namespace moe::mega::kernels {

// A GEMM1 token chunk's word: bits 0-15 count its GEMM1 items done (one per column slice of I:
// I / 64, relu2 I / 128; fp8_block: its 128-channel blocks of the intermediate quantised, I /
// 128), bits 16-31 the GEMM2 items that have read it (H / 128 x GEMM2's K parts, at most 256 x
// 8). The first stays below 2^16 for I < 4M (an expert's W13 would then be gigabytes).
constexpr uint32_t kChunkSeen = 1u << 16;
static_assert((kMaxSlots + kMaxExperts * (kTok<kMxfp4W> - 1)) / kTok<kMxfp4W> <= kMaxChunks,
              "a batch's token chunks (an expert's slots in chunks, the smallest items) fit");

// A wait that outlasts this many polls (each an L2 round trip, ~0.5 us: tens of seconds) is a
// hang, a bug (or overlapping runs of one layer): the kernel says which and traps, so the launch
// fails with an error instead of never returning.
constexpr uint32_t kSpinLimit = 1u << 26;

__device__ __noinline__ void hung(const char* what, const uint32_t* word, uint32_t needs) {
  printf("cutlass_mega: CTA %d waited %u polls for %s (word %p = %u, needs %u): a hang\n",
         int(blockIdx.x), kSpinLimit, what, word, *const_cast<volatile const uint32_t*>(word),
         needs);
  __trap();
}

__device__ __forceinline__ uint32_t load_relaxed(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// One thread, after a CTA barrier (or the consumers') that follows its threads' stores of what a
// word counts (a GEMM1 item's intermediate, a token's quantised row): one added to the word, a
// release (cumulative: it publishes every store ordered before it by that barrier).
__device__ __forceinline__ void release_add(uint32_t* word) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(word), "r"(1u) : "memory");
}

// One consumer thread, as release_add, where the count before it is needed (a slice's word, an
// fp8_block scale block's).
__device__ __forceinline__ uint32_t count_item(uint32_t* word, uint32_t add) {
  __threadfence();
  return atomicAdd(word, add);
}

// One consumer thread, after an item's results are out as count_item's: the item counted on its
// slice's word; true for the slice's last of `items` items, whose CTA then owns the slice (the
// word back to zero, and a fence, so its reads of the other items' results come after their
// counts).
__device__ __forceinline__ bool count_slice_item(uint32_t* word, uint32_t items) {
  if (count_item(word, 1) != items - 1) return false;
  atomicExch(word, 0u);
  __threadfence();
  return true;
}

// The producer warp: whether the chunk's `slices` GEMM1 items are all counted yet (lane 0 looks,
// relaxed, and where they are, takes the acquire fence wait_chunk would; every lane gets the
// answer from lane 0, and a warp barrier orders its later copies, as in wait_chunk).
__device__ __forceinline__ bool chunk_done(const uint32_t* word, uint32_t slices) {
  bool done = false;
  if (threadIdx.x % 32 == 0) {
    done = (load_relaxed(word) & (kChunkSeen - 1)) >= slices;
    if (done) asm volatile("fence.acq_rel.gpu;" ::: "memory");
  }
  done = __shfl_sync(0xffffffffu, done, 0);
  __syncwarp();  // orders the other lanes' later copies after lane 0's fence
  return done;
}

// The producer warp, before its first copy of a GEMM2 item's intermediate rows: lane 0 waits until
// the chunk's `slices` GEMM1 items are counted (relaxed loads: an acquire load empties the SM's L1
// each time), then one acquire fence, and the warp barrier orders every lane's later copies after
// it, so they read the counted items' stores (cp.async reads in the generic proxy: no proxy fence).
__device__ __forceinline__ void wait_chunk(const uint32_t* word, uint32_t slices) {
  if (threadIdx.x % 32 == 0) {
    for (uint32_t spins = 0; (load_relaxed(word) & (kChunkSeen - 1)) < slices;)
      if (++spins == kSpinLimit) hung("a GEMM1 chunk", word, slices);
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
  }
  __syncwarp();
}

// The producer warp, after a GEMM2 item's copies of the chunk's rows went out (every reader is
// past its wait by then): lane 0 counts the item a reader, and the chunk's last of `readers`
// puts the word back to zero (no other item touches it again in this run).
__device__ __forceinline__ void count_chunk_reader(uint32_t* word, uint32_t readers) {
  if (threadIdx.x % 32 == 0 && atomicAdd(word, kChunkSeen) / kChunkSeen == readers - 1)
    atomicExch(word, 0u);
  __syncwarp();
}

// A token's word (phase 0's hand-off): bit 0 says its quantised row is out, bits 1-31 count the
// GEMM1 items that have copied it (its slots with an expert x GEMM1's column slices, not bounded
// by 16 bits: top_k is bounded only by the experts); the last puts it back to zero. A token no
// item reads is never marked, so it stays zero too.
constexpr uint32_t kTokenOut = 1, kTokenSeen = 2;

// The producer warp, before a GEMM1 item's first token copy: every lane waits (relaxed) until
// the rows of its tokens n = lane, lane + 32 (of m <= 64) are out, then the whole warp takes one
// acquire fence (each lane's own relaxed reads and the fence make its acquire), so every lane's
// later copies read the quantised rows. `token_of(n)`: the item's n-th token.
template <class TokenOf>
__device__ __forceinline__ void wait_tokens(const uint32_t* words, int m, TokenOf token_of) {
  const int lane = threadIdx.x % 32;
  bool out = false;
  for (uint32_t spins = 0; !__all_sync(0xffffffffu, out); ++spins) {
    out = true;
    for (int n = lane; n < m; n += 32) {
      const bool marked = (load_relaxed(words + token_of(n)) & kTokenOut) != 0;
      if (!marked && spins == kSpinLimit) hung("a token's quantised row", words + token_of(n), 1);
      out &= marked;
    }
  }
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
  __syncwarp();
}

// The producer warp, after a GEMM1 item's copies of its tokens' rows went out: each token counted
// a reader, and its last of readers_of(t) puts its word back to zero.
template <class TokenOf, class ReadersOf>
__device__ __forceinline__ void count_token_readers(uint32_t* words, int m, TokenOf token_of,
                                                    ReadersOf readers_of) {
  for (int n = threadIdx.x % 32; n < m; n += 32) {
    const int t = token_of(n);
    if (atomicAdd(words + t, kTokenSeen) / kTokenSeen == uint32_t(readers_of(t)) - 1)
      atomicExch(words + t, 0u);
  }
  __syncwarp();
}

}  // namespace moe::mega::kernels
