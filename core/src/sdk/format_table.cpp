#include "moe/sdk/format_table.hpp"

#include <algorithm>

#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"

namespace moe {
namespace {

// The table's quantisers over the codecs of formats.hpp (which name their outputs per format).
void table_quantize_bf16(const float* w, int64_t rows, int64_t cols, void* q, void*, float*) {
  auto* out = static_cast<uint16_t*>(q);
  for (int64_t i = 0; i < rows * cols; ++i) out[i] = float_to_bf16(w[i]);
}
void table_quantize_fp8_tensor(const float* w, int64_t rows, int64_t cols, void* q, void* scales,
                               float*) {
  static_cast<float*>(scales)[0] =
      moe::quantize_fp8_tensor(w, rows, cols, static_cast<uint8_t*>(q));
}
void table_quantize_fp8_block(const float* w, int64_t rows, int64_t cols, void* q, void* scales,
                              float*) {
  moe::quantize_fp8_block(w, rows, cols, static_cast<uint8_t*>(q), static_cast<float*>(scales));
}
void table_quantize_mxfp8(const float* w, int64_t rows, int64_t cols, void* q, void* scales,
                          float*) {
  moe::quantize_mxfp8(w, rows, cols, static_cast<uint8_t*>(q), static_cast<uint8_t*>(scales));
}
void table_quantize_mxfp4(const float* w, int64_t rows, int64_t cols, void* q, void* scales,
                          float*) {
  moe::quantize_mxfp4(w, rows, cols, static_cast<uint8_t*>(q), static_cast<uint8_t*>(scales));
}
void table_quantize_nvfp4(const float* w, int64_t rows, int64_t cols, void* q, void* scales,
                          float* scale_2) {
  *scale_2 = nvfp4_scale_2(w, rows * cols);
  moe::quantize_nvfp4(w, rows, cols, *scale_2, static_cast<uint8_t*>(q),
                      static_cast<uint8_t*>(scales));
}

constexpr auto kNone = MOE_DTYPE_INVALID;

// In moe_format order (checked below). Tolerances: bf16 weights leave only bf16 rounding of the
// output and intermediate; every quantised format adds activation quantisation on top.
constexpr FormatSpec kFormats[] = {
    {MOE_FORMAT_BF16,
     "bf16",
     MOE_DTYPE_BF16,
     false,
     kNone,
     0,
     0,
     false,
     MOE_INPUT_BF16,
     1e-2,
     {nullptr, nullptr},
     kNone,
     nullptr,
     table_quantize_bf16,
     dequantize_bf16},
    {MOE_FORMAT_FP8_TENSOR,
     "fp8_tensor",
     MOE_DTYPE_E4M3,
     false,
     MOE_DTYPE_F32,
     0,
     0,
     false,
     MOE_INPUT_FP8_TENSOR_DYNAMIC,
     2e-2,
     {"weight_scale", nullptr},
     MOE_DTYPE_F32,
     nullptr,
     table_quantize_fp8_tensor,
     dequantize_fp8_tensor},
    {MOE_FORMAT_FP8_BLOCK,
     "fp8_block",
     MOE_DTYPE_E4M3,
     false,
     MOE_DTYPE_F32,
     kFp8BlockSize,
     kFp8BlockSize,
     false,
     MOE_INPUT_FP8_1X128,
     2e-2,
     {"weight_scale_inv", "weight_scale"},
     MOE_DTYPE_F32,
     nullptr,
     table_quantize_fp8_block,
     dequantize_fp8_block},
    {MOE_FORMAT_MXFP8,
     "mxfp8",
     MOE_DTYPE_E4M3,
     false,
     MOE_DTYPE_UE8M0,
     1,
     kMxBlockSize,
     false,
     MOE_INPUT_MXFP8,
     2e-2,
     {"weight_scale", nullptr},
     MOE_DTYPE_U8,
     nullptr,
     table_quantize_mxfp8,
     dequantize_mxfp8},
    {MOE_FORMAT_MXFP4,
     "mxfp4",
     MOE_DTYPE_E2M1X2,
     true,
     MOE_DTYPE_UE8M0,
     1,
     kMxBlockSize,
     false,
     MOE_INPUT_BF16,
     2e-2,
     {"weight_scale", nullptr},
     MOE_DTYPE_U8,
     nullptr,
     table_quantize_mxfp4,
     dequantize_mxfp4},
    {MOE_FORMAT_NVFP4,
     "nvfp4",
     MOE_DTYPE_E2M1X2,
     true,
     MOE_DTYPE_E4M3,
     1,
     kNvfp4BlockSize,
     true,
     MOE_INPUT_BF16,
     2e-2,
     {"weight_scale", nullptr},
     MOE_DTYPE_E4M3,
     "weight_scale_2",
     table_quantize_nvfp4,
     dequantize_nvfp4},
};

constexpr bool in_enum_order() {
  for (size_t i = 0; i < std::size(kFormats); ++i)
    if (kFormats[i].format != static_cast<moe_format>(i)) return false;
  return true;
}
static_assert(in_enum_order(), "kFormats rows must follow moe_format's values");

}  // namespace

std::span<const FormatSpec> format_table() {
  return kFormats;
}

const FormatSpec* find_format(int32_t format) {
  return format >= 0 && size_t(format) < std::size(kFormats) ? &kFormats[format] : nullptr;
}

const FormatSpec& format_spec(moe_format format) {
  const FormatSpec* f = find_format(format);
  if (f == nullptr)
    MOE_REFUSE(MOE_REASON_FORMAT, "format={} is not a weight format this build knows ({})",
               int(format), format_names());
  return *f;
}

int64_t k_granularity(const FormatSpec& f) {
  const int64_t block = f.scale_block_k > 0 ? f.scale_block_k : 1;
  return f.packed_fp4 ? std::max<int64_t>(block, 2) : block;
}

void quantize_matrix(moe_format format, const float* w, int64_t rows, int64_t cols, void* q,
                     void* scales, float* scale_2) {
  const FormatSpec& f = format_spec(format);
  MOE_CHECK(rows >= 0 && cols >= 0, MOE_STATUS_INVALID_ARGUMENT,
            "matrix shape [{}, {}] has a negative dimension", rows, cols);
  MOE_CHECK(f.scale == MOE_DTYPE_INVALID || scales != nullptr, MOE_STATUS_INVALID_ARGUMENT,
            "quantize_matrix: format {} needs a scale buffer, got NULL", f.name);
  MOE_CHECK(!f.scale_2 || scale_2 != nullptr, MOE_STATUS_INVALID_ARGUMENT,
            "quantize_matrix: format {} needs a scale_2 output, got NULL", f.name);
  f.quantize(w, rows, cols, q, scales, scale_2);
}

void dequantize_matrix(moe_format format, const void* q, const void* scales, float scale_2,
                       int64_t rows, int64_t cols, double* out) {
  const FormatSpec& f = format_spec(format);
  MOE_CHECK(f.scale == MOE_DTYPE_INVALID || scales != nullptr, MOE_STATUS_INVALID_ARGUMENT,
            "dequantize_matrix: format {} needs scales, got NULL", f.name);
  f.dequantize(q, scales, scale_2, rows, cols, out);
}

}  // namespace moe
