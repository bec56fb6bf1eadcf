// Exact element codecs and the quantisation rules of docs/design.md §3 (see formats.hpp).
#include "moe/sdk/formats.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>

#include "moe/sdk/error.hpp"

namespace moe {

namespace {

// Code of the magnitude `a` (>= 0, finite) in a minifloat with `mant_bits` mantissa bits whose
// smallest normal exponent is `emin`, rounded to nearest, ties to even. Magnitude codes are
// consecutive, so a mantissa that rounds up to 2^(mant_bits+1) carries into the exponent and
// the top subnormal rounds into the smallest normal. The caller saturates.
unsigned round_minifloat(double a, int emin, int mant_bits) {
  const int e = a == 0.0 ? emin : std::max(std::ilogb(a), emin);
  const double m = std::ldexp(a, mant_bits - e);  // exact: scaling by a power of two
  double r = std::floor(m);
  const double frac = m - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  return (unsigned(e - emin) << mant_bits) + unsigned(r);
}

template <class T>
double amax_of(const T* x, int64_t n) {
  double amax = 0.0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(double(x[i])));
  return amax;
}

void check_shape(int64_t rows, int64_t cols) {
  MOE_CHECK(rows >= 0 && cols >= 0, MOE_STATUS_INVALID_ARGUMENT,
            "matrix shape [{}, {}] has a negative dimension", rows, cols);
}

void check_fp4_cols(int64_t cols, const char* what) {
  MOE_CHECK(cols % 2 == 0, MOE_STATUS_INVALID_ARGUMENT,
            "{}: cols={} is odd; fp4 packs two elements per byte so cols must be even", what, cols);
}

// ue8m0 scale that makes a block of amax `amax` fit in [-elem_max, elem_max] without saturating.
uint8_t mx_scale_code(double amax, double elem_max) {
  return ue8m0_ceil(std::max(amax, kMinAmax) / elem_max);
}

struct DtypeInfo {
  size_t size;
  const char* name;
};

// Indexed by moe_dtype, whose values run 0..11 in this order.
constexpr DtypeInfo kDtypes[] = {{0, "invalid"}, {2, "bf16"}, {2, "f16"},    {4, "f32"},
                                 {8, "f64"},     {1, "e4m3"}, {1, "e2m1x2"}, {1, "ue8m0"},
                                 {4, "i32"},     {8, "i64"},  {1, "u8"},     {1, "i8"}};
static_assert(MOE_DTYPE_BF16 == 1 && MOE_DTYPE_E4M3 == 5 && MOE_DTYPE_I8 == 11);

const DtypeInfo& dtype_info(moe_dtype dtype) {
  const auto i = size_t(dtype);
  return i < std::size(kDtypes) ? kDtypes[i] : kDtypes[0];
}

}  // namespace

// ---- element codecs -------------------------------------------------------------------------

float bf16_to_float(uint16_t bits) {
  return std::bit_cast<float>(uint32_t(bits) << 16);
}

uint16_t float_to_bf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  // Truncating a NaN whose payload is in the low bits would give inf: force the quiet bit.
  if (std::isnan(x)) return uint16_t((bits >> 16) | 0x40);
  const uint32_t rounding_bias = 0x7FFF + ((bits >> 16) & 1);  // RNE; inf stays inf
  return uint16_t((bits + rounding_bias) >> 16);
}

uint16_t double_to_bf16(double x) {
  // Round to float with round-to-odd (truncate, then set the last bit if anything was lost):
  // float keeps 16 bits more than bf16, so the RNE step to bf16 then sees the true sticky bit
  // and rounds exactly once, as if straight from the double.
  float f = static_cast<float>(x);
  if (std::isfinite(f) && static_cast<double>(f) != x) {
    uint32_t bits = std::bit_cast<uint32_t>(f);
    if (std::abs(static_cast<double>(f)) > std::abs(x)) --bits;  // toward zero
    f = std::bit_cast<float>(bits | 1u);
  }
  return float_to_bf16(f);
}

double e4m3_to_double(uint8_t code) {
  const int exponent = (code >> 3) & 0xF;
  const int mantissa = code & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return std::nan("");
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 7 - 3);
  return (code & 0x80) ? -magnitude : magnitude;
}

uint8_t e4m3_from_double(double x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(x);
  if (a > kE4m3Max) return sign | 0x7E;  // saturate, infinities included
  return sign | uint8_t(round_minifloat(a, -6, 3));
}

double e2m1_to_double(uint8_t nibble) {
  static constexpr double kMagnitudes[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  const double magnitude = kMagnitudes[nibble & 0x7];
  return (nibble & 0x8) ? -magnitude : magnitude;
}

uint8_t e2m1_from_double(double x) {
  MOE_CHECK(!std::isnan(x), MOE_STATUS_INVALID_ARGUMENT,
            "e2m1_from_double: NaN cannot be encoded (fp4 e2m1 has no NaN code)");
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const double a = std::fabs(x);
  if (a > kE2m1Max) return sign | 0x7;
  return sign | uint8_t(round_minifloat(a, 0, 1));
}

double ue8m0_to_double(uint8_t code) {
  return code == 0xFF ? std::nan("") : std::ldexp(1.0, int(code) - 127);
}

uint8_t ue8m0_from_pow2(double x) {
  int exponent = 0;
  const bool pow2 = std::isfinite(x) && x > 0.0 && std::frexp(x, &exponent) == 0.5;
  // frexp gives x = 0.5 * 2^exponent, so x = 2^(exponent - 1).
  MOE_CHECK(pow2 && exponent - 1 >= -127 && exponent - 1 <= 127, MOE_STATUS_INVALID_ARGUMENT,
            "ue8m0_from_pow2: {} is not an exact power of two in [2^-127, 2^127]", x);
  return uint8_t(exponent - 1 + 127);
}

uint8_t ue8m0_ceil(double x) {
  MOE_CHECK(std::isfinite(x) && x > 0.0, MOE_STATUS_INVALID_ARGUMENT,
            "ue8m0_ceil: {} is not a positive finite number", x);
  int exponent = 0;
  const double fraction = std::frexp(x, &exponent);  // x = fraction * 2^exponent, [0.5, 1)
  const int e = fraction == 0.5 ? exponent - 1 : exponent;
  return uint8_t(std::clamp(e + 127, 0, 254));
}

size_t dtype_size(moe_dtype dtype) {
  return dtype_info(dtype).size;
}
const char* dtype_name(moe_dtype dtype) {
  return dtype_info(dtype).name;
}

// ---- weight quantisation --------------------------------------------------------------------

float fp8_scale_from_amax(double amax) {
  return float(std::max(amax, kMinAmax) / kE4m3Max);
}

float quantize_fp8_tensor(const float* w, int64_t rows, int64_t cols, uint8_t* q) {
  check_shape(rows, cols);
  const float scale = fp8_scale_from_amax(amax_of(w, rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) q[i] = e4m3_from_double(double(w[i]) / scale);
  return scale;
}

void quantize_fp8_block(const float* w, int64_t rows, int64_t cols, uint8_t* q, float* scales) {
  check_shape(rows, cols);
  const int64_t row_blocks = ceil_div(rows, kFp8BlockSize);
  const int64_t col_blocks = ceil_div(cols, kFp8BlockSize);
  for (int64_t bi = 0; bi < row_blocks; ++bi) {
    const int64_t r0 = bi * kFp8BlockSize, r1 = std::min(rows, r0 + kFp8BlockSize);
    for (int64_t bj = 0; bj < col_blocks; ++bj) {
      const int64_t c0 = bj * kFp8BlockSize, width = std::min(cols - c0, kFp8BlockSize);
      double amax = 0.0;
      for (int64_t r = r0; r < r1; ++r) amax = std::max(amax, amax_of(w + r * cols + c0, width));
      const float scale = fp8_scale_from_amax(amax);
      scales[bi * col_blocks + bj] = scale;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c0 + width; ++c)
          q[r * cols + c] = e4m3_from_double(double(w[r * cols + c]) / scale);
    }
  }
}

void quantize_mxfp8(const float* w, int64_t rows, int64_t cols, uint8_t* q, uint8_t* scales) {
  check_shape(rows, cols);
  const int64_t blocks = ceil_div(cols, kMxBlockSize);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * kMxBlockSize, c1 = std::min(cols, c0 + kMxBlockSize);
      const uint8_t code = mx_scale_code(amax_of(w + r * cols + c0, c1 - c0), kE4m3Max);
      scales[r * blocks + b] = code;
      const double scale = ue8m0_to_double(code);
      for (int64_t c = c0; c < c1; ++c)
        q[r * cols + c] = e4m3_from_double(double(w[r * cols + c]) / scale);
    }
  }
}

void quantize_mxfp4(const float* w, int64_t rows, int64_t cols, uint8_t* q, uint8_t* scales) {
  check_shape(rows, cols);
  check_fp4_cols(cols, "quantize_mxfp4");
  const int64_t blocks = ceil_div(cols, kMxBlockSize);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* q_row = q + r * (cols / 2);  // (cols/2) packed
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * kMxBlockSize, c1 = std::min(cols, c0 + kMxBlockSize);
      const uint8_t code = mx_scale_code(amax_of(w + r * cols + c0, c1 - c0), kE2m1Max);
      scales[r * blocks + b] = code;
      const double scale = ue8m0_to_double(code);
      for (int64_t c = c0; c < c1; ++c)
        fp4_set(q_row, c, e2m1_from_double(double(w[r * cols + c]) / scale));
    }
  }
}

float nvfp4_scale_2(const float* w, int64_t n) {
  return float(std::max(amax_of(w, n), kMinAmax) / (kE4m3Max * kE2m1Max));
}

void quantize_nvfp4(const float* w, int64_t rows, int64_t cols, float scale_2, uint8_t* q,
                    uint8_t* scales) {
  check_shape(rows, cols);
  check_fp4_cols(cols, "quantize_nvfp4");
  MOE_CHECK(std::isfinite(scale_2) && scale_2 > 0.0f, MOE_STATUS_INVALID_ARGUMENT,
            "quantize_nvfp4: scale_2={} must be positive and finite", scale_2);
  const int64_t blocks = ceil_div(cols, kNvfp4BlockSize);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* q_row = q + r * (cols / 2);  // (cols/2) packed
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * kNvfp4BlockSize, c1 = std::min(cols, c0 + kNvfp4BlockSize);
      const double block_amax = amax_of(w + r * cols + c0, c1 - c0);
      const uint8_t code = e4m3_from_double(block_amax / kE2m1Max / double(scale_2));
      scales[r * blocks + b] = code;
      const double scale = e4m3_to_double(code) * double(scale_2);  // exact in double
      for (int64_t c = c0; c < c1; ++c) {
        const double x = double(w[r * cols + c]);
        fp4_set(q_row, c, scale == 0.0 ? uint8_t(0) : e2m1_from_double(x / scale));
      }
    }
  }
}

void dequantize_bf16(const void* q, const void*, float, int64_t rows, int64_t cols, double* out) {
  check_shape(rows, cols);
  const auto* bits = static_cast<const uint16_t*>(q);
  for (int64_t i = 0; i < rows * cols; ++i) out[i] = bf16_to_float(bits[i]);
}

void dequantize_fp8_tensor(const void* q, const void* scales, float, int64_t rows, int64_t cols,
                           double* out) {
  check_shape(rows, cols);
  const auto* bytes = static_cast<const uint8_t*>(q);
  const double s = static_cast<const float*>(scales)[0];
  for (int64_t i = 0; i < rows * cols; ++i) out[i] = e4m3_to_double(bytes[i]) * s;
}

void dequantize_fp8_block(const void* q, const void* scales, float, int64_t rows, int64_t cols,
                          double* out) {
  check_shape(rows, cols);
  const auto* bytes = static_cast<const uint8_t*>(q);
  const auto* s = static_cast<const float*>(scales);  // [ceil(rows/128), ceil(cols/128)]
  const int64_t col_blocks = ceil_div(cols, kFp8BlockSize);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = e4m3_to_double(bytes[r * cols + c]) *
                          double(s[(r / kFp8BlockSize) * col_blocks + c / kFp8BlockSize]);
}

void dequantize_mxfp8(const void* q, const void* scales, float, int64_t rows, int64_t cols,
                      double* out) {
  check_shape(rows, cols);
  const auto* bytes = static_cast<const uint8_t*>(q);
  const auto* codes = static_cast<const uint8_t*>(scales);  // [rows, ceil(cols/32)]
  const int64_t blocks = ceil_div(cols, kMxBlockSize);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = e4m3_to_double(bytes[r * cols + c]) *
                          ue8m0_to_double(codes[r * blocks + c / kMxBlockSize]);
}

void dequantize_mxfp4(const void* q, const void* scales, float, int64_t rows, int64_t cols,
                      double* out) {
  check_shape(rows, cols);
  check_fp4_cols(cols, "dequantize_mxfp4");
  const auto* bytes = static_cast<const uint8_t*>(q);       // [rows, cols/2] packed
  const auto* codes = static_cast<const uint8_t*>(scales);  // [rows, ceil(cols/32)]
  const int64_t blocks = ceil_div(cols, kMxBlockSize);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = e2m1_to_double(fp4_get(bytes + r * (cols / 2), c)) *
                          ue8m0_to_double(codes[r * blocks + c / kMxBlockSize]);
}

void dequantize_nvfp4(const void* q, const void* scales, float scale_2, int64_t rows, int64_t cols,
                      double* out) {
  check_shape(rows, cols);
  check_fp4_cols(cols, "dequantize_nvfp4");
  const auto* bytes = static_cast<const uint8_t*>(q);       // [rows, cols/2] packed
  const auto* codes = static_cast<const uint8_t*>(scales);  // [rows, ceil(cols/16)] e4m3
  const int64_t blocks = ceil_div(cols, kNvfp4BlockSize);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double scale =
          e4m3_to_double(codes[r * blocks + c / kNvfp4BlockSize]) * double(scale_2);
      out[r * cols + c] = e2m1_to_double(fp4_get(bytes + r * (cols / 2), c)) * scale;
    }
}

// ---- activation quantisation ----------------------------------------------------------------

void fake_quant_fp8(double* x, int64_t n, float scale) {
  MOE_CHECK(std::isfinite(scale) && scale > 0.0f, MOE_STATUS_INVALID_ARGUMENT,
            "fake_quant_fp8: scale={} must be positive and finite", scale);
  const double s = scale;
  for (int64_t i = 0; i < n; ++i) x[i] = e4m3_to_double(e4m3_from_double(x[i] / s)) * s;
}

void fake_quant_fp8_1x128(double* row, int64_t n) {
  for (int64_t c0 = 0; c0 < n; c0 += kFp8BlockSize) {
    const int64_t width = std::min(n - c0, kFp8BlockSize);
    fake_quant_fp8(row + c0, width, fp8_scale_from_amax(amax_of(row + c0, width)));
  }
}

void fake_quant_mxfp8(double* row, int64_t n) {
  for (int64_t c0 = 0; c0 < n; c0 += kMxBlockSize) {
    const int64_t width = std::min(n - c0, kMxBlockSize);
    const double scale = ue8m0_to_double(mx_scale_code(amax_of(row + c0, width), kE4m3Max));
    for (int64_t c = c0; c < c0 + width; ++c)
      row[c] = e4m3_to_double(e4m3_from_double(row[c] / scale)) * scale;
  }
}

}  // namespace moe
