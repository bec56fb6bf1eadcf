// cutlass_mega's hand-offs between CTAs without a grid barrier (docs/design.md §13, "counts"):
// words the layer owns, zero at rest, each counted up by the items that produce something and
// put back to zero by the last item that consumes it, so the next run finds them zero without a
// barrier or a memset. Every CTA of a cooperative launch is resident, so a wait ends once the
// items it waits for run; no CTA waits before it has issued all of its own earlier items.
#pragma once

#include <cstdint>

#include "kernels/config.cuh"

namespace moe::mega::kernels {

// A GEMM1 token chunk's word: bits 0-15 count its GEMM1 items done (one per column slice of I),
// bits 16-31 the GEMM2 items that have seen it complete.
constexpr uint32_t kChunkDone = 1, kChunkSeen = 1u << 16;
static_assert(kMaxSlots / 32 + kMaxExperts == kMaxChunks, "a batch's chunks fit the words");

__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// One consumer thread, after the consumers' barrier that follows their stores of an item's
// results: the item counted on `word` (the fence makes every consumer's stores, ordered before it
// by that barrier, visible before the count). Returns the count before it.
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

// The producer warp, before its first copy of a GEMM2 item's intermediate rows: every lane waits
// (acquire) until the chunk's `slices` GEMM1 items are counted, so each lane's later copies read
// their stores; lane 0 then counts this item as a reader, and the chunk's last of `readers`
// readers puts the word back to zero (no other item touches it again in this run).
__device__ __forceinline__ void wait_chunk(uint32_t* word, uint32_t slices, uint32_t readers) {
  while ((load_acquire(word) & (kChunkSeen - 1)) < slices) {
  }
  __syncwarp();
  if (threadIdx.x % 32 == 0 && atomicAdd(word, kChunkSeen) / kChunkSeen == readers - 1)
    atomicExch(word, 0u);
  __syncwarp();
}

}  // namespace moe::mega::kernels
