#include "device.hpp"

#include "moe/sdk/error.hpp"

namespace moe::gpu_oracle {

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    MOE_FAIL(MOE_STATUS_DEVICE_ERROR, "{} failed: {} ({})", what, cublasGetStatusName(s),
             cublasGetStatusString(s));
}

}  // namespace moe::gpu_oracle
