// The 128x4 swizzled scale layout that block-scaled tensor-core GEMMs read (TensorRT-LLM's
// block_scale_interleave): a scale matrix (rows, cols) is zero-padded to
// (round_up(rows, 128), round_up(cols, 4)) and cut into 128x4 tiles, stored tile row by tile
// row; inside a tile, row r sits at (r % 32) * 16 + ((r % 128) / 32) * 4, so the four 32-row
// slices of a tile are interleaved and one 16-byte load (for 1-byte scales) gives a thread the
// 4 K-scales of 4 rows 32 apart.
#pragma once

#include <cstdint>

#include "matrix_stack.hpp"

namespace moe::trtllm {

inline int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

// Element offset of scale (r, c) of a (rows, cols) matrix in the swizzled layout:
// c%4 + (c/4)*512 + (r%32)*16 + ((r%128)/32)*4 + (r/128)*128*round_up(cols,4).
inline int64_t swizzled_offset(int64_t r, int64_t c, int64_t cols) {
  return c % 4 + (c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 +
         (r / 128) * 128 * round_up(cols, 4);
}

// Elements of one swizzled matrix: round_up(rows, 128) * round_up(cols, 4).
inline int64_t swizzled_elems(int64_t rows, int64_t cols) {
  return round_up(rows, 128) * round_up(cols, 4);
}

// The stored shape of a swizzled stack: (batch, round_up(rows, 128), round_up(cols, 4)).
inline MatrixStack swizzled_shape(const MatrixStack& s) {
  return {s.batch, round_up(s.rows, 128), round_up(s.cols, 4), s.elem_bytes};
}

// (batch, rows, cols) row-major -> (batch, swizzled_elems(rows, cols)), padding zeroed.
Bytes swizzle_scales_128x4(ByteSpan in, const MatrixStack& s);

// Inverse: `in` holds (batch, swizzled_elems(rows, cols)); `s` is the unpadded shape to
// restore. The padding is dropped.
Bytes unswizzle_scales_128x4(ByteSpan in, const MatrixStack& s);

}  // namespace moe::trtllm
