// The CUDA device as the plugin sees it: whether it can run (sm_90), its multiprocessor count,
// device memory that frees itself, and the memory entries of the function table.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

namespace moe::trtllm {

struct DeviceInfo {
  bool usable = false;
  std::string why_not;  // when !usable: no device, or not sm_90
  int sm_count = 0;
  int major = 0, minor = 0;
};

// Queried once per process (cached): cudaGetDeviceProperties costs milliseconds.
const DeviceInfo& device_info();

// Throws moe::Error(DEVICE_ERROR) naming `what` unless `e` is cudaSuccess.
void check_cuda(cudaError_t e, const char* what);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  // Synchronous copy from the host (prepare time only).
  void upload(const void* host, size_t bytes, size_t offset = 0);

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

template <class T>
DeviceBuffer upload_vector(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(T));
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

}  // namespace moe::trtllm
