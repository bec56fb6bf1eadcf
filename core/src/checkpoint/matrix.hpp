// One weight matrix of a checkpoint on its way to the canonical form: elements and scales in
// a format's layout (moe::matrix_layout), with the row/column surgery the adapters need.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "moe/abi/moe_abi.h"
#include "moe/safetensors.hpp"
#include "moe/sdk/host_tensor.hpp"

namespace moe::detail {

struct Matrix {
  moe_format format = MOE_FORMAT_BF16;
  int64_t rows = 0, cols = 0;
  HostTensor q;          // [rows, stored_cols]
  HostTensor scale;      // [scale_rows, scale_cols], [1] for fp8_tensor, empty for bf16
  float scale_2 = 1.0f;  // nvfp4 global scale
};

// Expert weight tensors converted at load, by name: the stored dtype as the file spells it
// ("F32") and what it became (a format's name).
using Conversions = std::map<std::string, std::pair<std::string, std::string>>;

// Where the names come from, for messages: "convention mixtral, prefix '...', layer 3".
struct NameContext {
  const Checkpoint& checkpoint;
  std::string describe;
  Conversions* converted = nullptr;  // where conversions are recorded; nullptr: nowhere
};

// ---- checkpoint dtypes ----------------------------------------------------------------------
// Expert weights stored as F32, F16 or BF16 where the format stores something else (BF16 under
// bf16 is read as is) are converted at load: the readers hand them out as an unquantised Matrix
// (format bf16, q F32 [rows, cols], no scales), the layout surgery below moves them like any
// matrix, and quantize_loaded turns the assembled canonical matrix (w13 = [gate; up], one TP
// slab) into the problem's format with the format table's quantiser: the rules of
// docs/design.md §3.2 that make conformance weights.
bool converted_at_load(moe_dtype stored, moe_format format);
inline bool is_unquantised(const Matrix& m) {
  return m.q.dtype() == MOE_DTYPE_F32;
}
// Values of an F32, F16 or BF16 tensor as F32 (exact), same shape.
HostTensor to_f32(const HostTensor& t);
bool is_half_or_f32(moe_dtype d);  // a dtype to_f32 reads
// `m` in `format`; an unquantised matrix is quantised, any other is returned as it is.
Matrix quantize_loaded(const Matrix& m, moe_format format);
// Notes checkpoint tensor `name` as converted to `to` (a format's name) in ctx.converted.
void record_conversion(const NameContext& ctx, const std::string& name, const std::string& to);
// Refuses expert weight `name` of a dtype that is neither the format's nor convertible, naming
// the tensor and what is accepted; returns when the dtype is the format's stored one.
void check_weight_dtype(const NameContext& ctx, const std::string& name, moe_format format);

// A copy of tensor `name` checked to be `dtype` of `shape`; missing -> NOT_FOUND naming the
// tensor and the context. `alt_dtype` (if not INVALID) is accepted too (e.g. I8 for U8).
HostTensor read_tensor(const NameContext& ctx, const std::string& name, moe_dtype dtype,
                       std::vector<int64_t> shape, moe_dtype alt_dtype = MOE_DTYPE_INVALID);
bool has_tensor(const NameContext& ctx, const std::string& name);
// A scalar stored as [] or [1], F32 (or BF16 / F16, widened exactly).
float read_scalar_f32(const NameContext& ctx, const std::string& name);

// Projection `base` (".weight" and its scales appended) of `format`, [rows, cols].
Matrix read_projection(const NameContext& ctx, const std::string& base, moe_format format,
                       int64_t rows, int64_t cols);

// An all-zero matrix whose scales are 1 (padding experts).
Matrix zero_matrix(moe_format format, int64_t rows, int64_t cols);

// Rows [begin, begin + count) / columns [begin, begin + count), scales alike. A cut through a
// scale block or a packed byte is refused with a message naming `what`.
Matrix slice_rows(const Matrix& m, int64_t begin, int64_t count, const std::string& what);
Matrix slice_cols(const Matrix& m, int64_t begin, int64_t count, const std::string& what);

// [top; bottom] as one matrix: gate and up into w13. fp8_tensor halves with different scales
// are requantised to the larger one (logged); nvfp4 global scales are folded exactly or refused.
Matrix stack_rows(const Matrix& top, Matrix bottom, const std::string& what);

// Splits interleaved rows [r0_a, r0_b, r1_a, r1_b, ...] into (a, b).
std::pair<Matrix, Matrix> deinterleave_rows(const Matrix& m, const std::string& what);

// [a0, b0, a1, b1, ...]: the inverse of deinterleave_rows.
Matrix interleave_rows(const Matrix& a, const Matrix& b, const std::string& what);

// Matrix `index` of stacked canonical tensors (index < 0: an unstacked tensor); the inverse of
// store().
Matrix matrix_at(moe_format format, int64_t rows, int64_t cols, const HostTensor& q,
                 const HostTensor& scale, const HostTensor& scale_2, int64_t index);

// Copies matrix `m` into slot `index` of the stacked tensors (allocating them on first use for
// `count` slots); index < 0 means an unstacked tensor (shared experts).
void store(const Matrix& m, int64_t index, int64_t count, HostTensor& q, HostTensor& scale,
           HostTensor& scale_2);

}  // namespace moe::detail
