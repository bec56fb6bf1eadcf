// The CUDA device as the GPU oracle sees it (any device cuBLAS runs on), checks that turn CUDA
// and cuBLAS failures into moe::Error, and device memory that frees itself.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace moe::gpu_oracle {

struct DeviceInfo {
  bool usable = false;
  std::string why_not;  // when !usable: no device, or the query failed
  int device = 0;       // the current device when first asked
  std::string name;
  size_t total_memory = 0;  // bytes
};

// Queried once per process (cached).
const DeviceInfo& device_info();

// Throw moe::Error(DEVICE_ERROR) naming `what` unless the call succeeded.
void check_cuda(cudaError_t e, const char* what);
void check_cublas(cublasStatus_t s, const char* what);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { reserve(bytes); }
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  // Grow-only: reallocates (contents lost) when smaller than `bytes`.
  void reserve(size_t bytes);
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace moe::gpu_oracle
