#include "moe/sdk/block_scales.hpp"

#include <cmath>

#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"

namespace moe::sdk {

std::vector<float> checked_tensor_scales(const moe_tensor& scales, std::string_view name,
                                         int64_t count) {
  MOE_CHECK(scales.dtype == MOE_DTYPE_F32 && scales.data != nullptr, MOE_STATUS_INVALID_ARGUMENT,
            "{}: f32 scales expected", name);
  check_scale_values(scales.data, MOE_DTYPE_F32, count, name);
  const auto* in = static_cast<const float*>(scales.data);
  return std::vector<float>(in, in + count);
}

void check_scale_values(const void* data, moe_dtype dtype, int64_t count, std::string_view name) {
  if (count <= 0) return;
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (dtype == MOE_DTYPE_F32) {
    for (int64_t i = 0; i < count; ++i) {
      const float s = static_cast<const float*>(data)[i];
      MOE_CHECK(std::isfinite(s) && s > 0.0f, MOE_STATUS_INVALID_ARGUMENT,
                "{}[{}] = {} is not a finite positive scale", name, i, s);
    }
  } else if (dtype == MOE_DTYPE_UE8M0) {
    for (int64_t i = 0; i < count; ++i)
      MOE_CHECK(bytes[i] != 0xff, MOE_STATUS_INVALID_ARGUMENT, "{}[{}] is the ue8m0 NaN code 0xff",
                name, i);
  } else if (dtype == MOE_DTYPE_E4M3) {
    for (int64_t i = 0; i < count; ++i) {
      const double s = e4m3_to_double(bytes[i]);
      MOE_CHECK(!std::isnan(s) && s >= 0, MOE_STATUS_INVALID_ARGUMENT,
                "{}[{}] = {} (e4m3 code 0x{:02x}) is not a block scale (NaN or negative)", name, i,
                s, bytes[i]);
    }
  }
}

std::vector<float> checked_block_scales(const moe_tensor& scales, std::string_view name,
                                        int64_t matrices, int64_t n_blocks, int64_t k_blocks,
                                        BlockScaleOrder order) {
  MOE_CHECK(scales.dtype == MOE_DTYPE_F32 && scales.data != nullptr, MOE_STATUS_INVALID_ARGUMENT,
            "{}: f32 block scales expected", name);
  const size_t per_matrix = size_t(n_blocks * k_blocks);
  std::vector<float> out(size_t(matrices) * per_matrix);
  const auto* in = static_cast<const float*>(scales.data);
  for (int64_t m = 0; m < matrices; ++m) {
    const float* src = in + size_t(m) * per_matrix;
    float* dst = out.data() + size_t(m) * per_matrix;
    for (int64_t nb = 0; nb < n_blocks; ++nb) {
      for (int64_t kb = 0; kb < k_blocks; ++kb) {
        const float s = src[nb * k_blocks + kb];
        MOE_CHECK(std::isfinite(s) && s > 0.0f, MOE_STATUS_INVALID_ARGUMENT,
                  "{}[{}][{}][{}] = {} is not a finite positive block scale", name, m, nb, kb, s);
        const int64_t at =
            order == BlockScaleOrder::kKMajor ? nb * k_blocks + kb : kb * n_blocks + nb;
        dst[at] = s < kBlockScaleFloor ? kBlockScaleFloor : s;
      }
    }
  }
  return out;
}

}  // namespace moe::sdk
