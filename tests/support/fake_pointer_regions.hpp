// cuPointerGetAttributes for a fake CUDA driver (device::CudaDriver::pointer_get_attributes):
// host buffers a test lists as regions of memory of a type, on a device, maybe managed. Memory
// not listed answers as the driver answers memory it does not know: zeros, ordinal -2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "device/cuda_driver.hpp"

namespace moe::test {

struct FakeRegion {
  const void* start;
  size_t size;
  int device = 0;
  unsigned type = device::kMemoryTypeDevice;
  bool managed = false;
};

// The regions the fake answers for; each test sets its own.
inline std::vector<FakeRegion>& fake_regions() {
  static std::vector<FakeRegion> regions;
  return regions;
}

inline int fake_pointer_attributes(unsigned n, int* attributes, void** data, uint64_t ptr) {
  const auto* p = reinterpret_cast<const uint8_t*>(ptr);
  const FakeRegion* found = nullptr;
  for (const FakeRegion& r : fake_regions()) {
    const auto* start = static_cast<const uint8_t*>(r.start);
    if (p >= start && p < start + r.size) found = &r;
  }
  for (unsigned i = 0; i < n; ++i) {
    switch (attributes[i]) {
      case device::kPointerMemoryType:
        *static_cast<unsigned*>(data[i]) = found ? found->type : 0;
        break;
      case device::kPointerDeviceOrdinal:
        *static_cast<int*>(data[i]) = found ? found->device : -2;
        break;
      case device::kPointerRangeStart:
        *static_cast<uint64_t*>(data[i]) = found ? reinterpret_cast<uint64_t>(found->start) : 0;
        break;
      case device::kPointerRangeSize:
        *static_cast<size_t*>(data[i]) = found ? found->size : 0;
        break;
      case 8:  // CU_POINTER_ATTRIBUTE_IS_MANAGED: 4 bytes, as the driver writes them
        *static_cast<unsigned*>(data[i]) = found && found->managed ? 1u : 0u;
        break;
      default:
        return 1;  // CUDA_ERROR_INVALID_VALUE
    }
  }
  return 0;
}

}  // namespace moe::test
