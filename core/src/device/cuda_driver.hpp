// The CUDA driver API, loaded at run time (dlopen libcuda.so.1) and only when the core itself must
// touch device memory that no plugin owns (weights the caller keeps on a GPU, the EP layer's
// completion polling): the core and libmoe_core start, and prepare host weights, on machines
// without a GPU or a driver. The driver's C types are spelled out (CUresult, CUdevice: int;
// CUcontext, CUstream: void*; CUdeviceptr: uint64_t), so building this needs no CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace moe::device {

// cuPointerGetAttributes's attributes and memory types (cuda.h's values, stable since CUDA 4-10).
constexpr int kPointerMemoryType = 2;        // CU_POINTER_ATTRIBUTE_MEMORY_TYPE: unsigned
constexpr int kPointerDeviceOrdinal = 9;     // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: int
constexpr int kPointerRangeStart = 11;       // CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: uint64_t
constexpr int kPointerRangeSize = 12;        // CU_POINTER_ATTRIBUTE_RANGE_SIZE: size_t
constexpr unsigned kMemoryTypeHost = 1;      // CU_MEMORYTYPE_HOST
constexpr unsigned kMemoryTypeDevice = 2;    // CU_MEMORYTYPE_DEVICE
constexpr int kErrorInvalidContext = 201;    // CUDA_ERROR_INVALID_CONTEXT: no current context
constexpr int kErrorNotInitialized = 3;      // CUDA_ERROR_NOT_INITIALIZED: cuInit not called
constexpr int kErrorDeinitialized = 4;       // CUDA_ERROR_DEINITIALIZED: the driver shut down
constexpr int kErrorNoDevice = 100;          // CUDA_ERROR_NO_DEVICE
constexpr unsigned kStreamNonBlocking = 1;   // CU_STREAM_NON_BLOCKING
constexpr int kCaptureThreadLocal = 1;       // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
constexpr unsigned kEventDisableTiming = 2;  // CU_EVENT_DISABLE_TIMING

struct CudaDriver {
  int (*device_get_count)(int* count);
  int (*ctx_get_device)(int* device);  // the calling thread's current context's device
  int (*primary_ctx_retain)(void** ctx, int device);
  int (*primary_ctx_release)(int device);
  int (*ctx_push)(void* ctx);
  int (*ctx_pop)(void** ctx);
  int (*pointer_get_attributes)(unsigned count, int* attributes, void** data, uint64_t ptr);
  int (*memcpy_dtoh_async)(void* dst, uint64_t src, size_t bytes, void* stream);
  int (*stream_synchronize)(void* stream);
  int (*stream_query)(void* stream);  // 0 done, 600 (CUDA_ERROR_NOT_READY) not yet
  int (*error_name)(int result, const char** name);
  // Streams and graphs (ep::StepGraph); null where the driver lacks them (older than CUDA 11.4).
  int (*stream_create)(void** stream, unsigned flags);
  int (*stream_destroy)(void* stream);
  int (*stream_begin_capture)(void* stream, int mode);
  int (*stream_end_capture)(void* stream, void** graph);
  int (*graph_instantiate)(void** exec, void* graph, unsigned long long flags);
  int (*graph_launch)(void* exec, void* stream);
  int (*graph_exec_destroy)(void* exec);
  int (*graph_destroy)(void* graph);
  // Stream-ordered device memory edits (ep::DeviceStep's id columns); null where missing.
  int (*memset_d2d32_async)(uint64_t dst, size_t pitch, unsigned value, size_t width, size_t height,
                            void* stream);
  int (*memcpy_dtod_async)(uint64_t dst, uint64_t src, size_t bytes, void* stream);
  // Events between streams (ep::DeviceStep's chunked overlap); null where missing.
  int (*event_create)(void** event, unsigned flags);
  int (*event_record)(void* event, void* stream);
  int (*event_destroy)(void* event);
  int (*stream_wait_event)(void* stream, void* event, unsigned flags);
  std::string library;  // the file loaded
};

// Loads the driver once per process and initialises it (cuInit). Throws moe::Error: NOT_FOUND
// naming libcuda.so.1 where it cannot be loaded (no NVIDIA driver), DEVICE_ERROR with the
// driver's error name where cuInit fails (CUDA_ERROR_NO_DEVICE on a machine without a GPU).
const CudaDriver& cuda_driver();

// Whether the driver library is in the process already (a plugin's CUDA runtime, or a framework,
// loaded it), without loading it: where it is not, no pointer can be device memory. True while a
// test's driver is set.
bool cuda_driver_in_process();

// Tests: a driver cuda_driver() hands out instead of the loaded one (nullptr: the loaded one
// again). Set it before the code under test runs and clear it after; not for concurrent use.
void set_cuda_driver_for_tests(const CudaDriver* driver);

// "CUDA_ERROR_INVALID_VALUE (1)": a driver result for a message.
std::string driver_error(const CudaDriver& driver, int result);

// Throws DEVICE_ERROR "<what> failed: <driver_error>" unless `result` is 0 (CUDA_SUCCESS).
void check_driver(const CudaDriver& driver, int result, const char* what);

// cuPointerGetAttributes's memory type in words, e.g. "CUDA device memory" (0: plain host memory).
const char* memory_type_name(unsigned type);

// The calling thread's current CUDA device, as a plugin's CUDA runtime sees it: that of the
// current context, else 0 (the runtime's default device for a thread that set none).
int32_t current_device(const CudaDriver& driver);

// The primary context of one device (the one a plugin's CUDA runtime uses), current on this
// thread while the scope lives.
class ContextScope {
 public:
  ContextScope(const CudaDriver& d, int32_t device);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const CudaDriver& d_;
  int32_t device_;
  void* ctx_ = nullptr;
};

}  // namespace moe::device
