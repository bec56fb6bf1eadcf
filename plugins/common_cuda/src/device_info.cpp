#include <cuda.h>
#include <fmt/format.h>

#include <utility>

#include "driver_entry.hpp"
#include "moe/sdk/error.hpp"
#include "moe_cuda/device.hpp"

namespace moe::gpu {

const DeviceInfo& device_info() {
  static const DeviceInfo info = [] {
    DeviceInfo d;
    int count = 0;
    if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
      d.why_not = e == cudaErrorInsufficientDriver
                      ? std::string(
                            "no CUDA device: no usable CUDA driver (libcuda is missing, or "
                            "older than the CUDA runtime this plugin was built with)")
                  : e != cudaSuccess ? fmt::format("no CUDA device ({})", cudaGetErrorString(e))
                                     : std::string("no CUDA device");
      cudaGetLastError();  // clear the sticky error of a failed query
      return d;
    }
    cudaGetDevice(&d.device);
    cudaDeviceProp prop{};
    if (cudaError_t e = cudaGetDeviceProperties(&prop, d.device); e != cudaSuccess) {
      d.why_not = fmt::format("cannot query CUDA device {}: {}", d.device, cudaGetErrorString(e));
      cudaGetLastError();
      return d;
    }
    d.present = true;
    d.name = prop.name;
    d.major = prop.major;
    d.minor = prop.minor;
    d.sm_count = prop.multiProcessorCount;
    d.total_memory = prop.totalGlobalMem;
    return d;
  }();
  return info;
}

const std::string& sm90a_refusal() {
  static const std::string why = [] {
    const DeviceInfo& d = device_info();
    if (!d.present) return d.why_not;
    if (d.major == 9 && d.minor == 0) return std::string();
    return fmt::format("needs an sm_90 (Hopper) GPU; device {} ({}) is sm_{}{}", d.device, d.name,
                       d.major, d.minor);
  }();
  return why;
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    MOE_FAIL(MOE_STATUS_DEVICE_ERROR, "{} failed: {}", what, cudaGetErrorString(e));
}

namespace {
using CtxGetCurrent = CUresult (*)(CUcontext*);
using CtxSetCurrent = CUresult (*)(CUcontext);
}  // namespace

DeviceScope::DeviceScope(int device) {
  static const CtxGetCurrent get = driver_entry<CtxGetCurrent>("cuCtxGetCurrent");
  CUcontext context = nullptr;
  restore_ = get != nullptr && get(&context) == CUDA_SUCCESS;
  previous_ = context;
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
}

DeviceScope::~DeviceScope() {
  static const CtxSetCurrent set = driver_entry<CtxSetCurrent>("cuCtxSetCurrent");
  if (restore_ && set != nullptr) (void)set(static_cast<CUcontext>(previous_));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

void DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_) return;
  if (ptr_) cudaFree(std::exchange(ptr_, nullptr));
  bytes_ = 0;
  const cudaError_t e = cudaMalloc(&ptr_, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    ptr_ = nullptr;
    MOE_FAIL(MOE_STATUS_OUT_OF_MEMORY, "cannot allocate {} bytes of device memory", bytes);
  }
  check_cuda(e, "cudaMalloc");
  bytes_ = bytes;
}

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  MOE_CHECK(offset + bytes <= bytes_, MOE_STATUS_INTERNAL, "upload past the end of a buffer");
  if (bytes)
    check_cuda(cudaMemcpy(static_cast<char*>(ptr_) + offset, host, bytes, cudaMemcpyHostToDevice),
               "cudaMemcpy");
}

}  // namespace moe::gpu
