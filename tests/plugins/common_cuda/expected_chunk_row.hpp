// The packers' chunk-row order as the layout describes it (moe_cuda/fp4_chunks.hpp), written
// independently of the packers' own functions, for the fp4 and mxfp8 chunk tests.
#pragma once

#include <cstdint>

#include "moe_cuda/fp4_chunks.hpp"

namespace moe::gpu {

// The canonical row of chunk row `r` of tile `t` of a stack of `rows` rows (gated: up rows from
// `gate_up` on), or -1 for padding. kHalves: rows 0-63 gate columns 64t.., 64-127 their up rows;
// kRowPairs: each 16 rows 8 gate columns (8 per 16 rows, in order) then their up rows.
inline int64_t expected_chunk_row(int64_t rows, int64_t gate_up, int64_t t, int64_t r,
                                  GatePairing pairing) {
  if (gate_up == 0) return t * kFp4TileRows + r < rows ? t * kFp4TileRows + r : -1;
  const bool halves = pairing == GatePairing::kHalves;
  const int64_t in_tile = halves ? r % 64 : 8 * (r / 16) + r % 8;
  const bool up = halves ? r >= 64 : r % 16 >= 8;
  const int64_t column = 64 * t + in_tile;
  if (column >= gate_up) return -1;
  return up ? gate_up + column : column;
}

}  // namespace moe::gpu
