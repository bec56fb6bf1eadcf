// Dynamic shared memory above the default 48 KB is opted into per kernel with
// cudaFuncSetAttribute, and the attribute belongs to the kernel as loaded in one device's
// context: set once per process, a layer on a second device would launch without it (an
// "invalid argument" launch). opt_in_dynamic_smem sets it once per (kernel, device), again only for
// a larger size (a smaller one is within the limit set), and remembers only successes, so a failure
// is tried again at the next launch. Header only: the launchers that call it live in libraries that
// do not all link common_cuda's.
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <utility>

namespace moe::gpu {

// `bytes` of dynamic shared memory for `kernel` on the current device. noexcept: the launchers
// that call it return their errors as values.
inline cudaError_t opt_in_dynamic_smem(const void* kernel, int bytes) noexcept {
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  try {
    // Leaked on purpose: a launch during static destruction must still find them.
    static std::mutex& mutex = *new std::mutex;
    static auto& set_to = *new std::map<std::pair<const void*, int>, int>;  // the largest set
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = set_to.find({kernel, device});
    if (it != set_to.end() && it->second >= bytes) return cudaSuccess;
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e == cudaSuccess) set_to[{kernel, device}] = bytes;
    return e;
  } catch (...) {  // std::bad_alloc, std::system_error from the mutex
    return cudaErrorMemoryAllocation;
  }
}

template <class Kernel>
cudaError_t opt_in_dynamic_smem(Kernel* kernel, int bytes) noexcept {
  return opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes);
}

}  // namespace moe::gpu
