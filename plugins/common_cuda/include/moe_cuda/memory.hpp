// Device memory services of a GPU plugin (moe_plugin_api.mem_alloc, mem_free, mem_copy,
// stream_sync), once for every plugin: a backend declares `using Memory = moe::gpu::CudaMemory;`
// and the SDK (moe/sdk/backend.hpp) puts these in its function table.
#pragma once

#include <cstddef>
#include <cstdint>

#include "moe/abi/moe_abi.h"

namespace moe::gpu {

struct CudaMemory {
  static constexpr moe_memory kind = MOE_MEMORY_CUDA_DEVICE;
  // OUT_OF_MEMORY naming the size when the device has no room.
  static void* alloc(size_t bytes);
  static void free(void* ptr);
  // `kind` is a moe_memcpy_kind; the copy is finished when this returns.
  static void copy(void* dst, const void* src, size_t bytes, int32_t kind, void* stream);
  static void sync(void* stream);
  // The CUDA runtime linked in, e.g. "13.0" (for moe_build_info).
  static const char* runtime_version();
  // The calling thread's current device (cudaGetDevice): the SDK records it at prepare and
  // refuses a run with another device current.
  static int32_t current_device();
};

}  // namespace moe::gpu
