// w31 half swap, gated row interleave and the gather/scatter they are built on.
#include "row_ops.hpp"

#include "layout_test_util.hpp"

namespace moe::trtllm {
namespace {

using testing::expect_error;
using testing::iota_bytes;
using testing::random_bytes;

TEST(RowOps, W31SwapPutsUpHalfBeforeGateHalf) {
  const MatrixStack s{1, 4, 2, 1};  // (4, 2): gate rows [0 1] [2 3], up rows [4 5] [6 7]
  EXPECT_EQ(swap_halves(iota_bytes(8), s), (Bytes{4, 5, 6, 7, 0, 1, 2, 3}));
}

TEST(RowOps, GatedInterleaveOfFourByTwoAlternatesGateAndUpRows) {
  const MatrixStack s{1, 4, 2, 1};  // out[2i] = w[i], out[2i+1] = w[I+i], I = 2
  EXPECT_EQ(interleave_gated_rows(iota_bytes(8), s), (Bytes{0, 1, 4, 5, 2, 3, 6, 7}));
  EXPECT_EQ(deinterleave_gated_rows(Bytes{0, 1, 4, 5, 2, 3, 6, 7}, s), iota_bytes(8));
}

TEST(RowOps, InterleaveAppliesToEveryMatrixOfTheStack) {
  const MatrixStack s{2, 2, 1, 2};  // two (2, 1) matrices of 2-byte elements
  EXPECT_EQ(interleave_gated_rows(iota_bytes(8), s), iota_bytes(8));  // I = 1: already paired
  EXPECT_EQ(swap_halves(iota_bytes(8), s), (Bytes{2, 3, 0, 1, 6, 7, 4, 5}));
}

TEST(RowOps, SwapAndInterleaveRoundTripOnOddSizes) {
  uint32_t seed = 1;
  for (int64_t rows : {2, 48, 96, 160})
    for (int64_t cols : {1, 7, 33, 130})
      for (int64_t elem : {1, 2, 4}) {
        const MatrixStack s{3, rows, cols, elem};
        const Bytes in = random_bytes(s.bytes(), seed++);
        EXPECT_EQ(swap_halves(swap_halves(in, s), s), in);
        EXPECT_EQ(deinterleave_gated_rows(interleave_gated_rows(in, s), s), in);
        if (rows > 2) {
          EXPECT_NE(interleave_gated_rows(in, s), in);
        }
      }
}

TEST(RowOps, ScatterInvertsGatherForAnyPermutation) {
  const MatrixStack s{2, 9, 5, 2};
  const RowMap map{3, 0, 8, 1, 7, 2, 6, 4, 5};
  const Bytes in = random_bytes(s.bytes(), 7);
  const Bytes g = gather_rows(in, s, map);
  EXPECT_EQ(std::memcmp(g.data() + row_offset(s, 1, 2), in.data() + row_offset(s, 1, 8), 10), 0);
  EXPECT_EQ(scatter_rows(g, s, map), in);
}

TEST(RowOps, OddRowCountIsRefusedNamingTheRows) {
  const MatrixStack s{1, 7, 2, 1};
  expect_error([&] { swap_halves(iota_bytes(14), s); }, MOE_STATUS_INVALID_ARGUMENT,
               {"w31 swap", "even row count", "rows=7"});
  expect_error([&] { interleave_gated_rows(iota_bytes(14), s); }, MOE_STATUS_INVALID_ARGUMENT,
               {"gated interleave", "rows=7"});
  expect_error([&] { deinterleave_gated_rows(iota_bytes(14), s); }, MOE_STATUS_INVALID_ARGUMENT,
               {"gated de-interleave", "rows=7"});
}

TEST(RowOps, RowMapThatIsNotAPermutationIsRefused) {
  const MatrixStack s{1, 3, 1, 1};
  expect_error(
      [&] {
        gather_rows(iota_bytes(3), s, {0, 0, 2});
      },
      MOE_STATUS_INVALID_ARGUMENT, {"not a permutation of [0, 3)", "entry 0"});
  expect_error(
      [&] {
        gather_rows(iota_bytes(3), s, {0, 1});
      },
      MOE_STATUS_INVALID_ARGUMENT, {"2 entries", "rows=3"});
}

TEST(RowOps, BufferOfTheWrongSizeIsRefusedNamingBothSizes) {
  const MatrixStack s{1, 4, 3, 2};
  expect_error([&] { swap_halves(iota_bytes(23), s); }, MOE_STATUS_SHAPE_MISMATCH,
               {"23 bytes", "needs 24"});
}

}  // namespace
}  // namespace moe::trtllm
