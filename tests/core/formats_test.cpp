// Proves the codecs of moe/formats.hpp exact: every code against an independent decoder, every
// rounding midpoint, saturation, and the quantisation rules on shapes that are not block
// multiples.
#include "moe/sdk/formats.hpp"
#include "moe/sdk/format_table.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "moe/sdk/error.hpp"

namespace moe {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// Decodes float8_e4m3fn from its bit fields, independently of the library.
double e4m3_reference(int code) {
  const int sign = code >> 7, exponent = (code >> 3) & 0xF, mantissa = code & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return kNan;
  const double magnitude = exponent == 0 ? std::ldexp(double(mantissa), -9)
                                         : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}

void expect_error(const std::function<void()>& fn, moe_status status, const std::string& text) {
  try {
    fn();
    ADD_FAILURE() << "expected moe::Error containing '" << text << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

bool same_double(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

// ---- e4m3 -----------------------------------------------------------------------------------

TEST(E4m3, EveryCodeDecodesToItsBitFieldValue) {
  for (int c = 0; c < 256; ++c) {
    const double expected = e4m3_reference(c);
    const double got = e4m3_to_double(uint8_t(c));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << c;
    } else {
      EXPECT_TRUE(same_double(got, expected)) << c << ": " << got << " vs " << expected;
    }
  }
  EXPECT_TRUE(std::isnan(e4m3_to_double(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_double(0xFF)));
  EXPECT_EQ(e4m3_to_double(0x7E), 448.0);
  EXPECT_EQ(e4m3_to_double(0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(e4m3_to_double(0x08), std::ldexp(1.0, -6));
  EXPECT_EQ(e4m3_to_double(0x38), 1.0);
}

TEST(E4m3, EveryNonNanCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if (c == 0x7F || c == 0xFF) continue;
    EXPECT_EQ(e4m3_from_double(e4m3_to_double(uint8_t(c))), c) << c;
  }
  EXPECT_EQ(e4m3_from_double(0.0), 0x00);
  EXPECT_EQ(e4m3_from_double(-0.0), 0x80);
}

TEST(E4m3, MidpointsRoundToEvenAndNeighboursToNearest) {
  for (int c = 0; c < 0x7E; ++c) {
    const double lo = e4m3_reference(c), hi = e4m3_reference(c + 1);
    const double mid = (lo + hi) / 2;  // exact in double
    const int even = (c % 2 == 0) ? c : c + 1;
    for (int sign : {0x00, 0x80}) {
      const double s = sign ? -1.0 : 1.0;
      EXPECT_EQ(e4m3_from_double(s * mid), sign | even) << "mid of " << c;
      EXPECT_EQ(e4m3_from_double(s * std::nextafter(mid, 0.0)), sign | c) << "below mid " << c;
      EXPECT_EQ(e4m3_from_double(s * std::nextafter(mid, kInf)), sign | (c + 1))
          << "above mid " << c;
    }
  }
}

TEST(E4m3, RoundsTheExactDoubleNotItsFloat) {
  // 1 + 2^-4 is the midpoint of 1 and 1.125; the extra 2^-40 is lost in float, not in double.
  const double x = 1.0 + std::ldexp(1.0, -4) + std::ldexp(1.0, -40);
  EXPECT_EQ(e4m3_from_double(x), e4m3_from_double(1.125));
  EXPECT_EQ(e4m3_from_double(double(float(x))), e4m3_from_double(1.0));
}

TEST(E4m3, SaturatesAbove448IncludingInfinity) {
  for (double x : {448.0, std::nextafter(448.0, kInf), 464.0, 479.0, 480.0, 1e6, 1e300, kInf}) {
    EXPECT_EQ(e4m3_from_double(x), 0x7E) << x;
    EXPECT_EQ(e4m3_from_double(-x), 0xFE) << x;
  }
}

TEST(E4m3, NanEncodesAs0x7f) {
  EXPECT_EQ(e4m3_from_double(kNan), 0x7F);
  EXPECT_EQ(e4m3_from_double(-kNan), 0x7F);
}

TEST(E4m3, SubnormalsAndUnderflowToSignedZero) {
  const double smallest = std::ldexp(1.0, -9);
  EXPECT_EQ(e4m3_from_double(smallest), 0x01);
  EXPECT_EQ(e4m3_from_double(smallest / 2), 0x00);  // exactly half: ties to even zero
  EXPECT_EQ(e4m3_from_double(-smallest / 2), 0x80);
  EXPECT_EQ(e4m3_from_double(std::nextafter(smallest / 2, 1.0)), 0x01);
  EXPECT_EQ(e4m3_from_double(1e-300), 0x00);
  EXPECT_EQ(e4m3_from_double(-1e-300), 0x80);
  EXPECT_EQ(e4m3_from_double(std::numeric_limits<double>::denorm_min()), 0x00);
  EXPECT_EQ(e4m3_from_double(7 * smallest), 0x07);    // largest subnormal
  EXPECT_EQ(e4m3_from_double(7.5 * smallest), 0x08);  // ties to even: the smallest normal
}

// ---- e2m1 -----------------------------------------------------------------------------------

TEST(E2m1, EveryNibbleDecodesAndRoundTrips) {
  const double magnitudes[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int n = 0; n < 16; ++n) {
    const double expected = (n & 8) ? -magnitudes[n & 7] : magnitudes[n & 7];
    EXPECT_TRUE(same_double(e2m1_to_double(uint8_t(n)), expected)) << n;
    EXPECT_EQ(e2m1_from_double(expected), n) << n;
  }
  EXPECT_EQ(e2m1_to_double(0xF3), 1.5);  // only the low nibble is read
}

TEST(E2m1, MidpointsRoundToEvenAndNeighboursToNearest) {
  const std::pair<double, double> listed[] = {{0.25, 0.0}, {0.75, 1.0}, {1.25, 1.0}, {1.75, 2.0},
                                              {2.5, 2.0},  {3.5, 4.0},  {5.0, 4.0}};
  for (auto [x, expected] : listed) {
    EXPECT_EQ(e2m1_to_double(e2m1_from_double(x)), expected) << x;
    EXPECT_EQ(e2m1_to_double(e2m1_from_double(-x)), -expected) << x;
  }
  for (int c = 0; c < 7; ++c) {
    const double mid = (e2m1_to_double(uint8_t(c)) + e2m1_to_double(uint8_t(c + 1))) / 2;
    const int even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(e2m1_from_double(mid), even) << "mid of " << c;
    EXPECT_EQ(e2m1_from_double(-mid), 0x8 | even) << "mid of " << c;
    EXPECT_EQ(e2m1_from_double(std::nextafter(mid, 0.0)), c) << "below mid " << c;
    EXPECT_EQ(e2m1_from_double(std::nextafter(mid, kInf)), c + 1) << "above mid " << c;
  }
  EXPECT_EQ(e2m1_from_double(-0.0), 0x8);
  EXPECT_EQ(e2m1_from_double(-0.1), 0x8);
}

TEST(E2m1, SaturatesToSix) {
  for (double x : {6.0, std::nextafter(6.0, kInf), 7.0, 8.0, 1e300, kInf}) {
    EXPECT_EQ(e2m1_from_double(x), 0x7) << x;
    EXPECT_EQ(e2m1_from_double(-x), 0xF) << x;
  }
}

TEST(E2m1, NanThrowsInvalidArgument) {
  expect_error([] { e2m1_from_double(kNan); }, MOE_STATUS_INVALID_ARGUMENT, "NaN");
}

TEST(Fp4Packing, EvenIndexIsTheLowNibble) {
  uint8_t packed[2] = {0, 0};
  fp4_set(packed, 0, 0x3);
  fp4_set(packed, 1, 0xC);
  fp4_set(packed, 2, 0x7);
  EXPECT_EQ(packed[0], 0xC3);
  EXPECT_EQ(packed[1], 0x07);
  EXPECT_EQ(fp4_get(packed, 0), 0x3);
  EXPECT_EQ(fp4_get(packed, 1), 0xC);
  EXPECT_EQ(fp4_get(packed, 2), 0x7);
}

// ---- bf16 -----------------------------------------------------------------------------------

TEST(Bf16, EveryNonNanCodeRoundTrips) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const float f = bf16_to_float(uint16_t(c));
    EXPECT_EQ(std::bit_cast<uint32_t>(f), c << 16);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16(f), c) << std::hex << c;
  }
  EXPECT_EQ(bf16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xC000), -2.0f);
  EXPECT_EQ(bf16_to_float(0x7F80), std::numeric_limits<float>::infinity());
}

TEST(Bf16, MidpointsRoundToEven) {
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3F80);             // tie -> 1.0 (even)
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);         // tie -> 1 + 2^-6 (even)
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);  // above tie -> 1 + 2^-7
  // Every positive finite code and its successor: the midpoint goes to the even one.
  for (uint32_t c = 0; c < 0x7F80; ++c) {
    const float mid = std::bit_cast<float>((c << 16) | 0x8000);
    const uint32_t even = (c % 2 == 0) ? c : c + 1;
    ASSERT_EQ(float_to_bf16(mid), even) << std::hex << c;
    ASSERT_EQ(float_to_bf16(std::nextafter(mid, 0.0f)), c) << std::hex << c;
    ASSERT_EQ(float_to_bf16(std::nextafter(mid, INFINITY)), c + 1) << std::hex << c;
    ASSERT_EQ(float_to_bf16(-mid), 0x8000 | even) << std::hex << c;
  }
}

TEST(Bf16, NanStaysQuietNanAndInfStaysInf) {
  for (uint32_t bits : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu}) {
    const uint16_t b = float_to_bf16(std::bit_cast<float>(bits));
    EXPECT_TRUE(std::isnan(bf16_to_float(b))) << std::hex << bits;
    EXPECT_NE(b & 0x40, 0) << std::hex << bits;
  }
  EXPECT_EQ(float_to_bf16(INFINITY), 0x7F80);
  EXPECT_EQ(float_to_bf16(-INFINITY), 0xFF80);
}

// ---- ue8m0 ----------------------------------------------------------------------------------

// The bf16 nearest to x by brute force over the two neighbours (ties to the even code).
uint16_t nearest_bf16(double x) {
  const uint16_t lo = float_to_bf16(static_cast<float>(x));
  uint16_t best = lo;
  for (int d = -2; d <= 2; ++d) {
    const uint16_t c = uint16_t(lo + d);
    const double dc = std::abs(double(bf16_to_float(c)) - x);
    const double db = std::abs(double(bf16_to_float(best)) - x);
    if (dc < db || (dc == db && (c & 1) == 0 && (best & 1) == 1)) best = c;
  }
  return best;
}

TEST(Bf16, FromDoubleRoundsOnceNotThroughFloat) {
  // 1 + 2^-8 (a bf16 midpoint) + 2^-40: float rounds it to the midpoint, whose RNE step then
  // goes down to 1.0; the double itself lies above the midpoint, so the answer is 1 + 2^-7.
  const double above_midpoint = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  EXPECT_EQ(float_to_bf16(static_cast<float>(above_midpoint)), 0x3F80);
  EXPECT_EQ(double_to_bf16(above_midpoint), 0x3F81);
  EXPECT_EQ(double_to_bf16(-above_midpoint), 0xBF81);
  EXPECT_EQ(double_to_bf16(1.0 + std::ldexp(1.0, -8)), 0x3F80);   // exact midpoint: even
  EXPECT_EQ(double_to_bf16(std::ldexp(0x1.ff2p0, 127)), 0x7F80);  // past the last midpoint: inf
  EXPECT_EQ(double_to_bf16(std::ldexp(0x1.fe8p0, 127)), 0x7F7F);
  uint64_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const uint16_t code = uint16_t(state >> 48) & 0x7F7F;
    if ((code & 0x7F80) == 0x7F00) continue;  // top binade: may round to inf, checked below
    const double offset = (double((state >> 20) & 0xFFFFF) / double(1 << 20) - 0.5) *
                          std::ldexp(1.0, -7);  // within about one bf16 ulp, relative
    const double x = double(bf16_to_float(code)) * (1.0 + offset);
    ASSERT_EQ(double_to_bf16(x), nearest_bf16(x)) << std::hexfloat << x;
  }
}

TEST(Ue8m0, EveryCodeIsAPowerOfTwoAndRoundTrips) {
  for (int c = 0; c < 255; ++c) {
    EXPECT_EQ(ue8m0_to_double(uint8_t(c)), std::ldexp(1.0, c - 127)) << c;
    EXPECT_EQ(ue8m0_from_pow2(std::ldexp(1.0, c - 127)), c) << c;
  }
  EXPECT_TRUE(std::isnan(ue8m0_to_double(0xFF)));
  EXPECT_EQ(ue8m0_from_pow2(std::ldexp(1.0, 127)), 254);
}

TEST(Ue8m0, FromPow2RejectsNonPowersAndOutOfRange) {
  for (double x : {3.0, 1.5, 0.0, -2.0, kInf, kNan, std::ldexp(1.0, -128), std::ldexp(1.0, 128)})
    expect_error([x] { ue8m0_from_pow2(x); }, MOE_STATUS_INVALID_ARGUMENT,
                 "is not an exact power of two");
}

TEST(Ue8m0, CeilIsTheSmallestPowerOfTwoNotBelow) {
  EXPECT_EQ(ue8m0_ceil(1.0), 127);
  EXPECT_EQ(ue8m0_ceil(std::nextafter(1.0, 2.0)), 128);
  EXPECT_EQ(ue8m0_ceil(0.75), 127);
  EXPECT_EQ(ue8m0_ceil(0.5), 126);
  EXPECT_EQ(ue8m0_ceil(std::nextafter(0.5, 0.0)), 126);
  EXPECT_EQ(ue8m0_ceil(3.0), 129);
  EXPECT_EQ(ue8m0_ceil(std::ldexp(1.0, -127)), 0);
  EXPECT_EQ(ue8m0_ceil(1e-300), 0);   // clamped
  EXPECT_EQ(ue8m0_ceil(1e300), 254);  // clamped
  for (double x : {0.0, -1.0, kInf, kNan})
    expect_error([x] { ue8m0_ceil(x); }, MOE_STATUS_INVALID_ARGUMENT, "positive finite");
}

// ---- dtypes ---------------------------------------------------------------------------------

TEST(Dtype, SizesAndNames) {
  const struct {
    moe_dtype dtype;
    size_t size;
    const char* name;
  } cases[] = {
      {MOE_DTYPE_BF16, 2, "bf16"},   {MOE_DTYPE_F16, 2, "f16"},   {MOE_DTYPE_F32, 4, "f32"},
      {MOE_DTYPE_F64, 8, "f64"},     {MOE_DTYPE_E4M3, 1, "e4m3"}, {MOE_DTYPE_E2M1X2, 1, "e2m1x2"},
      {MOE_DTYPE_UE8M0, 1, "ue8m0"}, {MOE_DTYPE_I32, 4, "i32"},   {MOE_DTYPE_I64, 8, "i64"},
      {MOE_DTYPE_U8, 1, "u8"},       {MOE_DTYPE_I8, 1, "i8"},     {MOE_DTYPE_INVALID, 0, "invalid"},
      {moe_dtype(12), 0, "invalid"}};
  for (const auto& c : cases) {
    EXPECT_EQ(dtype_size(c.dtype), c.size) << c.name;
    EXPECT_STREQ(dtype_name(c.dtype), c.name);
  }
}

// ---- weight quantisation --------------------------------------------------------------------

// Random weights whose magnitude varies by row (x1/16 .. x16), so blocks get different scales.
std::vector<float> random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float row_scale = std::ldexp(1.0f, int(r % 9) - 4);
    for (int64_t c = 0; c < cols; ++c) w[size_t(r * cols + c)] = normal(rng) * row_scale;
  }
  return w;
}

double amax_of(const float* w, int64_t n) {
  double amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(double(w[i])));
  return amax;
}

// Rounding error of one element with `mant_bits` mantissa bits and subnormal quantum
// `min_quantum`, given the element's scale.
void expect_within_rounding(double w, double got, double scale, int mant_bits, double min_quantum,
                            int64_t index) {
  const double bound =
      std::max(std::ldexp(std::fabs(w), -(mant_bits + 1)), min_quantum / 2 * scale);
  EXPECT_LE(std::fabs(got - w), bound * (1 + 1e-12))
      << "element " << index << ": " << w << " -> " << got;
}

TEST(QuantizeFp8Tensor, ScaleIsAmaxOver448AndDequantisesWithinHalfUlp) {
  const int64_t rows = 37, cols = 53;
  const auto w = random_matrix(rows, cols, 1);
  std::vector<uint8_t> q(size_t(rows * cols));
  const float scale = quantize_fp8_tensor(w.data(), rows, cols, q.data());
  EXPECT_EQ(scale, float(amax_of(w.data(), rows * cols) / 448.0));
  std::vector<double> out(w.size());
  dequantize_matrix(MOE_FORMAT_FP8_TENSOR, q.data(), &scale, 0.0f, rows, cols, out.data());
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(q[i], e4m3_from_double(double(w[i]) / double(scale)));
    expect_within_rounding(w[i], out[i], scale, 3, 0x1p-9, int64_t(i));
  }
}

TEST(QuantizeFp8Block, PartialEdgeBlocksGetTheirOwnScale) {
  const int64_t rows = 130, cols = 200;
  auto w = random_matrix(rows, cols, 2);
  w[size_t(129 * cols + 199)] = 1000.0f;  // only in the bottom-right partial block
  std::vector<uint8_t> q(w.size());
  std::vector<float> scales(size_t(ceil_div(rows, 128) * ceil_div(cols, 128)));
  ASSERT_EQ(scales.size(), 4u);
  quantize_fp8_block(w.data(), rows, cols, q.data(), scales.data());
  for (int64_t bi = 0; bi < 2; ++bi)
    for (int64_t bj = 0; bj < 2; ++bj) {
      double amax = 0;
      for (int64_t r = bi * 128; r < std::min(rows, bi * 128 + 128); ++r)
        for (int64_t c = bj * 128; c < std::min(cols, bj * 128 + 128); ++c)
          amax = std::max(amax, std::fabs(double(w[size_t(r * cols + c)])));
      EXPECT_EQ(scales[size_t(bi * 2 + bj)], float(amax / 448.0)) << bi << "," << bj;
    }
  EXPECT_EQ(scales[3], float(1000.0 / 448.0));
  std::vector<double> out(w.size());
  dequantize_matrix(MOE_FORMAT_FP8_BLOCK, q.data(), scales.data(), 0.0f, rows, cols, out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = size_t(r * cols + c);
      expect_within_rounding(w[i], out[i], scales[size_t((r / 128) * 2 + c / 128)], 3, 0x1p-9,
                             int64_t(i));
    }
  EXPECT_EQ(out.back(), 448.0 * double(scales[3]));  // the block's amax maps to 448
}

TEST(QuantizeMxfp8, ScaleIsTheSmallestPow2ThatAvoidsSaturation) {
  const int64_t rows = 9, cols = 70, blocks = 3;
  const auto w = random_matrix(rows, cols, 3);
  std::vector<uint8_t> q(w.size()), scales(size_t(rows * blocks));
  quantize_mxfp8(w.data(), rows, cols, q.data(), scales.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * 32, width = std::min<int64_t>(32, cols - c0);
      const double target = amax_of(&w[size_t(r * cols + c0)], width) / 448.0;
      const double scale = ue8m0_to_double(scales[size_t(r * blocks + b)]);
      EXPECT_GE(scale, target) << r << "," << b;
      EXPECT_LT(scale / 2, target) << r << "," << b;
    }
  std::vector<double> out(w.size());
  dequantize_matrix(MOE_FORMAT_MXFP8, q.data(), scales.data(), 0.0f, rows, cols, out.data());
  for (int64_t i = 0; i < rows * cols; ++i) {
    const double scale = ue8m0_to_double(scales[size_t((i / cols) * blocks + (i % cols) / 32)]);
    expect_within_rounding(w[size_t(i)], out[size_t(i)], scale, 3, 0x1p-9, i);
  }
}

TEST(QuantizeMxfp4, PacksLowNibbleFirstAndDequantisesWithinHalfUlp) {
  const int64_t rows = 9, cols = 70, blocks = 3;
  const auto w = random_matrix(rows, cols, 4);
  std::vector<uint8_t> q(size_t(rows * cols / 2)), scales(size_t(rows * blocks));
  quantize_mxfp4(w.data(), rows, cols, q.data(), scales.data());
  std::vector<double> out(w.size());
  dequantize_matrix(MOE_FORMAT_MXFP4, q.data(), scales.data(), 0.0f, rows, cols, out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = size_t(r * cols + c);
      const uint8_t code = scales[size_t(r * blocks + c / 32)];
      const int64_t c0 = (c / 32) * 32, width = std::min<int64_t>(32, cols - c0);
      EXPECT_EQ(code, ue8m0_ceil(amax_of(&w[size_t(r * cols + c0)], width) / 6.0));
      const double scale = ue8m0_to_double(code);
      const uint8_t byte = q[size_t(r * cols / 2 + c / 2)];
      EXPECT_EQ((c % 2 == 0) ? (byte & 0xF) : (byte >> 4), e2m1_from_double(w[i] / scale));
      expect_within_rounding(w[i], out[i], scale, 1, 0.5, int64_t(i));
    }
}

TEST(QuantizeNvfp4, GlobalAndBlockScalesFollowTheRule) {
  const int64_t rows = 9, cols = 70, blocks = 5;
  const auto w = random_matrix(rows, cols, 5);
  const float scale_2 = nvfp4_scale_2(w.data(), rows * cols);
  EXPECT_EQ(scale_2, float(amax_of(w.data(), rows * cols) / (448.0 * 6.0)));
  std::vector<uint8_t> q(size_t(rows * cols / 2)), scales(size_t(rows * blocks));
  quantize_nvfp4(w.data(), rows, cols, scale_2, q.data(), scales.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * 16, width = std::min<int64_t>(16, cols - c0);
      const double target = amax_of(&w[size_t(r * cols + c0)], width) / 6.0 / scale_2;
      const uint8_t code = scales[size_t(r * blocks + b)];
      EXPECT_EQ(code, e4m3_from_double(target));
      EXPECT_LE(std::fabs(e4m3_to_double(code) - target), target * 0x1p-4);
    }
  std::vector<double> out(w.size());
  dequantize_matrix(MOE_FORMAT_NVFP4, q.data(), scales.data(), scale_2, rows, cols, out.data());
  for (int64_t i = 0; i < rows * cols; ++i) {
    const double block_scale =
        e4m3_to_double(scales[size_t((i / cols) * blocks + (i % cols) / 16)]);
    const double scale = block_scale * scale_2;
    const double w_i = w[size_t(i)];
    // The block scale itself is rounded (2^-4), so an element may saturate slightly past 6.
    const double bound = std::max(0x1p-2 * std::fabs(w_i), 0.25 * scale) + 0x1p-4 * std::fabs(w_i);
    EXPECT_LE(std::fabs(out[size_t(i)] - w_i), bound) << i;
  }
}

TEST(Quantize, ZeroMatrixGetsFiniteScalesAndZeroOutput) {
  const int64_t rows = 3, cols = 34;
  const std::vector<float> w(size_t(rows * cols), 0.0f);
  std::vector<double> out(w.size(), 1.0);
  std::vector<uint8_t> q(w.size(), 0xAA), codes(size_t(rows * 3), 0xAA);

  const float tensor_scale = quantize_fp8_tensor(w.data(), rows, cols, q.data());
  EXPECT_TRUE(std::isfinite(tensor_scale) && tensor_scale > 0);
  dequantize_matrix(MOE_FORMAT_FP8_TENSOR, q.data(), &tensor_scale, 0, rows, cols, out.data());
  for (double v : out) EXPECT_EQ(v, 0.0);

  float block_scale = 0;
  quantize_fp8_block(w.data(), rows, cols, q.data(), &block_scale);
  EXPECT_TRUE(std::isfinite(block_scale) && block_scale > 0);

  quantize_mxfp8(w.data(), rows, cols, q.data(), codes.data());
  for (int i = 0; i < rows * 2; ++i) EXPECT_NE(codes[size_t(i)], 0xFF);
  dequantize_matrix(MOE_FORMAT_MXFP8, q.data(), codes.data(), 0, rows, cols, out.data());
  for (double v : out) EXPECT_EQ(v, 0.0);

  quantize_mxfp4(w.data(), rows, cols, q.data(), codes.data());
  dequantize_matrix(MOE_FORMAT_MXFP4, q.data(), codes.data(), 0, rows, cols, out.data());
  for (double v : out) EXPECT_EQ(v, 0.0);

  const float scale_2 = nvfp4_scale_2(w.data(), rows * cols);
  EXPECT_TRUE(std::isfinite(scale_2) && scale_2 > 0);
  quantize_nvfp4(w.data(), rows, cols, scale_2, q.data(), codes.data());
  dequantize_matrix(MOE_FORMAT_NVFP4, q.data(), codes.data(), scale_2, rows, cols, out.data());
  for (double v : out) EXPECT_EQ(v, 0.0);
}

TEST(Quantize, Bf16DequantisesToTheBf16Value) {
  const uint16_t bits[4] = {0x3F80, 0xC040, 0x0001, 0x7F7F};
  double out[4];
  dequantize_matrix(MOE_FORMAT_BF16, bits, nullptr, 0, 2, 2, out);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], double(bf16_to_float(bits[i])));
}

TEST(Quantize, Fp4RejectsOddColumns) {
  const std::vector<float> w(3 * 5, 1.0f);
  std::vector<uint8_t> q(16), s(16);
  std::vector<double> out(15);
  expect_error([&] { quantize_mxfp4(w.data(), 3, 5, q.data(), s.data()); },
               MOE_STATUS_INVALID_ARGUMENT, "cols=5 is odd");
  expect_error([&] { quantize_nvfp4(w.data(), 3, 5, 1.0f, q.data(), s.data()); },
               MOE_STATUS_INVALID_ARGUMENT, "cols=5 is odd");
  expect_error(
      [&] { dequantize_matrix(MOE_FORMAT_MXFP4, q.data(), s.data(), 0, 3, 5, out.data()); },
      MOE_STATUS_INVALID_ARGUMENT, "cols=5 is odd");
  expect_error(
      [&] { dequantize_matrix(MOE_FORMAT_NVFP4, q.data(), s.data(), 1, 3, 5, out.data()); },
      MOE_STATUS_INVALID_ARGUMENT, "cols=5 is odd");
}

TEST(Quantize, BadArgumentsAreReported) {
  const std::vector<float> w(4, 1.0f);
  std::vector<uint8_t> q(4), s(4);
  std::vector<double> out(4);
  expect_error([&] { quantize_nvfp4(w.data(), 1, 4, 0.0f, q.data(), s.data()); },
               MOE_STATUS_INVALID_ARGUMENT, "scale_2=0 must be positive");
  expect_error(
      [&] { dequantize_matrix(MOE_FORMAT_FP8_BLOCK, q.data(), nullptr, 0, 1, 4, out.data()); },
      MOE_STATUS_INVALID_ARGUMENT, "needs scales");
  const auto unknown = static_cast<moe_format>(format_table().size());
  expect_error([&] { dequantize_matrix(unknown, q.data(), s.data(), 0, 1, 4, out.data()); },
               MOE_STATUS_UNSUPPORTED, "format=6 is not a weight format this build knows");
  expect_error([&] { quantize_fp8_tensor(w.data(), -1, 4, q.data()); }, MOE_STATUS_INVALID_ARGUMENT,
               "negative dimension");
}

// ---- activation quantisation ----------------------------------------------------------------

TEST(FakeQuant, Fp8RoundsToTheScaledGrid) {
  EXPECT_EQ(fp8_scale_from_amax(896.0), 2.0f);
  EXPECT_EQ(fp8_scale_from_amax(0.0), float(1e-10 / 448.0));
  double x[] = {1.0625, 3.3, 1000.0, -0.53125, 0.0};
  fake_quant_fp8(x, 5, 1.0f);
  EXPECT_EQ(x[0], 1.0);  // tie -> even
  EXPECT_EQ(x[1], 3.25);
  EXPECT_EQ(x[2], 448.0);  // saturates
  EXPECT_EQ(x[3], -0.5);
  EXPECT_EQ(x[4], 0.0);
  double y[] = {2.125};
  fake_quant_fp8(y, 1, 2.0f);
  EXPECT_EQ(y[0], 2.0);
  expect_error([&] { fake_quant_fp8(y, 1, 0.0f); }, MOE_STATUS_INVALID_ARGUMENT,
               "scale=0 must be positive");
}

TEST(FakeQuant, Fp8OneByOneTwentyEightUsesEachBlocksAmax) {
  std::vector<double> row(300, 0.0);
  row[0] = 448.0;  // block 0: scale 1
  row[1] = 1.0625;
  row[127] = 3.3;
  row[128] = -896.0;  // block 1: scale 2
  row[200] = 2.125;
  row[299] = 224.0;  // block 2 (44 channels): scale 0.5
  row[256] = 0.53125;
  row[257] = 0.3;
  fake_quant_fp8_1x128(row.data(), int64_t(row.size()));
  EXPECT_EQ(row[0], 448.0);
  EXPECT_EQ(row[1], 1.0);
  EXPECT_EQ(row[127], 3.25);
  EXPECT_EQ(row[128], -896.0);
  EXPECT_EQ(row[200], 2.0);
  EXPECT_EQ(row[299], 224.0);
  EXPECT_EQ(row[256], 0.5);
  EXPECT_EQ(row[257], 0.3125);  // 0.3 / 0.5 = 0.6 -> 0.625 on the [0.5, 1) grid
  EXPECT_EQ(row[2], 0.0);
}

TEST(FakeQuant, Mxfp8UsesPow2ScalePer32Channels) {
  std::vector<double> row(70, 0.0);
  row[0] = 448.0;  // block 0: amax/448 = 1 -> scale 1
  row[1] = 1.0625;
  row[32] = 449.0;  // block 1: 449/448 -> scale 2; 224.5 -> 224 on the [128, 256) grid
  row[33] = 3.0;
  row[64] = 1.0;  // block 2 (6 channels): 1/448 -> scale 2^-8
  row[65] = 0.3;  // 0.3 * 256 = 76.8 -> 80 on the [64, 128) grid
  fake_quant_mxfp8(row.data(), int64_t(row.size()));
  EXPECT_EQ(row[0], 448.0);
  EXPECT_EQ(row[1], 1.0);
  EXPECT_EQ(row[32], 448.0);
  EXPECT_EQ(row[33], 3.0);
  EXPECT_EQ(row[64], 1.0);
  EXPECT_EQ(row[65], 80.0 / 256.0);
  EXPECT_EQ(row[69], 0.0);
}

}  // namespace
}  // namespace moe
