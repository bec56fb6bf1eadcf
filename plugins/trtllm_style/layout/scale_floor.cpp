#include "scale_floor.hpp"

#include <cstring>

#include "moe/sdk/error.hpp"

namespace moe::trtllm {

int64_t raise_small_scales(Bytes& scales, float floor) {
  MOE_CHECK(scales.size() % sizeof(float) == 0, MOE_STATUS_INVALID_ARGUMENT,
            "scale floor: {} bytes is not a whole number of f32 scales", scales.size());
  int64_t raised = 0;
  for (size_t off = 0; off < scales.size(); off += sizeof(float)) {
    float v;
    std::memcpy(&v, scales.data() + off, sizeof v);
    if (v < floor) {
      std::memcpy(scales.data() + off, &floor, sizeof floor);
      ++raised;
    }
  }
  return raised;
}

}  // namespace moe::trtllm
