// cutlass_mega's prepared chunks of bf16 and e4m3 weights (plain C++, also compiled for the
// device, so the prepare kernel and the host tests share it; docs/design.md §13): each stage of
// each work item as the 16 KB shared-memory image the two TMA boxes would have made of it (128 rows
// x 128 bytes of K, TMA's 128-byte swizzle baked in), ordered [expert][slice][K stage] as the
// 4-bit chunks are, so a stage is one contiguous bulk copy and the consumers read it unchanged.
// bf16 weights stream so by default (two adjacent chunks a stage, 32 KB by one bulk copy, where H
// and I are multiples of 128); e4m3 ones with MOE_MEGA_CHUNKS=1 (a measurement).
#pragma once

#include <cstdint>

#include "kernels/host_device.hpp"

namespace moe::mega::kernels {

constexpr int kChunkRows = 128, kChunkRowBytes = 128, kChunkBytes = kChunkRows * kChunkRowBytes;
constexpr int kChunkUnits = kChunkBytes / 16;  // 16-byte units a chunk holds

// One weight stack's items: W13 [E][n1][H] (gated: a tile pairs 64 gate rows with the 64 up rows of
// the same columns) or W2 [E][H][I] (a tile is 128 consecutive rows).
struct ChunkStack {
  int64_t rows_per_expert;  // n1 or H
  int64_t row_bytes;        // K x the element's bytes
  int64_t up_row;           // gated W13: I, the first up row; otherwise 0 (unpaired)
  int64_t slices;           // items an expert has (tiles of rows)
  int64_t steps;            // 128-byte K stages a row has
};

// The stack's row that tile row r (0..127) of slice s of expert e reads.
MOE_MEGA_HD constexpr int64_t chunk_row(const ChunkStack& g, int64_t e, int64_t s, int r) {
  const int64_t base = e * g.rows_per_expert;
  if (g.up_row > 0) return r < 64 ? base + s * 64 + r : base + g.up_row + s * 64 + (r - 64);
  return base + s * kChunkRows + r;
}

// Where 16-byte unit c (0..7) of tile row r lands in its chunk: TMA's 128-byte swizzle.
MOE_MEGA_HD constexpr int chunk_unit_byte(int r, int c) {
  return r * kChunkRowBytes + ((c ^ (r % 8)) << 4);
}

// The chunk of (expert, slice, K stage): one contiguous run per item, as the kernel streams it.
MOE_MEGA_HD constexpr int64_t chunk_index(const ChunkStack& g, int64_t e, int64_t s, int64_t ks) {
  return (e * g.slices + s) * g.steps + ks;
}

// The stack's byte that 16-byte unit u (0..kChunkUnits - 1, in the chunk's own order) of chunk q
// copies.
MOE_MEGA_HD constexpr int64_t chunk_source_byte(const ChunkStack& g, int64_t q, int u) {
  const int64_t ks = q % g.steps, item = q / g.steps;
  const int r = u / 8, c = (u % 8) ^ (r % 8);  // chunk_unit_byte inverted
  return chunk_row(g, item / g.slices, item % g.slices, r) * g.row_bytes + ks * kChunkRowBytes +
         c * 16;
}

}  // namespace moe::mega::kernels
