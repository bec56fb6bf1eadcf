// The bf16 and e4m3 stacks reordered into their prepared chunks on the device
// (kernels/chunk_layout.hpp), an expert at a time: one 16-byte unit a thread, written in the
// chunks' order.
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

const char* reorder_to_chunks(void* stack, const ChunkShape& shape, int64_t experts) noexcept {
  const kernels::ChunkStack g{shape.rows_per_expert, shape.row_bytes, shape.up_row, shape.slices,
                              shape.row_bytes / kernels::kChunkRowBytes};
  const int64_t units = g.slices * g.steps * kernels::kChunkUnits;  // an expert's
  const size_t expert_bytes = size_t(units) * 16;
  if (units == 0 || experts == 0) return nullptr;
  void* scratch = nullptr;
  if (cudaError_t e = cudaMalloc(&scratch, expert_bytes); e != cudaSuccess)
    return cudaGetErrorString(e);
  cudaError_t e = cudaSuccess;
  auto* base = static_cast<uint8_t*>(stack);
  for (int64_t x = 0; x < experts && e == cudaSuccess; ++x) {
    uint8_t* slab = base + size_t(x) * expert_bytes;
    e = cudaMemcpyAsync(scratch, slab, expert_bytes, cudaMemcpyDeviceToDevice, nullptr);
    if (e != cudaSuccess) break;
    reorder<<<1024, 256>>>(static_cast<const uint8_t*>(scratch), slab, g, units);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  cudaFree(scratch);
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace moe::mega::detail
