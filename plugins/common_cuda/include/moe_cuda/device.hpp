// The current CUDA device as the GPU plugins see it, a check that turns a failed runtime call into
// moe::Error, and device memory that frees itself. Host code only (no kernels).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

namespace moe::gpu {

struct DeviceInfo {
  bool present = false;  // a device answered; each plugin adds its own arch rule
  std::string why_not;   // when !present: no device, or the query failed
  int device = 0;        // the current device when first asked
  std::string name;
  int major = 0, minor = 0;
  int sm_count = 0;
  size_t total_memory = 0;  // bytes
};

// Queried once per process (cached): cudaGetDeviceProperties costs milliseconds.
const DeviceInfo& device_info();

// For plugins whose kernels are built for sm_90a only (wgmma, TMA; they run on Hopper and
// nowhere else): empty when the current device is an sm_90 one, else why not (no device, or the
// device and its architecture).
const std::string& sm90a_refusal();

// Throws moe::Error(DEVICE_ERROR) naming `what` unless `e` is cudaSuccess.
void check_cuda(cudaError_t e, const char* what);

// Makes `device` current for a scope and gives the thread's current CUDA context back at its
// end (a plugin's host thread may be the caller's: torch and the caller's own allocations follow
// the current device). The context, not the device: a thread with none current (a fresh worker)
// is left with none, where setting "device 0" back would create a context on GPU 0.
// DEVICE_ERROR when `device` cannot be set.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  void* previous_ = nullptr;  // CUcontext; restored only when it could be read
  bool restore_ = false;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { reserve(bytes); }
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  // Grow-only: reallocates (contents lost) when smaller than `bytes`. OUT_OF_MEMORY names the
  // size when the device has no room.
  void reserve(size_t bytes);
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

}  // namespace moe::gpu
