// Token permutation around a stable CUB radix sort: keys (the group of each slot) before it,
// offsets and row maps after it.
//
// NOTES: offsets come from a binary search of the sorted keys (one thread per group) rather than
// a histogram and a scan: no atomics, no second CUB algorithm to instantiate, and deterministic.
// Slots that do no work here sort last under key G, so every slot, skipped or not, passes through
// the sort exactly once and the finish kernel writes slot_row for all of them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "dependent_launch.cuh"
#include "group_tiles.cuh"
#include "params.hpp"

namespace moe::gpu::kernels {

constexpr int kPermuteThreads = 256;

// moe::local_expert_id on the device; -1 for an id outside [0, E) or on another rank.
__device__ __forceinline__ int32_t local_expert(const PermuteKeyParams& p, int32_t id) {
  if (id < 0 || id >= p.experts) return -1;
  if (p.local_of_global != nullptr) {
    const int32_t l = p.local_of_global[id];
    return l < p.local_experts ? l : -1;
  }
  switch (p.placement) {
    case 1: {  // MOE_EP_LINEAR
      const int64_t l = id - p.local_offset;
      return (l >= 0 && l < p.local_experts) ? static_cast<int32_t>(l) : -1;
    }
    case 2:  // MOE_EP_ROUND_ROBIN
      return id % p.ep_size == p.ep_rank ? id / p.ep_size : -1;
    default:
      return id;
  }
}

// The group of slot i (G when it does no work here). Invalid ids count as -1 (see NOTES in
// moe_cuda/permute.hpp).
__device__ __forceinline__ uint32_t slot_group(const PermuteKeyParams& p, int64_t i) {
  if (i >= p.tokens * p.width)
    return static_cast<uint32_t>(p.local_experts + p.sinks);  // shared expert: every token
  const int32_t id = p.topk_ids[i];
  const int j = static_cast<int>(i % p.width);
  if (j < p.top_k) {
    const int32_t local = local_expert(p, id);
    return local >= 0 ? static_cast<uint32_t>(local) : p.groups;
  }
  const int s = j - p.top_k;
  return id == p.experts + s ? static_cast<uint32_t>(p.local_experts + s) : p.groups;
}

// keys[i] = group of slot i, slots[i] = i.
__global__ void __launch_bounds__(kPermuteThreads) permute_keys_kernel(const PermuteKeyParams p) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.items;
       i += int64_t(gridDim.x) * blockDim.x) {
    p.keys[i] = slot_group(p, i);
    p.slots[i] = static_cast<int32_t>(i);
  }
}

// The masked layout: slot i of `group` (G: none here) took position `pos` among its group's
// max_m rows; its row, and the row's token, group and slot (-1 for no row: a skipped slot, or
// past max_m, which only an expert repeated within a token reaches; never write past the group).
__device__ __forceinline__ void take_masked_row(const PermuteKeyParams& p,
                                                const MaskedRowsParams& m, int64_t i,
                                                uint32_t group, int32_t pos) {
  if (group >= p.groups || pos >= m.max_m) {
    m.slot_row[i] = -1;
    return;
  }
  const int64_t routed_slots = p.tokens * p.width;
  const int32_t row = static_cast<int32_t>(int64_t(group) * m.max_m + pos);
  m.slot_row[i] = row;
  m.row_token[row] = static_cast<int32_t>(i < routed_slots ? i / p.width : i - routed_slots);
  m.row_group[row] = static_cast<int32_t>(group);
  m.row_slot[row] = static_cast<int32_t>(i);
}

// The masked layout: slot i takes the next free row of its group's max_m rows (counts start at
// zero, row_token at -1). Rows inside a group come in atomic order; see moe_cuda/permute.hpp.
__global__ void __launch_bounds__(kPermuteThreads)
    permute_masked_kernel(const PermuteKeyParams p, const MaskedRowsParams m) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.items;
       i += int64_t(gridDim.x) * blockDim.x) {
    const uint32_t group = slot_group(p, i);
    take_masked_row(p, m, i, group, group < p.groups ? atomicAdd(m.group_counts + group, 1) : 0);
  }
}

// The one-block kernels' bounds (permute_masked_one_block_kernel, permute_one_launch_kernel).
constexpr int kOneLaunchItems = 1024;
constexpr int kOneLaunchGroups = 2047;

// The masked layout in one block, for decode batches (up to kMaskedOneBlockRows rows and
// kOneLaunchGroups groups): the same outputs as the two clears and permute_masked_kernel, with
// the counts in shared memory, so two graph nodes that no programmatic edge crosses go away.
constexpr int kMaskedOneBlockThreads = 1024;
constexpr int64_t kMaskedOneBlockRows = 16384;

__global__ void __launch_bounds__(kMaskedOneBlockThreads)
    permute_masked_one_block_kernel(const PermuteKeyParams p, const MaskedRowsParams m,
                                    int64_t rows) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  __shared__ int32_t counts[kOneLaunchGroups];
  const int groups = static_cast<int>(p.groups);
  for (int g = threadIdx.x; g < groups; g += blockDim.x) counts[g] = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) m.row_token[r] = -1;
  __syncthreads();  // the clears before any row is taken (global writes too: one block)
  for (int64_t i = threadIdx.x; i < p.items; i += blockDim.x) {
    const uint32_t group = slot_group(p, i);
    take_masked_row(p, m, i, group, group < p.groups ? atomicAdd(counts + group, 1) : 0);
  }
  __syncthreads();
  // A count past max_m (the caller repeated an expert within a token: a caller error the reference
  // refuses) would have a GEMM run rows past its group's: the group keeps its max_m rows.
  for (int g = threadIdx.x; g < groups; g += blockDim.x)
    m.group_counts[g] = min(counts[g], static_cast<int32_t>(m.max_m));
}

// First position in keys[0, n) (sorted) whose key is >= `key`.
__device__ __forceinline__ int64_t lower_bound(const uint32_t* keys, int64_t n, uint32_t key) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (keys[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// The whole permutation in one block, for up to kOneLaunchItems slots and kOneLaunchGroups
// groups: the same outputs as keys -> sort -> finish, with two launches fewer (decode batches).
// Warp 0 ranks the slots within their group 32 at a time in slot order (a slot's rank: the slots
// before it with its key), which keeps rows in slot order and skipped slots (key G) last.
__global__ void __launch_bounds__(kPermuteThreads)
    permute_one_launch_kernel(const PermuteKeyParams k, const PermuteFinishParams f) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  __shared__ uint32_t keys[kOneLaunchItems];
  __shared__ int32_t ranks[kOneLaunchItems];
  __shared__ int32_t run[kOneLaunchGroups + 1];    // slots per key (G: skipped)
  __shared__ int32_t first[kOneLaunchGroups + 2];  // each key's first row: run's prefix
  const int items = static_cast<int>(k.items), groups = static_cast<int>(k.groups);
  for (int i = threadIdx.x; i < items; i += blockDim.x) keys[i] = slot_group(k, i);
  for (int g = threadIdx.x; g <= groups; g += blockDim.x) run[g] = 0;
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    for (int base = 0; base < items; base += 32) {
      const int i = base + lane;
      const uint32_t key = i < items ? keys[i] : 0xffffffffu;
      const unsigned same = __match_any_sync(0xffffffffu, key);
      const unsigned below = same & ((1u << lane) - 1u);
      if (i < items) ranks[i] = run[key] + __popc(below);
      __syncwarp();
      if (i < items && below == 0) run[key] += __popc(same);  // the key's lowest lane
      __syncwarp();
    }
  }
  __syncthreads();
  // G + 1 keys, blocks of one slot (ends with __syncthreads).
  build_tile_prefix(
      groups + 1, 1, [&](int g) { return run[g]; }, first);
  for (int g = threadIdx.x; g <= groups; g += blockDim.x) {
    f.group_offsets[g] = first[g];
    if (g < groups) f.group_counts[g] = run[g];
  }
  for (int i = threadIdx.x; i < items; i += blockDim.x) {
    const uint32_t key = keys[i];
    const int32_t row = first[key] + ranks[i];
    if (key < static_cast<uint32_t>(groups)) {
      f.row_token[row] =
          i < f.routed_slots ? i / f.width : static_cast<int32_t>(i - f.routed_slots);
      f.row_slot[row] = i;
      f.row_group[row] = static_cast<int32_t>(key);
      f.slot_row[i] = row;
    } else {
      f.row_token[row] = -1;
      f.row_slot[row] = -1;
      f.row_group[row] = -1;
      f.slot_row[i] = -1;
    }
  }
}

// Thread i <= G: group offsets and counts. Thread i < items: the maps of sorted position i.
__global__ void __launch_bounds__(kPermuteThreads)
    permute_finish_kernel(const PermuteFinishParams p) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  const int64_t n = p.items > p.groups + 1 ? p.items : p.groups + 1;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (i <= p.groups) {
      const int64_t begin = lower_bound(p.keys, p.items, static_cast<uint32_t>(i));
      p.group_offsets[i] = begin;
      if (i < p.groups)
        p.group_counts[i] = static_cast<int32_t>(
            lower_bound(p.keys, p.items, static_cast<uint32_t>(i + 1)) - begin);
    }
    if (i < p.items) {
      const uint32_t key = p.keys[i];
      const int32_t slot = p.slots[i];
      if (key < static_cast<uint32_t>(p.groups)) {
        p.row_token[i] =
            slot < p.routed_slots ? slot / p.width : static_cast<int32_t>(slot - p.routed_slots);
        p.row_slot[i] = slot;
        p.row_group[i] = static_cast<int32_t>(key);
        p.slot_row[slot] = static_cast<int32_t>(i);
      } else {
        p.row_token[i] = -1;
        p.row_slot[i] = -1;
        p.row_group[i] = -1;
        p.slot_row[slot] = -1;
      }
    }
  }
}

}  // namespace moe::gpu::kernels
