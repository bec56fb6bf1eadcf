// Gather of token rows into permuted order: out[r, :] = hidden[row_token[r], :]; and the scatter
// of dense per-slot-column rows into their slots' permuted rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "dependent_launch.cuh"
#include "device_utils.cuh"
#include "params.hpp"

namespace moe::gpu::kernels {

constexpr int kGatherThreads = 128;

// A block per row, grid-striding over the rows in use (read on the device); threads stride over
// 16-byte vectors (kVec: H % 8 == 0 and aligned pointers) or single elements.
template <bool kVec>
__global__ void __launch_bounds__(kGatherThreads) gather_rows_kernel(const GatherParams p) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  const int64_t rows = range_end(p.num_rows, p.max_rows);
  const int64_t h = p.hidden_size;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    if (p.row_group != nullptr && p.row_group[r] >= p.skip_begin && p.row_group[r] < p.skip_end)
      continue;                                                    // a group computed apart
    const uint16_t* src = p.hidden + int64_t(p.row_token[r]) * h;  // (H)
    uint16_t* dst = p.out + r * h;                                 // (H)
    if constexpr (kVec) {
      const uint4* s = reinterpret_cast<const uint4*>(src);
      uint4* d = reinterpret_cast<uint4*>(dst);
      for (int64_t c = threadIdx.x; c < h / kVecElems; c += blockDim.x) d[c] = s[c];
    } else {
      for (int64_t c = threadIdx.x; c < h; c += blockDim.x) dst[c] = src[c];
    }
  }
}

// A block per (column, token): the row of that slot, if it has one, gets src[column][token].
template <bool kVec>
__global__ void __launch_bounds__(kGatherThreads)
    scatter_slot_rows_kernel(const ScatterSlotParams p) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  const int64_t h = p.hidden_size, pairs = p.columns * p.tokens;
  for (int64_t i = blockIdx.x; i < pairs; i += gridDim.x) {
    const int64_t c = i / p.tokens, t = i % p.tokens;
    const int32_t row = p.slot_row[t * p.width + p.first_column + c];
    if (row < 0) continue;
    const uint16_t* src = p.src + i * h;  // (H)
    uint16_t* dst = p.out + int64_t(row) * h;
    if constexpr (kVec) {
      const uint4* s = reinterpret_cast<const uint4*>(src);
      uint4* d = reinterpret_cast<uint4*>(dst);
      for (int64_t x = threadIdx.x; x < h / kVecElems; x += blockDim.x) d[x] = s[x];
    } else {
      for (int64_t x = threadIdx.x; x < h; x += blockDim.x) dst[x] = src[x];
    }
  }
}

}  // namespace moe::gpu::kernels
