// TMA descriptors for the sm90a kernels of the GPU plugins: the driver's encoder, looked up once
// through the runtime (no libcuda link), over a row-major matrix read in boxes with the 128-byte
// swizzle that wgmma and ldmatrix address.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace moe::gpu {

// A 2D descriptor over [rows, cols] elements of `elem_bytes` bytes (row stride cols *
// elem_bytes), read as box_rows x box_cols boxes (box_cols * elem_bytes <= 128). False when the
// driver lacks cuTensorMapEncodeTiled or refuses the arguments.
bool encode_tensor_map_2d(CUtensorMap* map, CUtensorMapDataType dtype, const void* base,
                          int64_t rows, int64_t cols, int elem_bytes, int box_rows,
                          int box_cols) noexcept;

}  // namespace moe::gpu
