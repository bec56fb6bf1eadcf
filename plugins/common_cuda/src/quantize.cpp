// Activation quantisation: checks and kernel arguments.
#include "moe_cuda/quantize.hpp"

#include <type_traits>

#include "launch.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"

namespace moe::gpu {
namespace {

constexpr auto kInvalid = MOE_STATUS_INVALID_ARGUMENT;

// Row lists (RowRange::list) are taken by the 1x128 quantisation only.
template <class X>
void check_rows(const char* what, const X* x, int64_t hidden, const RowRange& rows,
                const uint8_t* codes, bool takes_list = false) {
  check_row_range(what, rows, takes_list);
  MOE_CHECK(hidden >= 1, kInvalid, "{}: hidden={} must be >= 1", what, hidden);
  MOE_CHECK(rows.max_rows == 0 || (x != nullptr && codes != nullptr), kInvalid,
            "{}: x and codes must be given", what);
}

// x: bf16 bits (uint16_t) or f32.
template <class X>
void launch_tensor(const X* x, int64_t hidden, const RowRange& rows, uint8_t* codes,
                   uint32_t* amax_bits, const float* scale_in, float* scale_out,
                   cudaStream_t stream, bool amax_ready = false) {
  constexpr bool kF32 = std::is_same_v<X, float>;
  const kernels::Fp8TensorParams k{kF32 ? nullptr : reinterpret_cast<const uint16_t*>(x),
                                   codes,
                                   hidden,
                                   rows.max_rows,
                                   rows.begin,
                                   rows.end,
                                   amax_bits,
                                   scale_in,
                                   scale_out,
                                   kF32 ? reinterpret_cast<const float*>(x) : nullptr};
  detail::launch_fp8_tensor_kernels(k, hidden % 8 == 0 && detail::aligned(16, x, codes), stream,
                                    amax_ready);
}

template <class X>
void tensor_dynamic(const X* x, int64_t hidden, const RowRange& rows, uint8_t* codes, float* scale,
                    void* workspace, cudaStream_t stream) {
  check_rows("quantize_fp8_tensor_dynamic", x, hidden, rows, codes);
  MOE_CHECK(scale != nullptr && workspace != nullptr, kInvalid,
            "quantize_fp8_tensor_dynamic: scale and workspace must be given");
  // Even with no rows the scale is written (amax 0 -> 1e-10/448), as the reference does.
  launch_tensor(x, hidden, rows, codes, static_cast<uint32_t*>(workspace), nullptr, scale, stream);
}

template <class X>
void tensor_static(const X* x, int64_t hidden, const RowRange& rows, const float* scale,
                   uint8_t* codes, cudaStream_t stream) {
  check_rows("quantize_fp8_tensor_static", x, hidden, rows, codes);
  MOE_CHECK(scale != nullptr, kInvalid, "quantize_fp8_tensor_static: scale must be given");
  if (rows.max_rows == 0) return;
  launch_tensor(x, hidden, rows, codes, nullptr, scale, nullptr, stream);
}

// Where the staging area's scales start: after the codes, 256-byte aligned.
size_t staging_scales_offset(int64_t tokens, int64_t hidden) {
  return (size_t(tokens * hidden) + 255) / 256 * 256;
}

}  // namespace

void launch_quantize_fp8_1x128(const uint16_t* x, int64_t hidden, const RowRange& rows,
                               uint8_t* codes, const Fp8BlockScales& scales, cudaStream_t stream) {
  launch_gather_quantize_fp8_1x128(x, hidden, nullptr, rows, codes, scales, stream);
}

size_t gather_quantize_fp8_staging_bytes(int64_t tokens, int64_t hidden) {
  if (tokens <= 0 || hidden <= 0) return 0;
  return staging_scales_offset(tokens, hidden) +
         size_t(tokens * ceil_div(hidden, kFp8BlockSize)) * sizeof(float);
}

void launch_gather_quantize_fp8_1x128(const uint16_t* x, int64_t hidden, const int32_t* source_row,
                                      const RowRange& rows, uint8_t* codes,
                                      const Fp8BlockScales& scales, cudaStream_t stream,
                                      const GroupSkip& skip, const Fp8Staging& staging) {
  check_rows("quantize_fp8_1x128", x, hidden, rows, codes, true);
  MOE_CHECK(skip.skip_end <= skip.skip_begin || skip.row_group != nullptr, kInvalid,
            "quantize_fp8_1x128: skipping groups [{}, {}) needs row_group", skip.skip_begin,
            skip.skip_end);
  MOE_CHECK(staging.data == nullptr || staging.tokens >= 0, kInvalid,
            "quantize_fp8_1x128: staging for {} tokens", staging.tokens);
  if (rows.max_rows == 0) return;
  MOE_CHECK(scales.data != nullptr, kInvalid, "quantize_fp8_1x128: scales.data must be given");
  const int64_t blocks = ceil_div(hidden, kFp8BlockSize);
  const int64_t row_stride = scales.row_stride != 0 ? scales.row_stride : blocks;
  // A row list (a masked layout's live rows) is quantised row by row: few rows, none staged.
  const bool staged = staging.data != nullptr && source_row != nullptr && staging.tokens >= 1 &&
                      rows.list == nullptr && rows.max_rows >= 2 * staging.tokens &&
                      hidden % 16 == 0 && detail::aligned(16, x, codes, staging.data);
  if (staged) {
    auto* staged_codes = static_cast<uint8_t*>(staging.data);
    auto* staged_scales =
        reinterpret_cast<float*>(staged_codes + staging_scales_offset(staging.tokens, hidden));
    launch_quantize_fp8_1x128(x, hidden, RowRange{staging.tokens}, staged_codes,
                              {staged_scales, blocks, 1}, stream);
    const kernels::Fp8GatherParams g{
        staged_codes,        staged_scales,  codes,           scales.data,  row_stride,
        scales.block_stride, hidden,         rows.max_rows,   rows.begin,   rows.end,
        source_row,          skip.row_group, skip.skip_begin, skip.skip_end};
    detail::launch_gather_fp8_1x128_kernel(g, stream);
    return;
  }
  const kernels::Fp8BlockParams k{x,
                                  codes,
                                  scales.data,
                                  row_stride,
                                  scales.block_stride,
                                  hidden,
                                  rows.max_rows,
                                  rows.begin,
                                  rows.end,
                                  source_row,
                                  skip.row_group,
                                  skip.skip_begin,
                                  skip.skip_end,
                                  rows.list,
                                  rows.list_count};
  const bool vec = hidden % 8 == 0 && detail::aligned(16, x) && detail::aligned(8, codes);
  detail::launch_fp8_1x128_kernel(k, vec, stream);
}

size_t quantize_fp8_tensor_workspace_bytes() {
  return 256;  // one uint32 amax, padded to the allocation granule
}

void launch_quantize_fp8_tensor_dynamic(const uint16_t* x, int64_t hidden, const RowRange& rows,
                                        uint8_t* codes, float* scale, void* workspace,
                                        cudaStream_t stream) {
  tensor_dynamic(x, hidden, rows, codes, scale, workspace, stream);
}

void launch_quantize_fp8_tensor_dynamic(const float* x, int64_t hidden, const RowRange& rows,
                                        uint8_t* codes, float* scale, void* workspace,
                                        cudaStream_t stream) {
  tensor_dynamic(x, hidden, rows, codes, scale, workspace, stream);
}

void launch_quantize_fp8_tensor_static(const uint16_t* x, int64_t hidden, const RowRange& rows,
                                       const float* scale, uint8_t* codes, cudaStream_t stream) {
  tensor_static(x, hidden, rows, scale, codes, stream);
}

void launch_quantize_fp8_tensor_static(const float* x, int64_t hidden, const RowRange& rows,
                                       const float* scale, uint8_t* codes, cudaStream_t stream) {
  tensor_static(x, hidden, rows, scale, codes, stream);
}

void launch_quantize_fp8_tensor_from_amax(const float* x, int64_t hidden, const RowRange& rows,
                                          const uint32_t* amax_bits, uint8_t* codes, float* scale,
                                          cudaStream_t stream) {
  check_rows("quantize_fp8_tensor_from_amax", x, hidden, rows, codes);
  MOE_CHECK(amax_bits != nullptr && scale != nullptr, kInvalid,
            "quantize_fp8_tensor_from_amax: amax_bits and scale must be given");
  // The kernel only reads the amax (the parameter block has one pointer for both uses).
  launch_tensor(x, hidden, rows, codes, const_cast<uint32_t*>(amax_bits), nullptr, scale, stream,
                true);
}

}  // namespace moe::gpu
