#include "block_scales.hpp"

#include <cmath>
#include <cstring>

#include "moe/sdk/error.hpp"

namespace moe::deepgemm {

std::vector<float> mn_major_block_scales(const moe_tensor& scales, const char* name,
                                         int64_t matrices, int64_t n_blocks, int64_t k_blocks) {
  MOE_CHECK(scales.dtype == MOE_DTYPE_F32 && scales.data != nullptr, MOE_STATUS_INVALID_ARGUMENT,
            "{}: f32 block scales expected", name);
  const size_t per_matrix = size_t(n_blocks * k_blocks);
  std::vector<float> out(size_t(matrices) * per_matrix);
  const auto* in = static_cast<const float*>(scales.data);
  for (int64_t m = 0; m < matrices; ++m) {
    const float* src = in + size_t(m) * per_matrix;    // [n_blocks, k_blocks]
    float* dst = out.data() + size_t(m) * per_matrix;  // [k_blocks, n_blocks]
    for (int64_t nb = 0; nb < n_blocks; ++nb) {
      for (int64_t kb = 0; kb < k_blocks; ++kb) {
        const float s = src[nb * k_blocks + kb];
        MOE_CHECK(std::isfinite(s) && s > 0.0f, MOE_STATUS_INVALID_ARGUMENT,
                  "{}[{}][{}][{}] = {} is not a finite positive block scale", name, m, nb, kb, s);
        dst[kb * n_blocks + nb] = s < kScaleFloor ? kScaleFloor : s;
      }
    }
  }
  return out;
}

}  // namespace moe::deepgemm
