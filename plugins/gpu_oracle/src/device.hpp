// The CUDA device as the GPU oracle sees it: any device the runtime accepts (cuBLAS SGEMM and
// copies only), from the shared GPU library; and a check that turns cuBLAS failures into
// moe::Error.
#pragma once

#include <cublas_v2.h>

#include "moe_cuda/device.hpp"

namespace moe::gpu_oracle {

using gpu::check_cuda;
using gpu::device_info;
using gpu::DeviceBuffer;
using gpu::DeviceInfo;

// Throws moe::Error(DEVICE_ERROR) naming `what` unless the call succeeded.
void check_cublas(cublasStatus_t s, const char* what);

}  // namespace moe::gpu_oracle
