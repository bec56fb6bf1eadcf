// fp8_block weight scales as kernels read them (moe/sdk/block_scales.hpp): in either order,
// floored, and refused when corrupt.
#include "moe/sdk/block_scales.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "moe/sdk/error.hpp"

namespace moe::sdk {
namespace {

moe_tensor f32_tensor(std::vector<float>& v) {
  moe_tensor t{};
  t.data = v.data();
  t.dtype = MOE_DTYPE_F32;
  return t;
}

TEST(BlockScales, MnMajorTurnsEachMatrixToKBlocksByNBlocks) {
  // Two matrices of [n_blocks=2, k_blocks=3]: value = 100 m + 10 nb + kb + 1.
  std::vector<float> in;
  for (int m = 0; m < 2; ++m)
    for (int nb = 0; nb < 2; ++nb)
      for (int kb = 0; kb < 3; ++kb) in.push_back(float(100 * m + 10 * nb + kb + 1));
  const std::vector<float> out =
      checked_block_scales(f32_tensor(in), "w13_scale", 2, 2, 3, BlockScaleOrder::kMnMajor);
  ASSERT_EQ(out.size(), in.size());
  for (int m = 0; m < 2; ++m)
    for (int nb = 0; nb < 2; ++nb)
      for (int kb = 0; kb < 3; ++kb)
        EXPECT_EQ(out[size_t(m * 6 + kb * 2 + nb)], float(100 * m + 10 * nb + kb + 1));
}

TEST(BlockScales, KMajorKeepsTheCanonicalOrder) {
  std::vector<float> in = {1, 2, 3, 4, 5, 6};  // [n_blocks=2, k_blocks=3]
  EXPECT_EQ(checked_block_scales(f32_tensor(in), "w2_scale", 1, 2, 3, BlockScaleOrder::kKMajor),
            in);
  EXPECT_EQ(checked_block_scales(f32_tensor(in), "w2_scale", 1, 2, 3, BlockScaleOrder::kMnMajor),
            (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(BlockScales, TinyScalesAreRaisedToTheFloor) {
  std::vector<float> in = {1e-20f, 3.0f};
  const std::vector<float> out =
      checked_block_scales(f32_tensor(in), "w2_scale", 1, 1, 2, BlockScaleOrder::kKMajor);
  EXPECT_EQ(out[0], kBlockScaleFloor);
  EXPECT_EQ(out[1], 3.0f);
}

TEST(BlockScales, NonFiniteOrNonPositiveScalesAreRefusedByName) {
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    std::vector<float> in = {1.0f, 1.0f, 1.0f, bad};
    try {
      checked_block_scales(f32_tensor(in), "shared_w2_scale", 1, 2, 2, BlockScaleOrder::kKMajor);
      FAIL() << "accepted " << bad;
    } catch (const moe::Error& e) {
      EXPECT_EQ(e.status(), MOE_STATUS_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find("shared_w2_scale[0][1][1]"), std::string::npos)
          << e.what();
    }
  }
}

// Per-tensor scales (fp8_tensor's weight scales, the static activation scales) as given, and
// refused by name and index when corrupt.
TEST(TensorScales, AreKeptAsGivenAndRefusedByNameAndIndexWhenCorrupt) {
  std::vector<float> good = {0.5f, 1e-12f};
  EXPECT_EQ(checked_tensor_scales(f32_tensor(good), "w13_scale", 2), good);
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    std::vector<float> in = {1.0f, bad};
    try {
      checked_tensor_scales(f32_tensor(in), "a2_scale", 2);
      FAIL() << "accepted " << bad;
    } catch (const moe::Error& e) {
      EXPECT_EQ(e.status(), MOE_STATUS_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find("a2_scale[1] = "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("is not a finite positive scale"), std::string::npos)
          << e.what();
    }
  }
  moe_tensor missing{};
  missing.dtype = MOE_DTYPE_BF16;
  try {
    checked_tensor_scales(missing, "a13_scale", 1);
    FAIL() << "accepted a bf16 tensor";
  } catch (const moe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("a13_scale: f32 scales expected"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moe::sdk
