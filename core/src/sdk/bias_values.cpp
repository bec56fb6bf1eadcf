#include "moe/sdk/bias_values.hpp"

#include <cstring>
#include <string>

#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/tensor_checks.hpp"

namespace moe::sdk {

std::vector<float> bias_values(const moe_tensor& bias, std::string_view name, int64_t count) {
  const auto dtype = static_cast<moe_dtype>(bias.dtype);
  int64_t numel = bias.data != nullptr ? 1 : 0;
  for (int32_t d = 0; d < bias.ndim; ++d) numel *= bias.shape[d];
  MOE_CHECK(bias.data != nullptr && (dtype == MOE_DTYPE_F32 || dtype == MOE_DTYPE_BF16) &&
                numel == count && is_contiguous(bias),
            MOE_STATUS_INVALID_ARGUMENT, "{} is {}; expected {} contiguous bf16 or f32 values",
            name, bias.data != nullptr ? tensor_str(bias) : std::string("absent"), count);
  std::vector<float> out(static_cast<size_t>(count));
  if (dtype == MOE_DTYPE_F32) {
    std::memcpy(out.data(), bias.data, out.size() * sizeof(float));
  } else {
    const auto* bits = static_cast<const uint16_t*>(bias.data);
    for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_float(bits[i]);
  }
  return out;
}

}  // namespace moe::sdk
