// The weight formats of docs/design.md §3, one row each: every decision the library makes by
// format (storage, scale geometry, checkpoint names, the activation format it implies, codecs,
// the conformance tolerance) reads a row here instead of switching on moe_format. Adding a
// format is one row, its codec in formats.cpp, and its tests.
#pragma once

#include <cstdint>
#include <span>

#include "moe/abi/moe_abi.h"

namespace moe {

// Quantises one matrix [rows, cols] (K = cols contiguous) of values `w`: `q` gets the stored
// elements ([rows, stored cols]), `scales` the scale values in the layout matrix_layout() gives
// (nullptr for a format without scales), `scale_2` the second-level scale (formats with one).
using QuantizeFn = void (*)(const float* w, int64_t rows, int64_t cols, void* q, void* scales,
                            float* scale_2);
// Dequantises one matrix exactly into doubles [rows, cols]; `scale_2` is read by formats that
// have one.
using DequantizeFn = void (*)(const void* q, const void* scales, float scale_2, int64_t rows,
                              int64_t cols, double* out);

struct FormatSpec {
  moe_format format;
  const char* name;   // the YAML spelling
  moe_dtype element;  // dtype of the stored weights
  bool packed_fp4;    // two e2m1 per byte, low nibble first: a row stores cols / 2 bytes
  // Scales. A block covers scale_block_rows x scale_block_k elements; 0 x 0 means one scale for
  // the whole matrix; scale == MOE_DTYPE_INVALID means no scales at all.
  moe_dtype scale;
  int64_t scale_block_rows;
  int64_t scale_block_k;
  bool scale_2;  // an fp32 second-level scale per matrix (per expert), multiplied into every block
  moe_input_format natural_input;  // what input_format `default` resolves to
  double tolerance;                // conformance: relative L2 error allowed by default
  // Checkpoint tensors beside `<projection>.weight`: the scale's name (the first is written on
  // export; any is accepted on read, first found wins) and stored dtype, and the scale_2 name.
  const char* checkpoint_scale_names[2];
  moe_dtype checkpoint_scale_dtype;
  const char* checkpoint_scale_2_name;
  QuantizeFn quantize;
  DequantizeFn dequantize;
};

// Every format this build knows, in moe_format order.
std::span<const FormatSpec> format_table();

// The row of `format`; throws moe::Refusal(MOE_REASON_FORMAT) for a value this build does not
// know (a newer caller's format).
const FormatSpec& format_spec(moe_format format);
// nullptr for a value this build does not know (taken as the ABI's int32: a newer caller's value
// may be outside moe_format's range).
const FormatSpec* find_format(int32_t format);

// True when each scale covers a whole matrix (fp8_tensor).
inline bool per_matrix_scale(const FormatSpec& f) {
  return f.scale != MOE_DTYPE_INVALID && f.scale_block_rows == 0;
}
// Columns a slice along K must keep together so that no scale block (or packed byte) is cut;
// 1 when nothing constrains it.
int64_t k_granularity(const FormatSpec& f);

// Table lookups of the codecs, for one matrix (see QuantizeFn / DequantizeFn).
void quantize_matrix(moe_format format, const float* w, int64_t rows, int64_t cols, void* q,
                     void* scales, float* scale_2);
void dequantize_matrix(moe_format format, const void* q, const void* scales, float scale_2,
                       int64_t rows, int64_t cols, double* out /* out, [rows, cols] */);

}  // namespace moe
