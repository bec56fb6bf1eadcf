// The bf16 and e4m3 stacks reordered into their prepared chunks on the device
// (kernels/chunk_layout.hpp): one 16-byte unit a thread, written in the chunks' order.
#include "../kernels/chunk_layout.hpp"
#include "chunk_layout.hpp"

namespace moe::mega::detail {
namespace {

__global__ void reorder(const uint8_t* src, uint8_t* dst, kernels::ChunkStack g, int64_t units) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < units;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t q = i / kernels::kChunkUnits;
    const int u = int(i % kernels::kChunkUnits);
    *reinterpret_cast<uint4*>(dst + i * 16) =
        *reinterpret_cast<const uint4*>(src + kernels::chunk_source_byte(g, q, u));
  }
}

}  // namespace

const char* reorder_to_chunks(const void* stack, void* chunks, const ChunkShape& shape,
                              int64_t experts) noexcept {
  const kernels::ChunkStack g{shape.rows_per_expert, shape.row_bytes, shape.up_row, shape.slices,
                              shape.row_bytes / kernels::kChunkRowBytes};
  const int64_t units = experts * g.slices * g.steps * kernels::kChunkUnits;
  if (units == 0) return nullptr;
  reorder<<<1024, 256>>>(static_cast<const uint8_t*>(stack), static_cast<uint8_t*>(chunks), g,
                         units);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cudaGetErrorString(e);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return cudaGetErrorString(e);
  return nullptr;
}

}  // namespace moe::mega::detail
