// One weight matrix of a checkpoint on its way to the canonical form: elements and scales in
// a format's layout (moe::matrix_layout), with the row/column surgery the adapters need.
#pragma once

#include <string>

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

// Where the names come from, for messages: "convention mixtral, prefix '...', layer 3".
struct NameContext {
  const Checkpoint& checkpoint;
  std::string describe;
};

// A copy of tensor `name` checked to be `dtype` of `shape`; missing -> NOT_FOUND naming the
// tensor and the context. `alt_dtype` (if not INVALID) is accepted too (e.g. I8 for U8).
HostTensor read_tensor(const NameContext& ctx, const std::string& name, moe_dtype dtype,
                       std::vector<int64_t> shape, moe_dtype alt_dtype = MOE_DTYPE_INVALID);
bool has_tensor(const NameContext& ctx, const std::string& name);
// A scalar f32 stored as [] or [1].
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
