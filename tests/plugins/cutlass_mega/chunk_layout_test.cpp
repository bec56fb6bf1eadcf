// cutlass_mega's prepared bf16 / e4m3 chunks (kernels/chunk_layout.hpp) on any machine: the
// chunks the device reorder writes, built here from the same functions over a stack whose every
// 16-byte unit names its own row and column, so that (1) every unit of the stack lands in exactly
// one chunk, and (2) where each consumer lane points its ldmatrix in a stage's tile
// (kernels/fragments.hpp, written for TMA's swizzled boxes) it finds the row and the K bytes the
// TMA path would have put there, for gated and plain W13 and for W2. A planted missing swizzle
// fails (2), so the check can fail.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/chunk_layout.hpp"
#include "kernels/fragments.hpp"

namespace moe::mega::kernels {
namespace {

// A stack's 16-byte unit as (row, unit within the row): row * 65536 + unit, unique for these
// sizes.
int64_t unit_name(int64_t row, int64_t unit) {
  return row * 65536 + unit;
}

// The chunks of `experts` experts, unit by unit, with `source` (chunk, unit) -> the stack's byte.
std::vector<int64_t> build_chunks(const ChunkStack& g, int64_t experts,
                                  const std::function<int64_t(int64_t, int)>& source) {
  const int64_t chunks = experts * g.slices * g.steps;
  std::vector<int64_t> units(size_t(chunks * kChunkUnits));
  for (int64_t q = 0; q < chunks; ++q)
    for (int u = 0; u < kChunkUnits; ++u) {
      const int64_t byte = source(q, u);
      units[size_t(q * kChunkUnits + u)] = unit_name(byte / g.row_bytes, byte % g.row_bytes / 16);
    }
  return units;
}

// The consumers' reads that disagree with the TMA path: lane `lane` of warp `warp` at K step j
// (32 bytes) of stage ks of item (e, s) must find row chunk_row(e, s, warp * 16 + lane % 16) at
// K bytes ks * 128 + 32 j + 16 (lane / 16).
int64_t wrong_reads(const ChunkStack& g, int64_t experts, const std::vector<int64_t>& units) {
  int64_t wrong = 0;
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t s = 0; s < g.slices; ++s)
      for (int64_t ks = 0; ks < g.steps; ++ks)
        for (int warp = 0; warp < 8; ++warp)
          for (int lane = 0; lane < 32; ++lane)
            for (int j = 0; j < 4; ++j) {
              const int offset = weight_load_offset(warp, lane, j, kChunkRowBytes);
              const int64_t q = chunk_index(g, e, s, ks);
              const int64_t got = units[size_t(q * kChunkUnits + offset / 16)];
              const int64_t row = chunk_row(g, e, s, warp * 16 + lane % 16);
              wrong += got != unit_name(row, (ks * 128 + 32 * j + 16 * (lane / 16)) / 16);
            }
  return wrong;
}

void expect_every_unit_once(const ChunkStack& g, int64_t experts,
                            const std::vector<int64_t>& units) {
  std::vector<int> seen(size_t(experts * g.rows_per_expert * g.row_bytes / 16), 0);
  for (int64_t name : units) {
    const int64_t row = name / 65536, unit = name % 65536;
    ASSERT_LT(row, experts * g.rows_per_expert);
    ++seen[size_t(row * (g.row_bytes / 16) + unit)];
  }
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "unit " << i;
}

struct Case {
  const char* name;
  ChunkStack g;
  int64_t experts;
};

// bf16 (2-byte) and e4m3 rows: W13 gated (I = 128: n1 = 256, 2 slices), W13 of relu2 (I = 256:
// 2 slices of 128 rows), W2 (H = 256 rows of I).
const Case kCases[] = {
    {"w13 gated bf16", {256, 256 * 2, 128, 2, 256 * 2 / 128}, 3},
    {"w13 gated e4m3", {256, 384, 128, 2, 3}, 2},
    {"w13 relu2 bf16", {256, 128 * 2, 0, 2, 2}, 2},
    {"w2 bf16", {256, 128 * 2, 0, 2, 2}, 3},
    {"w2 e4m3", {384, 256, 0, 3, 2}, 2},
};

TEST(MegaChunks, EveryUnitLandsOnceAndEveryConsumerReadFindsWhatTmaWouldHavePut) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const auto units = build_chunks(c.g, c.experts,
                                    [&](int64_t q, int u) { return chunk_source_byte(c.g, q, u); });
    expect_every_unit_once(c.g, c.experts, units);
    EXPECT_EQ(wrong_reads(c.g, c.experts, units), 0);
  }
}

// The same chunks without the swizzle (unit c of row r at c): most consumer reads are wrong.
TEST(MegaChunks, AChunkWithoutTheSwizzleFailsTheCheck) {
  const Case& c = kCases[0];
  const auto units = build_chunks(c.g, c.experts, [&](int64_t q, int u) {
    const int64_t ks = q % c.g.steps, item = q / c.g.steps;
    return chunk_row(c.g, item / c.g.slices, item % c.g.slices, u / 8) * c.g.row_bytes +
           ks * kChunkRowBytes + (u % 8) * 16;
  });
  expect_every_unit_once(c.g, c.experts, units);  // still a permutation
  EXPECT_GT(wrong_reads(c.g, c.experts, units), 0);
}

// The chunk index runs expert-major, then slice, then K stage: an item is one contiguous run.
TEST(MegaChunks, AnItemsStagesAreConsecutiveChunks) {
  const ChunkStack g{256, 512, 128, 2, 4};
  EXPECT_EQ(chunk_index(g, 0, 0, 0), 0);
  EXPECT_EQ(chunk_index(g, 0, 0, 3), 3);
  EXPECT_EQ(chunk_index(g, 0, 1, 0), 4);
  EXPECT_EQ(chunk_index(g, 1, 0, 0), 8);
  EXPECT_EQ(chunk_row(g, 1, 1, 0), 256 + 64);         // gate rows of slice 1
  EXPECT_EQ(chunk_row(g, 1, 1, 64), 256 + 128 + 64);  // its up rows, I = 128 further
}

}  // namespace
}  // namespace moe::mega::kernels
