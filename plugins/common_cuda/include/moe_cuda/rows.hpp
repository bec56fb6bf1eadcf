// Row ranges whose bounds may live on the device. Permuted buffers are sized for the worst case
// (R_max rows) while the rows actually used are only known on the device (group_offsets), so a
// kernel is launched over R_max rows and reads its bounds there: no host sync, graph capturable.
#pragma once

#include <cstdint>

namespace moe::gpu {

// bf16 tensors cross this library's host API as their bits (uint16_t, as moe/formats.hpp does):
// no CUDA types in the declarations. Device pointers are 16-byte aligned for the vector paths;
// other alignments take a scalar path.

struct RowRange {
  int64_t max_rows = 0;            // rows the buffers hold; the grid is sized from it
  const int64_t* begin = nullptr;  // device scalar, first row; null = 0
  const int64_t* end = nullptr;    // device scalar, one past the last row (clamped to max_rows);
                                   // null = max_rows
};

}  // namespace moe::gpu
