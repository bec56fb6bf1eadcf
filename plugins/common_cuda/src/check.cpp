#include "moe_cuda/check.hpp"

#include "moe/sdk/error.hpp"

namespace moe::gpu {

void throw_cuda_error(cudaError_t error, const char* expr, const char* file, int line) {
  throw Error(MOE_STATUS_DEVICE_ERROR,
              fmt::format("{} failed: {} at {}:{}", expr, cudaGetErrorString(error), file, line));
}

}  // namespace moe::gpu
