// Exact codecs for the element and scale types of docs/design.md §3, and the quantisation rules
// that the reference, the conformance harness and every backend share.
//
// Decoding is exact (every code maps to the double it denotes). Encoding rounds to nearest,
// ties to even, and saturates to the largest finite magnitude (e4m3 +-448, e2m1 +-6).
#pragma once

#include <cstddef>
#include <cstdint>

#include "moe/abi/moe_abi.h"

namespace moe {

// ---- element codecs -------------------------------------------------------------------------

float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float x);    // RNE; NaN stays a quiet NaN, inf stays inf
uint16_t double_to_bf16(double x);  // RNE from the double itself (no double rounding)

double e4m3_to_double(uint8_t code);  // float8_e4m3fn; 0x7f and 0xff are NaN
uint8_t e4m3_from_double(double x);   // RNE, saturating; NaN -> 0x7f

double e2m1_to_double(uint8_t nibble);  // low 4 bits used: {0,.5,1,1.5,2,3,4,6} with sign bit 3
uint8_t e2m1_from_double(double x);     // RNE, saturating; NaN -> throws moe::Error

double ue8m0_to_double(uint8_t code);  // 2^(code-127); 0xff is NaN
uint8_t ue8m0_from_pow2(double x);     // exact power of two in [2^-127, 2^127], else throws
uint8_t ue8m0_ceil(double x);          // code of the smallest 2^e >= x; x > 0 finite

// Packed fp4: element i of a row lives in byte i/2, low nibble for even i.
inline uint8_t fp4_get(const uint8_t* packed, int64_t i) {
  uint8_t b = packed[i >> 1];
  return (i & 1) ? (b >> 4) : (b & 0xF);
}
inline void fp4_set(uint8_t* packed, int64_t i, uint8_t nibble) {
  uint8_t& b = packed[i >> 1];
  b = (i & 1) ? uint8_t((b & 0x0F) | (nibble << 4)) : uint8_t((b & 0xF0) | (nibble & 0xF));
}

// Bytes of one element (E2M1X2: one byte holds two elements; shapes count bytes). 0 if invalid.
size_t dtype_size(moe_dtype dtype);
const char* dtype_name(moe_dtype dtype);

// ---- scale geometry -------------------------------------------------------------------------

constexpr int64_t kFp8BlockSize = 128;   // fp8_block weights: 128x128; activations: 1x128
constexpr int64_t kMxBlockSize = 32;     // mxfp8 / mxfp4: 1x32 along K
constexpr int64_t kNvfp4BlockSize = 16;  // nvfp4: 1x16 along K
constexpr double kE4m3Max = 448.0;
constexpr double kE2m1Max = 6.0;
constexpr double kMinAmax = 1e-10;  // amax floor so an all-zero block gets a finite scale

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// ---- weight quantisation (one matrix [rows, cols], K = cols contiguous) ----------------------
// Used to make conformance inputs; dequantisation below is what the reference computes with.

// fp8_tensor: one scale = max(amax, kMinAmax) / 448 (as float); q = e4m3(w / scale).
float quantize_fp8_tensor(const float* w, int64_t rows, int64_t cols, uint8_t* q /* out */);

// fp8_block: scales [ceil(rows/128), ceil(cols/128)] f32, each max(amax, kMinAmax)/448.
void quantize_fp8_block(const float* w, int64_t rows, int64_t cols, uint8_t* q /* out */,
                        float* scales /* out */);

// mxfp8 (elem e4m3) / mxfp4 (elem e2m1, q packed [rows, cols/2]): scales [rows, ceil(cols/32)]
// ue8m0 = ue8m0_ceil(amax / elem_max) (kMinAmax floor), so no element saturates.
void quantize_mxfp8(const float* w, int64_t rows, int64_t cols, uint8_t* q /* out */,
                    uint8_t* scales /* out */);
void quantize_mxfp4(const float* w, int64_t rows, int64_t cols, uint8_t* q /* out, packed */,
                    uint8_t* scales /* out */);

// nvfp4: global scale_2 = max(amax, kMinAmax) / (448 * 6) computed by nvfp4_scale_2 over the
// whole matrix; block scales [rows, ceil(cols/16)] e4m3 = e4m3(block_amax / 6 / scale_2);
// q = e2m1(w / (decode(block_scale) * scale_2)), packed [rows, cols/2].
float nvfp4_scale_2(const float* w, int64_t n);
void quantize_nvfp4(const float* w, int64_t rows, int64_t cols, float scale_2,
                    uint8_t* q /* out, packed */, uint8_t* scales /* out */);

// Exact dequantisation of one matrix [rows, cols] into doubles, one function per format with the
// format table's signature (format_table.hpp): `scales` points at this matrix's scales in the
// layouts above (fp8_tensor: one float); `scale_2` is read by nvfp4 only. bf16: `q` holds bf16
// bits and there are no scales.
void dequantize_bf16(const void* q, const void*, float, int64_t rows, int64_t cols, double* out);
void dequantize_fp8_tensor(const void* q, const void* scales, float, int64_t rows, int64_t cols,
                           double* out);
void dequantize_fp8_block(const void* q, const void* scales, float, int64_t rows, int64_t cols,
                          double* out);
void dequantize_mxfp8(const void* q, const void* scales, float, int64_t rows, int64_t cols,
                      double* out);
void dequantize_mxfp4(const void* q, const void* scales, float, int64_t rows, int64_t cols,
                      double* out);
void dequantize_nvfp4(const void* q, const void* scales, float scale_2, int64_t rows, int64_t cols,
                      double* out);

// ---- activation quantisation (replaces values by their quantised-then-dequantised value) ----

// fp8 scale from an amax: float(max(amax, kMinAmax) / 448).
float fp8_scale_from_amax(double amax);
// x <- e4m3(x / scale) * scale, elementwise.
void fake_quant_fp8(double* x, int64_t n, float scale);
// One token's row [n]: per 128 channels (last block may be shorter), scale from the block amax.
void fake_quant_fp8_1x128(double* row, int64_t n);
// One token's row [n]: per 32 channels, ue8m0 scale = ue8m0_ceil(block_amax / 448).
void fake_quant_mxfp8(double* row, int64_t n);

}  // namespace moe
