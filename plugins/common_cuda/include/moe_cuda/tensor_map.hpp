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

// A 4D descriptor over rows of `cols` elements (row stride `row_ld` elements), rows / 16 blocks
// of 16 viewed as [block][half][j] with row = 16 block + half_rows * half + pair_rows * j: boxes
// of 8 j x 2 halves x 8 blocks x box_cols land as 128 rows, row 16b + 8h + j of the box. In order
// (pair_rows 1, half_rows 8) that is the rows as they are; pair_rows 2, half_rows 1 reads rows
// interleaved in pairs (2c, 2c + 1) as 8 first rows of pairs, then their 8 second rows. `rows`
// must be a multiple of 16.
bool encode_tensor_map_row_pairs(CUtensorMap* map, CUtensorMapDataType dtype, const void* base,
                                 int64_t rows, int64_t cols, int64_t row_ld, int elem_bytes,
                                 int pair_rows, int half_rows, int box_cols) noexcept;

}  // namespace moe::gpu
