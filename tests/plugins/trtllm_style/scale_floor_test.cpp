// The 1e-10 floor on fp8 block scales (not invertible, so tested on its own).
#include "scale_floor.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include "layout_test_util.hpp"

namespace moe::trtllm {
namespace {

Bytes to_bytes(const std::vector<float>& v) {
  Bytes b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> to_floats(const Bytes& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

TEST(ScaleFloor, RaisesZeroNegativeAndTinyScalesTo1em10) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Bytes b = to_bytes({0.f, -1.f, 1e-12f, 1e-10f, 0.5f, nan, 3e-10f});
  EXPECT_EQ(raise_small_scales(b), 3);
  const std::vector<float> v = to_floats(b);
  EXPECT_EQ(v[0], 1e-10f);
  EXPECT_EQ(v[1], 1e-10f);
  EXPECT_EQ(v[2], 1e-10f);
  EXPECT_EQ(v[3], 1e-10f);
  EXPECT_EQ(v[4], 0.5f);
  EXPECT_TRUE(std::isnan(v[5]));
  EXPECT_EQ(v[6], 3e-10f);
}

TEST(ScaleFloor, PartialFloatIsRefused) {
  Bytes b(6);
  testing::expect_error([&] { raise_small_scales(b); }, MOE_STATUS_INVALID_ARGUMENT,
                        {"6 bytes", "f32"});
}

}  // namespace
}  // namespace moe::trtllm
