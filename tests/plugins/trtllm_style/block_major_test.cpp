// BlockMajorK: a tiny worked example, round trips, and K not a multiple of the block.
#include "block_major.hpp"

#include "layout_test_util.hpp"

namespace moe::trtllm {
namespace {

using testing::expect_error;
using testing::iota_bytes;
using testing::random_bytes;

TEST(BlockMajorK, TinyOneByTwoByFourWithBlockTwo) {
  // [1, 2, 4] rows [0 1 2 3] [4 5 6 7] -> [1, K/bk=2, M=2, bk=2]
  const MatrixStack s{1, 2, 4, 1};
  EXPECT_EQ(to_block_major_k(iota_bytes(8), s, 2), (Bytes{0, 1, 4, 5, 2, 3, 6, 7}));
  EXPECT_EQ(from_block_major_k(Bytes{0, 1, 4, 5, 2, 3, 6, 7}, s, 2), iota_bytes(8));
}

TEST(BlockMajorK, BlockCountsElementsNotBytes) {
  const MatrixStack s{1, 2, 2, 2};  // bf16-sized: rows [0 1 | 2 3] [4 5 | 6 7]
  EXPECT_EQ(to_block_major_k(iota_bytes(8), s, 1), (Bytes{0, 1, 4, 5, 2, 3, 6, 7}));
}

TEST(BlockMajorK, EachExpertIsPermutedOnItsOwn) {
  const MatrixStack s{2, 2, 2, 1};
  EXPECT_EQ(to_block_major_k(iota_bytes(8), s, 1), (Bytes{0, 2, 1, 3, 4, 6, 5, 7}));
}

TEST(BlockMajorK, ToThenFromIsIdentityOnOddSizes) {
  uint32_t seed = 31;
  for (int64_t rows : {1, 48, 96, 160})
    for (int64_t cols : {7, 33, 130})
      for (int64_t elem : {1, 2, 4})
        for (int64_t bk : {int64_t(1), cols}) {
          const MatrixStack s{3, rows, cols, elem};
          const Bytes in = random_bytes(s.bytes(), seed++);
          EXPECT_EQ(from_block_major_k(to_block_major_k(in, s, bk), s, bk), in);
        }
  const MatrixStack s{2, 48, 130, 2};
  const Bytes in = random_bytes(s.bytes(), 99);
  EXPECT_NE(to_block_major_k(in, s, 65), in);
  EXPECT_EQ(from_block_major_k(to_block_major_k(in, s, 65), s, 65), in);
}

TEST(BlockMajorK, KNotAMultipleOfTheBlockIsRefusedNamingBoth) {
  const MatrixStack s{1, 2, 7, 2};
  expect_error([&] { to_block_major_k(iota_bytes(28), s, 2); }, MOE_STATUS_UNSUPPORTED,
               {"K=7", "14 bytes per row", "block_k=2", "4 bytes"});
  expect_error([&] { from_block_major_k(iota_bytes(28), s, 0); }, MOE_STATUS_INVALID_ARGUMENT,
               {"block_k=0"});
}

// A shape whose byte count passes int64_t is refused: wrapped, it could match a small buffer and
// the copy would run past it (2^62 rows x 4 bytes is 2^64, which wraps to 0).
TEST(BlockMajorK, AShapePastInt64BytesIsRefusedNotWrapped) {
  const MatrixStack s{1, int64_t(1) << 62, 4, 1};
  expect_error([&] { to_block_major_k(ByteSpan{}, s, 4); }, MOE_STATUS_INVALID_ARGUMENT,
               {"BlockMajorK", "rows=4611686018427387904", "more than 9223372036854775807 bytes"});
}

}  // namespace
}  // namespace moe::trtllm
