// Error checking for CUDA calls and launches inside the GPU plugins. A failed call throws
// moe::Error(MOE_STATUS_DEVICE_ERROR), which the plugin's ABI guard turns into a status.
#pragma once

#include <cuda_runtime_api.h>

namespace moe::gpu {

// Throws moe::Error(MOE_STATUS_DEVICE_ERROR, "<expr> failed: <cudaGetErrorString> at file:line").
// Defined in a g++-compiled file: moe/error.hpp (fmt) does not go through nvcc.
[[noreturn]] void throw_cuda_error(cudaError_t error, const char* expr, const char* file, int line);

}  // namespace moe::gpu

// Every CUDA runtime call goes through this; never compiled out.
#define MOE_CUDA_CHECK(expr)                                                    \
  do {                                                                          \
    const cudaError_t moe_cuda_error_ = (expr);                                 \
    if (moe_cuda_error_ != cudaSuccess)                                         \
      ::moe::gpu::throw_cuda_error(moe_cuda_error_, #expr, __FILE__, __LINE__); \
  } while (0)

// After every <<<...>>>: a bad configuration shows up here, not at the next sync.
#define MOE_CUDA_CHECK_LAUNCH() MOE_CUDA_CHECK(cudaGetLastError())
