// cutlass_mega's e4m3 activations on 4-bit weights keep each quantised value as bf16 and claim it
// exact (kernels/act_codes.cuh, docs/design.md §13 item 7): every e4m3 code's value times the
// powers of two mxfp8 can scale it by, and mxfp8 blocks of every magnitude (amax on a power-of-two
// boundary, values on e4m3 midpoints, zero blocks) against the reference's fake_quant_mxfp8, value
// for value. CPU only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "act_codes_host.hpp"
#include "moe/sdk/formats.hpp"

namespace moe::mega::test {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(MegaActCodes, EveryE4m3CodeTimesAnMxScaleIsExactInBf16) {
  for (int k : {-42, -20, -3, 0, 1, 7, 40})
    for (int code = 0; code < 256; ++code) {
      if ((code & 0x7f) == 0x7f) continue;  // NaN
      const double want = e4m3_to_double(uint8_t(code)) * std::ldexp(1.0, k);
      EXPECT_EQ(double(bf16_to_float(e4m3_value(uint8_t(code), k))), want)
          << "code " << code << ", k " << k;
    }
}

TEST(MegaActCodes, MxScaleExponentIsTheSmallestPowerOfTwoCoveringAmaxOver448) {
  for (int j : {-40, -8, -1, 0, 1, 9, 60}) {
    const float at = std::ldexp(448.0f, j);  // amax / 448 exactly 2^j
    EXPECT_EQ(mx_exponent(at), j);
    EXPECT_EQ(mx_exponent(std::nextafter(at, INFINITY)), j + 1);
    EXPECT_EQ(mx_exponent(std::nextafter(at, 0.0f)), j);
  }
  EXPECT_EQ(mx_exponent(0.0f), -42);  // the 1e-10 floor: 1e-10 / 448 is just under 2^-42
  EXPECT_EQ(mx_exponent(std::numeric_limits<float>::max()), 120);
  // Every magnitude a float has, against the reference's ue8m0 code of max(amax, 1e-10) / 448.
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200000; ++i) {
    const float amax = from_bits(uint32_t(rng()) & 0x7f7fffffu);  // finite, >= 0
    const int want = int(ue8m0_ceil(std::max(double(amax), 1e-10) / 448.0)) - 127;
    ASSERT_EQ(mx_exponent(amax), want) << "amax " << amax;
  }
  for (float amax : {1e-10f, std::nextafter(1e-10f, 0.0f), std::nextafter(1e-10f, 1.0f), 1e-30f})
    EXPECT_EQ(mx_exponent(amax), int(ue8m0_ceil(std::max(double(amax), 1e-10) / 448.0)) - 127)
        << amax;
}

// Blocks of 32 bf16 values, quantised by the kernel's helpers from their float amax, equal the
// reference's double fake quantisation exactly.
TEST(MegaActCodes, Mxfp8BlocksMatchTheReferenceValueForValue) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> magnitude(-30, 30), pick(0, 31);
  int blocks = 0, nonzero_codes = 0;
  for (int b = 0; b < 4000; ++b) {
    std::vector<float> v(32);
    const int kind = b % 8;  // 0: one magnitude a block; 4-7: a magnitude per value
    const int block_magnitude = magnitude(rng);
    for (float& x : v)
      x = bf16_to_float(
          float_to_bf16(std::ldexp(normal(rng), kind == 0 ? block_magnitude : magnitude(rng))));
    if (kind == 1) std::fill(v.begin(), v.end(), 0.0f);                        // zero block
    if (kind == 2) v[size_t(pick(rng))] = std::ldexp(448.0f, magnitude(rng));  // amax on 448 x 2^j
    if (kind == 3)  // values on e4m3 midpoints of the block's scale: 1.0625, 2.125, ... x 2^k
      for (size_t i = 0; i < v.size(); i += 2) v[i] = std::ldexp(1.0625f, int(i % 8) - 4);
    float amax = 0.0f;
    for (float x : v) amax = std::max(amax, std::fabs(x));
    const int k = mx_exponent(amax);
    std::vector<double> want(v.begin(), v.end());
    fake_quant_mxfp8(want.data(), int64_t(want.size()));
    for (size_t i = 0; i < v.size(); ++i) {
      const double got = bf16_to_float(mx_quantised(v[i], k));
      ASSERT_EQ(got, want[i]) << "block " << b << ", value " << i << " = " << v[i] << ", amax "
                              << amax << ", k " << k;
      nonzero_codes += kind == 0 && got != 0.0;
    }
    ++blocks;
  }
  EXPECT_EQ(blocks, 4000);
  EXPECT_GT(nonzero_codes, 500 * 32 * 9 / 10);  // blocks of one magnitude: few codes flush to 0
}

}  // namespace
}  // namespace moe::mega::test
