// cutlass_mega's schedule (docs/design.md §13.1): every CTA sorts a batch's slots by expert in its
// own shared memory, stably, so all CTAs agree without exchanging anything.
#pragma once

#include <cub/block/block_scan.cuh>

#include "kernels/config.cuh"

namespace moe::mega::kernels {

struct Schedule {
  int16_t* slot_token;    // [slots] token of each slot, grouped by expert, token order within
  int16_t* slot_pos;      // [T * S] where slot t * S + j sits in that order, -1 if no expert
                          // (S = slot_width: top_k routed columns, then the virtual experts')
  int32_t* warp_counts;   // [kWarps][kMaxExperts] scratch
  int32_t* expert_first;  // [E] first slot of expert e (active or not)
  int32_t* expert_count;  // [E]
  int32_t* active;        // [A] active experts in id order
  int32_t* item_prefix;   // [A + 1] first work item of each active expert (phase 1 chunks)
  int32_t num_active;
};

using Scan = cub::BlockScan<int64_t, kThreads>;

// The scan's three sums in one 64-bit word: slots (bits 0-15, at most kMaxSlots), active experts
// (16-31, at most kMaxExperts) and phase 1's token chunks (32-47, at most kMaxSlots).
constexpr int64_t kScanActive = int64_t(1) << 16, kScanItems = int64_t(1) << 32;
static_assert(kMaxSlots < (1 << 16) && kMaxExperts < (1 << 16), "the scan's fields hold them");

// Every CTA computes the same schedule. Slot i = t * slot_width + j is the i-th in token order;
// warp w sorts slots [w * per, (w + 1) * per) in two passes (count, then place), each expert's
// run of warps laid out in warp order: the result is stable, so token order within an expert.
// `ids`: the batch's ids [T, p.width], p.ids or the CTA's own routing of the batch (Params::route).
template <int W>
__device__ void build_schedule(const Params& p, const int32_t* ids, Schedule& s,
                               Scan::TempStorage& scan) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int n = p.tokens * p.slot_width, e_count = p.experts;
  const int per = ((n + kWarps - 1) / kWarps + 31) / 32 * 32;
  const bool sorter = warp < kWarps;  // the producer warp only joins the block-wide steps
  const int lo = sorter ? warp * per : 0, hi = sorter ? min(n, lo + per) : 0;
  int32_t* mine = s.warp_counts + (sorter ? warp : 0) * kMaxExperts;
  if (sorter)
    for (int e = lane; e < e_count; e += 32) mine[e] = 0;
  __syncwarp();
  // Slot i = t * slot_width + j: a routed column j < top_k (its id, or none), or a virtual
  // expert's column (src/virtual_experts.hpp: a sink's chunk where its column holds the sink's id,
  // the shared expert's always).
  auto expert_of = [&](int i) {
    if (i >= hi) return -1;
    const int t = i / p.slot_width, j = i - t * p.slot_width;
    if (j < p.top_k) {
      const int32_t id = ids[t * p.width + j];
      return (id >= 0 && id < p.routed) ? id : -1;
    }
    const int c = j - p.top_k, src = p.col_src[c];
    if (src < 0) return int(p.col_expert[c]);
    return ids[t * p.width + src] == p.col_match[c] ? int(p.col_expert[c]) : -1;
  };
  // Pass 1: this warp's count per expert. Each slot's expert is kept in slot_pos (its own entry,
  // overwritten by pass 2 in the same lane), so pass 2 does not read the ids from global memory
  // again.
  for (int base = lo; base < hi; base += 32) {
    const int e = expert_of(base + lane);
    if (base + lane < hi) s.slot_pos[base + lane] = int16_t(e);
    const uint32_t same = __match_any_sync(0xffffffffu, e);
    if (e >= 0 && lane == __ffs(same) - 1) mine[e] += __popc(same);
    __syncwarp();
  }
  __syncthreads();
  // Per expert: total; by one exclusive scan its first slot, its active index and the first of
  // its phase 1 items (ceil(count / kTok<W>) token chunks, times the column slices).
  int32_t total[2];
  int64_t fields[2], first[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int e = threadIdx.x * 2 + r;
    int32_t c = 0;
    if (e < e_count)
      for (int w = 0; w < kWarps; ++w) c += s.warp_counts[w * kMaxExperts + e];
    total[r] = c;
    fields[r] = c > 0 ? c + kScanActive + kScanItems * ((c + kTok<W> - 1) / kTok<W>) : 0;
  }
  int64_t sum = 0;
  Scan(scan).ExclusiveSum(fields, first, sum);
  __syncthreads();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int e = threadIdx.x * 2 + r;
    if (e >= e_count) continue;
    const int32_t slot0 = int32_t(first[r] & 0xffff), index = int32_t((first[r] >> 16) & 0xffff);
    s.expert_first[e] = slot0;
    s.expert_count[e] = total[r];
    if (total[r] > 0) {
      s.active[index] = e;
      s.item_prefix[index] = int32_t(first[r] >> 32);
    }
    int32_t at = slot0;  // warp w's slots of e start after those of warps < w
    for (int w = 0; w < kWarps; ++w) {
      const int32_t c = s.warp_counts[w * kMaxExperts + e];
      s.warp_counts[w * kMaxExperts + e] = at;
      at += c;
    }
  }
  if (threadIdx.x == 0) {
    s.num_active = int32_t((sum >> 16) & 0xffff);
    s.item_prefix[s.num_active] = int32_t(sum >> 32);
  }
  __syncthreads();
  for (int base = lo; base < hi; base += 32) {  // pass 2: place, stable
    const int i = base + lane, e = i < hi ? int(s.slot_pos[i]) : -1;
    const uint32_t same = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(same & ((1u << lane) - 1));
    if (e >= 0) {
      const int at = mine[e] + rank;
      s.slot_token[at] = int16_t(i / p.slot_width);
      s.slot_pos[i] = int16_t(at);
    } else if (i < hi) {
      s.slot_pos[i] = -1;
    }
    __syncwarp();
    if (e >= 0 && lane == __ffs(same) - 1) mine[e] += __popc(same);
    __syncwarp();
  }
  __syncthreads();
}

}  // namespace moe::mega::kernels
