#include "device/cuda_driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>
#include <mutex>

#include "moe/sdk/error.hpp"

namespace moe::device {
namespace {

constexpr const char* kLibrary = "libcuda.so.1";

template <class F>
void bind(void* lib, const char* symbol, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, symbol));
  MOE_CHECK(out != nullptr, MOE_STATUS_NOT_FOUND, "the NVIDIA driver {} has no symbol {}", kLibrary,
            symbol);
}

// A symbol that may be missing (left null).
template <class F>
void bind_optional(void* lib, const char* symbol, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, symbol));
}

CudaDriver load() {
  dlerror();
  // Never closed: a plugin on the device holds the same library for the process's life anyway.
  void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  MOE_CHECK(lib != nullptr, MOE_STATUS_NOT_FOUND,
            "the NVIDIA driver ({}) cannot be loaded here: {}", kLibrary, dlerror());
  CudaDriver d;
  d.library = kLibrary;
  int (*init)(unsigned) = nullptr;
  bind(lib, "cuInit", init);
  bind(lib, "cuDeviceGetCount", d.device_get_count);
  bind(lib, "cuCtxGetDevice", d.ctx_get_device);
  bind(lib, "cuDevicePrimaryCtxRetain", d.primary_ctx_retain);
  bind(lib, "cuDevicePrimaryCtxRelease_v2", d.primary_ctx_release);
  bind(lib, "cuCtxPushCurrent_v2", d.ctx_push);
  bind(lib, "cuCtxPopCurrent_v2", d.ctx_pop);
  bind(lib, "cuPointerGetAttributes", d.pointer_get_attributes);
  bind(lib, "cuMemcpyDtoHAsync_v2", d.memcpy_dtoh_async);
  bind(lib, "cuStreamSynchronize", d.stream_synchronize);
  bind(lib, "cuStreamQuery", d.stream_query);
  bind(lib, "cuGetErrorName", d.error_name);
  bind_optional(lib, "cuStreamCreate", d.stream_create);
  bind_optional(lib, "cuStreamDestroy_v2", d.stream_destroy);
  bind_optional(lib, "cuStreamBeginCapture_v2", d.stream_begin_capture);
  bind_optional(lib, "cuStreamEndCapture", d.stream_end_capture);
  bind_optional(lib, "cuGraphInstantiateWithFlags", d.graph_instantiate);
  bind_optional(lib, "cuGraphLaunch", d.graph_launch);
  bind_optional(lib, "cuGraphExecDestroy", d.graph_exec_destroy);
  bind_optional(lib, "cuGraphDestroy", d.graph_destroy);
  bind_optional(lib, "cuMemsetD2D32Async", d.memset_d2d32_async);
  bind_optional(lib, "cuMemcpyDtoDAsync_v2", d.memcpy_dtod_async);
  bind_optional(lib, "cuEventCreate", d.event_create);
  bind_optional(lib, "cuEventRecord", d.event_record);
  bind_optional(lib, "cuEventDestroy_v2", d.event_destroy);
  bind_optional(lib, "cuStreamWaitEvent", d.stream_wait_event);
  const int r = init(0);
  MOE_CHECK(r == 0, MOE_STATUS_DEVICE_ERROR, "the NVIDIA driver did not start (cuInit): {}",
            driver_error(d, r));
  return d;
}

}  // namespace

namespace {
std::atomic<const CudaDriver*> g_test_driver{nullptr};
}  // namespace

void set_cuda_driver_for_tests(const CudaDriver* driver) {
  g_test_driver = driver;
}

bool cuda_driver_in_process() {
  if (g_test_driver.load() != nullptr) return true;
  void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (lib == nullptr) return false;
  dlclose(lib);  // the reference RTLD_NOLOAD took
  return true;
}

const CudaDriver& cuda_driver() {
  if (const CudaDriver* d = g_test_driver.load()) return *d;
  static CudaDriver driver;
  static std::once_flag once;
  std::call_once(once, [] { driver = load(); });  // a throw leaves it for the next call to retry
  return driver;
}

std::string driver_error(const CudaDriver& driver, int result) {
  const char* name = nullptr;
  if (driver.error_name == nullptr || driver.error_name(result, &name) != 0 || name == nullptr)
    return fmt::format("CUDA driver error {}", result);
  return fmt::format("{} ({})", name, result);
}

ContextScope::ContextScope(const CudaDriver& d, int32_t device) : d_(d), device_(device) {
  int r = d_.primary_ctx_retain(&ctx_, device_);
  MOE_CHECK(r == 0, MOE_STATUS_DEVICE_ERROR, "cuDevicePrimaryCtxRetain(cuda:{}) failed: {}",
            device_, driver_error(d_, r));
  r = d_.ctx_push(ctx_);
  if (r != 0) {
    d_.primary_ctx_release(device_);
    MOE_FAIL(MOE_STATUS_DEVICE_ERROR, "cuCtxPushCurrent(cuda:{}) failed: {}", device_,
             driver_error(d_, r));
  }
}

ContextScope::~ContextScope() {
  void* popped = nullptr;
  d_.ctx_pop(&popped);
  d_.primary_ctx_release(device_);
}

void check_driver(const CudaDriver& driver, int result, const char* what) {
  MOE_CHECK(result == 0, MOE_STATUS_DEVICE_ERROR, "{} failed: {}", what,
            driver_error(driver, result));
}

int32_t current_device(const CudaDriver& driver) {
  int device = 0;
  const int r = driver.ctx_get_device(&device);
  if (r == kErrorInvalidContext) return 0;
  MOE_CHECK(r == 0, MOE_STATUS_DEVICE_ERROR, "cuCtxGetDevice failed: {}", driver_error(driver, r));
  return device;
}

const char* memory_type_name(unsigned type) {
  switch (type) {
    case kMemoryTypeHost:
      return "host memory registered with CUDA";
    case kMemoryTypeDevice:
      return "CUDA device memory";
    case 0:
      return "memory the driver does not know: plain host memory, or no allocation at all";
    default:
      return "a CUDA array or unified memory";
  }
}

}  // namespace moe::device
