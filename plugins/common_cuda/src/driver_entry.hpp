// A CUDA driver function through the runtime's entry point query, so that no plugin links
// libcuda itself: nullptr where the driver lacks it (the caller says what that means).
#pragma once

#include <cuda_runtime_api.h>

namespace moe::gpu {

template <class Fn>
Fn driver_entry(const char* name) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Fn>(f);
}

}  // namespace moe::gpu
