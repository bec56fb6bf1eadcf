#include "ep/id_columns.hpp"

#include <cstring>

#include "device/cuda_driver.hpp"
#include "moe/sdk/error.hpp"

namespace moe::ep {
// Where no driver loads (a machine without a GPU), or the driver was never initialised or has no
// device, no pointer can be device memory. Any other failure of the query is an error: guessing
// "host" would have the step write a device buffer from the host.
bool is_device_memory(const void* p) {
  const device::CudaDriver* d = nullptr;
  try {
    d = &device::cuda_driver();
  } catch (const Error&) {
    return false;
  }
  unsigned type = 0;
  int attribute = device::kPointerMemoryType;
  void* data[] = {&type};
  const auto at = reinterpret_cast<uint64_t>(p);
  const int r = d->pointer_get_attributes(1, &attribute, data, at);
  if (r == device::kErrorNotInitialized || r == device::kErrorDeinitialized ||
      r == device::kErrorNoDevice)
    return false;
  device::check_driver(*d, r, "cuPointerGetAttributes (where the expert-parallel ids live)");
  return type == device::kMemoryTypeDevice;
}

void clear_id_columns(bool on_device, int32_t* ids, int64_t rows, int64_t width, int64_t first,
                      int64_t count, void* stream) {
  if (rows == 0 || count == 0) return;
  MOE_CHECK(first >= 0 && count > 0 && first + count <= width, MOE_STATUS_INTERNAL,
            "id columns [{}, {}) outside a row of {}", first, first + count, width);
  if (on_device) {
    const device::CudaDriver* d = &device::cuda_driver();
    MOE_CHECK(d->memset_d2d32_async != nullptr, MOE_STATUS_UNSUPPORTED,
              "the NVIDIA driver {} lacks cuMemsetD2D32Async", d->library);
    device::check_driver(
        *d,
        d->memset_d2d32_async(reinterpret_cast<uint64_t>(ids + first), size_t(width) * 4,
                              0xffffffffu, size_t(count), size_t(rows), stream),
        "cuMemsetD2D32Async (id columns)");
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = first; c < first + count; ++c) ids[r * width + c] = -1;
}

void copy_in_stream(bool on_device, void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  if (on_device) {
    const device::CudaDriver* d = &device::cuda_driver();
    MOE_CHECK(d->memcpy_dtod_async != nullptr, MOE_STATUS_UNSUPPORTED,
              "the NVIDIA driver {} lacks cuMemcpyDtoDAsync", d->library);
    device::check_driver(*d,
                         d->memcpy_dtod_async(reinterpret_cast<uint64_t>(dst),
                                              reinterpret_cast<uint64_t>(src), bytes, stream),
                         "cuMemcpyDtoDAsync (expert-parallel step)");
    return;
  }
  std::memcpy(dst, src, bytes);
}

}  // namespace moe::ep
