// The bf16 tiles of the weight-only GEMM's bf16 instance (moe_cuda/bf16_tiles.hpp): every
// canonical weight lands at its tile row (the chunk-row order the layout describes, written
// independently in expected_chunk_row.hpp) and K, through gate/up pairing of both kinds, padded
// tiles and K, a shared expert narrower than the routed ones; padding is zero, and a geometry that
// would cut the stack is refused by name.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "expected_chunk_row.hpp"
#include "moe/sdk/error.hpp"
#include "moe_cuda/bf16_tiles.hpp"

namespace moe::gpu {
namespace {

struct Case {
  int64_t experts, rows, k, gate_up;
  Fp4Padding pad;
  GatePairing pairing;
};

// Packs a random stack and checks every element of the output: the canonical weight of its
// (expert, row, K), or zero for padding. Returns how many real weights it found.
int64_t check_tiles(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> w(size_t(c.experts * c.rows * c.k));
  for (auto& x : w) x = uint16_t(rng() | 1u);  // never 0: a misplaced weight cannot pass as pad
  const std::vector<uint16_t> out =
      pack_bf16_stack(w.data(), c.experts, c.rows, c.k, c.gate_up, "w13", c.pad, c.pairing);
  const int64_t tiles = c.pad.tiles > 0 ? c.pad.tiles : c.rows / kFp4TileRows;
  const int64_t ld = (c.pad.stages > 0 ? c.pad.stages : c.k / kFp4StageK) * kFp4StageK;
  EXPECT_EQ(int64_t(out.size()), c.experts * tiles * kFp4TileRows * ld);
  int64_t real = 0;
  for (int64_t e = 0; e < c.experts; ++e)
    for (int64_t t = 0; t < tiles; ++t)
      for (int64_t r = 0; r < kFp4TileRows; ++r) {
        const int64_t row = expected_chunk_row(c.rows, c.gate_up, t, r, c.pairing);
        for (int64_t kk = 0; kk < ld; ++kk) {
          const uint16_t got = out[size_t(((e * tiles + t) * kFp4TileRows + r) * ld + kk)];
          const bool weight = row >= 0 && kk < c.k;
          const uint16_t want = weight ? w[size_t((e * c.rows + row) * c.k + kk)] : 0;
          if (got != want) {
            ADD_FAILURE() << "expert " << e << " tile " << t << " row " << r << " k " << kk
                          << ": got " << got << ", want " << want;
            return real;
          }
          real += weight;
        }
      }
  return real;
}

TEST(Bf16Tiles, PlainStackExactTiles) {
  const Case c{2, 256, 256, 0, {}, GatePairing::kHalves};
  EXPECT_EQ(check_tiles(c, 1), 2 * 256 * 256);
}

TEST(Bf16Tiles, GatedRowPairsPaddedTilesAndK) {
  // I = 96 (gate and up rows of 96 columns): two tiles of 64 columns, the second half empty; K =
  // 200 padded to 256.
  const Case c{3, 192, 200, 96, {2, 2}, GatePairing::kRowPairs};
  EXPECT_EQ(check_tiles(c, 2), 3 * 192 * 200);
}

TEST(Bf16Tiles, GatedHalvesExactTiles) {
  const Case c{1, 256, 128, 128, {}, GatePairing::kHalves};
  EXPECT_EQ(check_tiles(c, 3), 256 * 128);
}

TEST(Bf16Tiles, PlainStackPaddedRows) {
  // A narrower shared expert: H = 136 rows padded to two tiles of the routed experts' geometry.
  const Case c{1, 136, 72, 0, {2, 1}, GatePairing::kRowPairs};
  EXPECT_EQ(check_tiles(c, 4), 136 * 72);
}

// e4m3 tiles (fp8_tensor on the GEMM's e4m3 instance) hold the codes at the places the bf16
// tiles hold bf16 weights: the same stack packed both ways agrees byte for element.
TEST(Bf16Tiles, E4m3TilesAreTheBf16TilesOfOneByteCodes) {
  const Case c{2, 192, 200, 96, {2, 2}, GatePairing::kRowPairs};
  std::mt19937 rng(6);
  std::vector<uint8_t> codes(size_t(c.experts * c.rows * c.k));
  for (auto& x : codes) x = uint8_t(rng() % 255 + 1);
  const std::vector<uint16_t> wide(codes.begin(), codes.end());
  const std::vector<uint8_t> got =
      pack_e4m3_stack(codes.data(), c.experts, c.rows, c.k, c.gate_up, "w13", c.pad, c.pairing);
  const std::vector<uint16_t> want =
      pack_bf16_stack(wide.data(), c.experts, c.rows, c.k, c.gate_up, "w13", c.pad, c.pairing);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(uint16_t(got[i]), want[i]) << "element " << i;
  EXPECT_GT(check_tiles(c, 7), 0);  // and the bf16 packing itself is right (above)
}

TEST(Bf16Tiles, RefusesAGeometryThatCutsTheStack) {
  std::vector<uint16_t> w(size_t(2 * 128 * 256), 1);
  try {
    (void)pack_bf16_stack(w.data(), 1, 256, 256, 0, "w2", {1, 2});
    FAIL() << "one tile of 128 rows cannot hold 256";
  } catch (const moe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("w2"), std::string::npos) << e.what();
  }
  try {
    (void)pack_bf16_stack(w.data(), 1, 128, 256, 0, "w2", {1, 1});
    FAIL() << "one stage of 128 K cannot hold 256";
  } catch (const moe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("w2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moe::gpu
