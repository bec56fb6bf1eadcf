// Activation quantisation to e4m3 (moe_input_format FP8_1X128, FP8_TENSOR_DYNAMIC/STATIC) with the
// rules of core/src/sdk/formats.cpp: scale = float(max(amax, 1e-10) / 448) computed in double
// (bit-identical to moe::fp8_scale_from_amax), codes = e4m3(x / scale) rounded to nearest even and
// saturated to +-448, NaN -> 0x7f. NaN inputs do not enter the amax (std::max skips them there).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "moe_cuda/rows.hpp"

namespace moe::gpu {

// Where the scale of (row r, 128-channel block b) goes: data[r * row_stride + b * block_stride].
// Default: row-major [R, ceil(H/128)]. DeepGEMM's MN-major layout: {data, 1, padded_rows}.
struct Fp8BlockScales {
  float* data = nullptr;
  int64_t row_stride = 0;  // 0 = ceil(H / 128)
  int64_t block_stride = 1;
};

// Per token, per 128 channels (the last block may be shorter): x [R_max, H] bf16 ->
// codes [R_max, H] e4m3 and fp32 scales, for the rows in `rows`.
void launch_quantize_fp8_1x128(const uint16_t* x, int64_t hidden, const RowRange& rows,
                               uint8_t* codes, const Fp8BlockScales& scales, cudaStream_t stream);

// The same with a gather fused in (a permutation's rows quantised straight from the tokens):
// output row r reads x[source_row[r], :] (x [T, H] bf16); rows whose source_row is < 0 are left
// untouched (codes and scales). source_row: device [rows.max_rows], e.g. Permutation::row_token.
// Rows whose group (row_group [R_max], e.g. Permutation::row_group) lies in [skip_begin,
// skip_end) are left untouched too: groups computed apart.
struct GroupSkip {
  const int32_t* row_group = nullptr;
  int32_t skip_begin = 0, skip_end = 0;
};
// With a staging area of `tokens` (x's rows) and at least twice as many rows as tokens (top_k
// >= 2), each token is quantised once into the staging area and its codes and scales copied to
// its rows: the same bytes (a token's quantisation depends on it alone) for one quantisation per
// token instead of one per row. Without it, or with fewer rows, or hidden % 16 != 0, every row is
// quantised from its token. data: device, gather_quantize_fp8_staging_bytes(tokens, hidden),
// 16-byte aligned.
struct Fp8Staging {
  void* data = nullptr;
  int64_t tokens = 0;
};
size_t gather_quantize_fp8_staging_bytes(int64_t tokens, int64_t hidden);
// Whether staging pays for a layer: its live rows (tokens x top_k x local / all experts, on
// average) are at least twice its tokens. Under expert parallelism a rank's layer sees every
// rank's tokens but holds a share of the experts, so the rows can be as few as the tokens.
inline bool fp8_staging_pays(int64_t top_k, int64_t local_experts, int64_t experts) {
  return top_k * local_experts >= 2 * experts;
}
void launch_gather_quantize_fp8_1x128(const uint16_t* x, int64_t hidden, const int32_t* source_row,
                                      const RowRange& rows, uint8_t* codes,
                                      const Fp8BlockScales& scales, cudaStream_t stream,
                                      const GroupSkip& skip = {}, const Fp8Staging& staging = {});

// Dynamic per-tensor: one scale over every element of the rows in `rows` (three steps on the
// stream: zero the amax, reduce it with atomicMax on the float's bits, quantise; one block in
// one launch when max_rows x hidden <= 2^16, as at decode). `scale` out: device f32 [1].
// `workspace`: >= quantize_fp8_tensor_workspace_bytes(), device.
size_t quantize_fp8_tensor_workspace_bytes();
void launch_quantize_fp8_tensor_dynamic(const uint16_t* x, int64_t hidden, const RowRange& rows,
                                        uint8_t* codes, float* scale, void* workspace,
                                        cudaStream_t stream);

// Static per-tensor: `scale` is a device f32 [1] given by the weights (a13_scale, a2_scale).
void launch_quantize_fp8_tensor_static(const uint16_t* x, int64_t hidden, const RowRange& rows,
                                       const float* scale, uint8_t* codes, cudaStream_t stream);

// The same two from f32 values (e.g. an activation GEMM1's epilogue kept in f32, so the codes
// come from unrounded values as the reference's do; a bf16 rounding first moves ~3% of them).
void launch_quantize_fp8_tensor_dynamic(const float* x, int64_t hidden, const RowRange& rows,
                                        uint8_t* codes, float* scale, void* workspace,
                                        cudaStream_t stream);
void launch_quantize_fp8_tensor_static(const float* x, int64_t hidden, const RowRange& rows,
                                       const float* scale, uint8_t* codes, cudaStream_t stream);
// Dynamic per-tensor from f32 values whose amax is already known (a GEMM's epilogue reduced it
// as it stored them: WoGemmArgs::out_amax): `amax_bits` device uint32 [1], the amax as float
// bits; only the quantisation runs, with the scale the dynamic path would derive from it.
void launch_quantize_fp8_tensor_from_amax(const float* x, int64_t hidden, const RowRange& rows,
                                          const uint32_t* amax_bits, uint8_t* codes, float* scale,
                                          cudaStream_t stream);

}  // namespace moe::gpu
