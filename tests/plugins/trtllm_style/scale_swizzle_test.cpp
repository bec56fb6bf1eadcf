// The 128x4 swizzled scale layout: offsets worked out by hand, zero padding, round trips.
#include "scale_swizzle.hpp"

#include "layout_test_util.hpp"

namespace moe::trtllm {
namespace {

using testing::expect_error;
using testing::random_bytes;

TEST(ScaleSwizzle, OffsetsForFiveColumnsPaddedToEight) {
  // off = c%4 + (c/4)*512 + (r%32)*16 + ((r%128)/32)*4 + (r/128)*128*8
  EXPECT_EQ(swizzled_offset(0, 0, 5), 0);
  EXPECT_EQ(swizzled_offset(0, 3, 5), 3);
  EXPECT_EQ(swizzled_offset(0, 4, 5), 512);
  EXPECT_EQ(swizzled_offset(1, 0, 5), 16);
  EXPECT_EQ(swizzled_offset(31, 0, 5), 496);
  EXPECT_EQ(swizzled_offset(32, 0, 5), 4);
  EXPECT_EQ(swizzled_offset(33, 2, 5), 22);
  EXPECT_EQ(swizzled_offset(127, 3, 5), 511);
  EXPECT_EQ(swizzled_offset(128, 0, 5), 1024);
  EXPECT_EQ(swizzled_offset(130, 4, 5), 1568);
  EXPECT_EQ(swizzled_elems(130, 5), 256 * 8);
}

TEST(ScaleSwizzle, PlacesEachScaleAndZeroesThePadding) {
  const MatrixStack s{1, 2, 5, 1};  // (2, 5): scale (r, c) = 10 * r + c + 1
  Bytes in;
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 5; ++c) in.push_back(uint8_t(10 * r + c + 1));
  const Bytes out = swizzle_scales_128x4(in, s);
  ASSERT_EQ(out.size(), 128u * 8u);
  Bytes expected(128 * 8, 0);
  for (int c = 0; c < 4; ++c) {
    expected[c] = uint8_t(c + 1);        // row 0, first 4x4 column group
    expected[16 + c] = uint8_t(11 + c);  // row 1
  }
  expected[512] = 5;  // (0, 4): second column group
  expected[528] = 15;
  EXPECT_EQ(out, expected);
}

TEST(ScaleSwizzle, WideElementsMoveAsAWhole) {
  const MatrixStack s{1, 1, 5, 4};  // one row of five f32-sized elements
  const Bytes in = random_bytes(20, 3);
  const Bytes out = swizzle_scales_128x4(in, s);
  ASSERT_EQ(out.size(), 128u * 8u * 4u);
  EXPECT_EQ(Bytes(out.begin(), out.begin() + 16), Bytes(in.begin(), in.begin() + 16));
  EXPECT_EQ(Bytes(out.begin() + 512 * 4, out.begin() + 512 * 4 + 4),
            Bytes(in.begin() + 16, in.end()));
}

TEST(ScaleSwizzle, SwizzleThenUnswizzleIsIdentityOnOddSizes) {
  uint32_t seed = 21;
  for (int64_t rows : {1, 48, 96, 160, 256})
    for (int64_t cols : {1, 7, 33, 130})
      for (int64_t elem : {1, 2, 4}) {
        const MatrixStack s{2, rows, cols, elem};
        const Bytes in = random_bytes(s.bytes(), seed++);
        const Bytes out = swizzle_scales_128x4(in, s);
        ASSERT_EQ(int64_t(out.size()), 2 * swizzled_elems(rows, cols) * elem);
        EXPECT_EQ(unswizzle_scales_128x4(out, s), in) << to_string(s);
      }
}

TEST(ScaleSwizzle, UnswizzleOfTheWrongSizeIsRefusedNamingBothSizes) {
  const MatrixStack s{1, 2, 5, 1};
  expect_error([&] { unswizzle_scales_128x4(Bytes(10), s); }, MOE_STATUS_SHAPE_MISMATCH,
               {"128x4 scale unswizzle", "10 bytes", "needs 1024"});
}

// 2^62 one-byte scales in one row fit int64_t, but padded to 128 rows they do not: refused
// rather than wrapped into a size some buffer might match.
TEST(ScaleSwizzle, APaddedShapePastInt64IsRefusedNotWrapped) {
  const MatrixStack s{1, 1, int64_t(1) << 62, 1};
  expect_error([&] { unswizzle_scales_128x4(ByteSpan{}, s); }, MOE_STATUS_INVALID_ARGUMENT,
               {"128x4 scale unswizzle", "padded to 128x4 tiles"});
  expect_error(
      [&] {
        unswizzle_scales_128x4(ByteSpan{}, MatrixStack{1, -1, 4, 1});
      },
      MOE_STATUS_INVALID_ARGUMENT, {"negative extent"});
}

}  // namespace
}  // namespace moe::trtllm
