#include "moe_cuda/memory.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "moe/sdk/error.hpp"
#include "moe_cuda/device.hpp"

namespace moe::gpu {
namespace {

cudaMemcpyKind copy_kind(int32_t kind) {
  switch (static_cast<moe_memcpy_kind>(kind)) {
    case MOE_MEMCPY_HOST_TO_DEVICE:
      return cudaMemcpyHostToDevice;
    case MOE_MEMCPY_DEVICE_TO_HOST:
      return cudaMemcpyDeviceToHost;
    case MOE_MEMCPY_DEVICE_TO_DEVICE:
      return cudaMemcpyDeviceToDevice;
  }
  MOE_FAIL(MOE_STATUS_INVALID_ARGUMENT, "mem_copy: kind={} is not a moe_memcpy_kind", kind);
}

}  // namespace

void* CudaMemory::alloc(size_t bytes) {
  void* ptr = nullptr;
  const cudaError_t e = cudaMalloc(&ptr, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-free error so later calls are not blamed
    MOE_FAIL(MOE_STATUS_OUT_OF_MEMORY, "cannot allocate {} bytes of device memory", bytes);
  }
  check_cuda(e, "cudaMalloc");
  return ptr;
}

void CudaMemory::free(void* ptr) {
  check_cuda(cudaFree(ptr), "cudaFree");
}

void CudaMemory::copy(void* dst, const void* src, size_t bytes, int32_t kind, void* stream) {
  const cudaMemcpyKind k = copy_kind(kind);
  auto s = static_cast<cudaStream_t>(stream);
  check_cuda(cudaMemcpyAsync(dst, src, bytes, k, s), "cudaMemcpyAsync");
  check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

void CudaMemory::sync(void* stream) {
  check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

const char* CudaMemory::runtime_version() {
  static const std::string version =
      std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
  return version.c_str();
}

int32_t CudaMemory::current_device() {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

}  // namespace moe::gpu
