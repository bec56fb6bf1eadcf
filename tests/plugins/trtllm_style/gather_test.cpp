// The one-pass gather on small worked examples: map composition, zero rows and zero columns,
// BlockMajorK slabs that straddle the end of the source row, swizzled scales, the checks, and
// the byte counter that prepare's copy test relies on.
#include "gather.hpp"

#include "block_major.hpp"
#include "layout_test_util.hpp"
#include "scale_swizzle.hpp"

namespace moe::trtllm {
namespace {

using testing::expect_error;
using testing::iota_bytes;
using testing::random_bytes;

TEST(Gather, ComposeAppliesTheFirstMapThenTheSecondAndKeepsZeroRows) {
  const RowMap pad{0, 1, kZeroRow, 2};  // 3 rows -> 4, a zero row third
  const RowMap swap{2, 3, 0, 1};
  EXPECT_EQ(compose(pad, swap), (RowMap{kZeroRow, 2, 0, 1}));
  EXPECT_EQ(compose(compose(pad, swap), RowMap{1, 0, 3, 2}), (RowMap{2, kZeroRow, 1, 0}));
  expect_error([&] { compose(pad, RowMap{4}); }, MOE_STATUS_INVALID_ARGUMENT,
               {"row 4 outside [0, 4)"});
}

// (1, 2, 3) bytes -> (1, 3, 4): row 0 <- src 1, row 1 zero, row 2 <- src 0; column 3 zero.
TEST(Gather, ZeroRowsAndTheColumnTailAreWrittenAsZeros) {
  poison_new_bytes(true);
  const GatherPlan p{{1, 2, 3, 1}, {1, 3, 4, 1}, {1, kZeroRow, 0}};
  const Bytes out = gather(p, iota_bytes(6));
  poison_new_bytes(false);
  EXPECT_EQ(out, (Bytes{3, 4, 5, 0, 0, 0, 0, 0, 0, 1, 2, 0}));
}

// Padding along K before BlockMajorK: the slab that holds the end of the source row is part
// source, part zeros, and later slabs are zeros, as to_block_major_k of the padded matrix gives.
TEST(Gather, BlockMajorSlabsStraddlingTheSourceEndMatchPadThenBlockMajor) {
  const MatrixStack src{2, 5, 5, 2}, dst{2, 5, 8, 2};
  const Bytes in = random_bytes(src.bytes(), 3);
  const RowMap rows{4, 3, kZeroRow, 0, 1};
  // The definition: gather rows (zero row inserted) and pad columns, then BlockMajorK.
  Bytes padded(size_t(dst.bytes()), 0);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t d = 0; d < 5; ++d)
      if (rows[d] != kZeroRow)
        std::memcpy(padded.data() + row_offset(dst, b, d), in.data() + row_offset(src, b, rows[d]),
                    size_t(src.row_bytes()));
  poison_new_bytes(true);
  const Bytes out = gather({src, dst, rows, 2}, in);  // slabs of 2 elements
  poison_new_bytes(false);
  EXPECT_EQ(out, to_block_major_k(padded, dst, 2));
}

TEST(Gather, SwizzledScalesMatchTheSwizzleOfTheGatheredMatrix) {
  const MatrixStack src{3, 130, 5, 1}, dst{3, 132, 6, 1};  // 2 tiles of rows, cols 6 -> 8
  const Bytes in = random_bytes(src.bytes(), 4);
  RowMap rows(132);
  for (int64_t d = 0; d < 132; ++d) rows[d] = d < 130 ? 129 - d : kZeroRow;
  Bytes gathered(size_t(dst.bytes()), 0);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t d = 0; d < 130; ++d)
      std::memcpy(gathered.data() + row_offset(dst, b, d), in.data() + row_offset(src, b, rows[d]),
                  5);
  poison_new_bytes(true);
  GatherPlan p{src, dst, rows};
  p.swizzle = true;
  const Bytes out = gather(p, in);
  poison_new_bytes(false);
  EXPECT_EQ(stored_bytes(p), 3 * 256 * 8);
  EXPECT_EQ(out, swizzle_scales_128x4(gathered, dst));
}

TEST(Gather, RefusesPlansThatDoNotFitTheirInput) {
  const Bytes in(12, 0);
  expect_error(
      [&] {
        gather({{1, 3, 4, 1}, {1, 3, 4, 1}, {0, 1}}, in);
      },
      MOE_STATUS_INVALID_ARGUMENT, {"row map has 2 entries", "rows=3"});
  expect_error(
      [&] {
        gather({{1, 3, 4, 1}, {1, 3, 4, 1}, {0, 1, 3}}, in);
      },
      MOE_STATUS_INVALID_ARGUMENT, {"entry 3 is outside [0, 3)"});
  expect_error(
      [&] {
        gather({{1, 3, 4, 1}, {2, 3, 4, 1}, {0, 1, 2}}, in);
      },
      MOE_STATUS_INVALID_ARGUMENT, {"cannot be written from"});
  expect_error(
      [&] {
        gather({{1, 3, 4, 1}, {1, 3, 4, 1}, {0, 1, 2}, 3}, in);
      },
      MOE_STATUS_INVALID_ARGUMENT, {"cols=4 is not a multiple of block_k=3"});
  expect_error(
      [&] {
        gather({{1, 3, 5, 1}, {1, 3, 5, 1}, {0, 1, 2}}, in);
      },
      MOE_STATUS_SHAPE_MISMATCH, {"buffer holds 12 bytes"});
}

// Large enough for several tasks per matrix (4 MiB of rows each): the result does not depend on
// how rows are split over the threads.
TEST(Gather, ManyTasksWriteTheSameBytesAsTheDefinition) {
  const MatrixStack s{2, 1024, 4104, 2};  // 8 MiB per matrix
  const Bytes in = random_bytes(s.bytes(), 5);
  RowMap rows(1024);
  for (int64_t d = 0; d < 1024; ++d) rows[d] = (d * 7) % 1024;
  EXPECT_EQ(gather({s, s, rows}, in), gather_rows(in, s, rows));
}

TEST(ByteCounts, CountLiveBytesTheirPeakAndEveryAllocation) {
  const ByteCounts before = byte_counts();
  reset_byte_peak();
  {
    Bytes a(1000), b(3000);
    const ByteCounts during = byte_counts();
    EXPECT_EQ(during.live - before.live, 4000);
    EXPECT_EQ(during.allocated - before.allocated, 4000);
  }
  Bytes c(2000);
  const ByteCounts after = byte_counts();
  EXPECT_EQ(after.live - before.live, 2000);
  EXPECT_EQ(after.peak - before.live, 4000);
  EXPECT_EQ(after.allocated - before.allocated, 6000);
}

}  // namespace
}  // namespace moe::trtllm
