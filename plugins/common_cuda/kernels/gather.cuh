// Gather of token rows into permuted order: out[r, :] = hidden[row_token[r], :].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "device_utils.cuh"
#include "params.hpp"

namespace moe::gpu::kernels {

constexpr int kGatherThreads = 128;

// A block per row, grid-striding over the rows in use (read on the device); threads stride over
// 16-byte vectors (kVec: H % 8 == 0 and aligned pointers) or single elements.
template <bool kVec>
__global__ void __launch_bounds__(kGatherThreads) gather_rows_kernel(const GatherParams p) {
  const int64_t rows = range_end(p.num_rows, p.max_rows);
  const int64_t h = p.hidden_size;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
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

}  // namespace moe::gpu::kernels
