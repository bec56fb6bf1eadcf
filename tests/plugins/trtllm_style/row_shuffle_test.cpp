// The shuffleMatrixA row order: index maps written out by hand, round trips, refusals.
#include "row_shuffle.hpp"

#include "layout_test_util.hpp"

namespace moe::trtllm {
namespace {

using testing::expect_error;
using testing::iota_bytes;
using testing::random_bytes;

TEST(RowShuffle, BlockIs32ForTilesThatAreMultiplesOf128Else16) {
  EXPECT_EQ(shuffle_block_size(128), 32);
  EXPECT_EQ(shuffle_block_size(256), 32);
  EXPECT_EQ(shuffle_block_size(64), 16);
  EXPECT_EQ(shuffle_block_size(192), 16);
  EXPECT_EQ(shuffle_block_size(8), 16);
}

TEST(RowShuffle, IndexMapForBlock16TakesEvenThenOddSourceRows) {
  // dst 8*b + a <- src 2*a + b
  const RowMap first{0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15};
  const RowMap map = shuffle_row_map(32, 64);
  ASSERT_EQ(map.size(), 32u);
  EXPECT_EQ(RowMap(map.begin(), map.begin() + 16), first);
  for (int d = 0; d < 16; ++d) EXPECT_EQ(map[16 + d], 16 + first[d]) << "second block, dst " << d;
}

TEST(RowShuffle, IndexMapForBlock32TakesEveryFourthSourceRow) {
  // dst 8*b + a <- src 4*a + b
  const RowMap map = shuffle_row_map(64, 128);
  const RowMap first{0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29, 2, 6};
  EXPECT_EQ(RowMap(map.begin(), map.begin() + 18), first);
  EXPECT_EQ(map[31], 31);
  EXPECT_EQ(map[32], 32);
  EXPECT_EQ(map[33], 36);
  EXPECT_EQ(map[40], 33);
}

TEST(RowShuffle, SourceRowLandsWhereTheSpecSays) {
  for (int64_t tile : {64, 128}) {
    const int64_t block = shuffle_block_size(tile);
    const RowMap map = shuffle_row_map(3 * block, tile);
    for (int64_t blk = 0; blk < 3; ++blk)
      for (int64_t a = 0; a < 8; ++a)
        for (int64_t b = 0; b < block / 8; ++b)
          EXPECT_EQ(map[blk * block + 8 * b + a], blk * block + (block / 8) * a + b);
  }
}

// fp8_block scales cover 128 rows and are left in place by prepare(): that is exact only because
// no row leaves its 128-row block.
TEST(RowShuffle, NoRowLeavesIts128RowScaleBlock) {
  for (int64_t tile : {64, 128}) {
    const RowMap map = shuffle_row_map(512, tile);
    for (int64_t d = 0; d < 512; ++d) EXPECT_EQ(map[d] / 128, d / 128) << "tile " << tile;
  }
}

TEST(RowShuffle, GathersWholeRows) {
  const MatrixStack s{1, 16, 2, 1};  // row r holds bytes 2r, 2r+1
  const Bytes out = shuffle_rows(iota_bytes(32), s, 64);
  EXPECT_EQ(Bytes(out.begin(), out.begin() + 6), (Bytes{0, 1, 4, 5, 8, 9}));
  EXPECT_EQ(Bytes(out.begin() + 16, out.begin() + 20), (Bytes{2, 3, 6, 7}));
}

TEST(RowShuffle, ShuffleThenUnshuffleIsIdentityOnOddSizes) {
  uint32_t seed = 11;
  for (int64_t tile : {64, 128})
    for (int64_t rows : {48, 96, 160})
      for (int64_t cols : {1, 7, 33, 130})
        for (int64_t elem : {1, 2, 4}) {
          if (rows % shuffle_block_size(tile) != 0) continue;  // 48 rows with B = 32
          const MatrixStack s{2, rows, cols, elem};
          const Bytes in = random_bytes(s.bytes(), seed++);
          const Bytes out = shuffle_rows(in, s, tile);
          EXPECT_NE(out, in);
          EXPECT_EQ(unshuffle_rows(out, s, tile), in) << to_string(s) << " tile " << tile;
        }
}

TEST(RowShuffle, RowsNotAMultipleOfTheBlockAreRefusedNamingBoth) {
  const MatrixStack s{1, 48, 4, 1};
  expect_error([&] { shuffle_rows(iota_bytes(192), s, 128); }, MOE_STATUS_UNSUPPORTED,
               {"epilogue_tile_m=128", "rows=48", "shuffle block 32"});
  expect_error([&] { shuffle_row_map(40, 64); }, MOE_STATUS_UNSUPPORTED,
               {"rows=40", "shuffle block 16"});
}

TEST(RowShuffle, NonPositiveEpilogueTileIsRefused) {
  expect_error([] { shuffle_block_size(0); }, MOE_STATUS_INVALID_ARGUMENT, {"epilogue_tile_m=0"});
}

}  // namespace
}  // namespace moe::trtllm
