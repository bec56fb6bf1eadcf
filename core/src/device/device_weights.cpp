// Device weights to host copies (moe/device_weights.hpp): every tensor checked with the driver
// before a byte moves, so a wrong pointer, device or shape is an error naming the field rather
// than a fault inside cuMemcpy.
#include "moe/device_weights.hpp"

#include <fmt/format.h>

#include <array>
#include <limits>
#include <string>
#include <utility>

#include "device/cuda_driver.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/tensor_checks.hpp"
#include "moe/sdk/weights.hpp"

namespace moe {
namespace {

using device::ContextScope;
using device::CudaDriver;

// The bytes of a present tensor: a dtype, 0..MOE_TENSOR_MAX_DIMS extents >= 0, contiguous.
size_t tensor_bytes(const moe_tensor& t, const std::string& name) {
  MOE_CHECK(t.ndim >= 0 && t.ndim <= MOE_TENSOR_MAX_DIMS, MOE_STATUS_INVALID_ARGUMENT,
            "{}: ndim={} is outside [0, {}]", name, t.ndim, MOE_TENSOR_MAX_DIMS);
  size_t bytes = dtype_size(static_cast<moe_dtype>(t.dtype));
  MOE_CHECK(bytes > 0, MOE_STATUS_DTYPE_MISMATCH, "{}: dtype {} is not a moe_dtype", name, t.dtype);
  for (int32_t i = 0; i < t.ndim; ++i) {
    const int64_t d = t.shape[i];
    MOE_CHECK(d >= 0 && (d == 0 || bytes <= std::numeric_limits<size_t>::max() / size_t(d)),
              MOE_STATUS_SHAPE_MISMATCH, "{}: {} is not a shape", name, sdk::tensor_str(t));
    bytes *= size_t(d);
  }
  MOE_CHECK(sdk::is_contiguous(t), MOE_STATUS_INVALID_ARGUMENT,
            "{}: {} with strides ({}) is a non-contiguous view; pass a contiguous copy", name,
            sdk::tensor_str(t), fmt::join(t.strides, t.strides + t.ndim, ", "));
  return bytes;
}

// Where `t`'s bytes live, by the driver: device memory of `device`, all inside one allocation.
void check_on_device(const CudaDriver& d, const moe_tensor& t, size_t bytes, int32_t device,
                     const std::string& name) {
  unsigned type = 0;
  int ordinal = -1;
  uint64_t start = 0;
  size_t size = 0;
  int attributes[] = {device::kPointerMemoryType, device::kPointerDeviceOrdinal,
                      device::kPointerRangeStart, device::kPointerRangeSize};
  void* values[] = {&type, &ordinal, &start, &size};
  const auto at = reinterpret_cast<uint64_t>(t.data);
  const int r = d.pointer_get_attributes(4, attributes, values, at);
  MOE_CHECK(r == 0, MOE_STATUS_DEVICE_ERROR, "{}: cuPointerGetAttributes({:#x}) failed: {}", name,
            at, device::driver_error(d, r));
  MOE_CHECK(type == device::kMemoryTypeDevice, MOE_STATUS_INVALID_ARGUMENT,
            "{}: {:#x} is {}, but the weights are said to be on cuda:{}", name, at,
            device::memory_type_name(type), device);
  MOE_CHECK(ordinal == device, MOE_STATUS_INVALID_ARGUMENT,
            "{}: on cuda:{}, but the weights are said to be on cuda:{}", name, ordinal, device);
  MOE_CHECK(at >= start && at - start <= size && bytes <= size - (at - start),
            MOE_STATUS_SHAPE_MISMATCH,
            "{}: {} is {} bytes from {:#x}, past the end of its allocation ({} bytes from {:#x})",
            name, sdk::tensor_str(t), bytes, at, size, start);
}

}  // namespace

size_t StagedWeights::bytes() const {
  size_t n = 0;
  for (const HostTensor& t : copies_) n += t.bytes();
  return n;
}

namespace {

// The driver, or its absence said in the weights' terms.
const CudaDriver& driver_for_weights() {
  try {
    return device::cuda_driver();
  } catch (const Error& e) {
    throw Error(e.status(), fmt::format("weights in CUDA device memory: {}", e.what()));
  }
}

}  // namespace

StagedWeights stage_device_weights(const moe_weights& weights, int32_t device, void* stream) {
  return stage_device_weights(driver_for_weights(), weights, device, stream);
}

StagedWeights stage_device_weights(const CudaDriver& d, const moe_weights& weights, int32_t device,
                                   void* stream) {
  int count = 0;
  const int r = d.device_get_count(&count);
  MOE_CHECK(r == 0, MOE_STATUS_DEVICE_ERROR, "cuDeviceGetCount failed: {}",
            device::driver_error(d, r));
  MOE_CHECK(device >= 0 && device < count, MOE_STATUS_INVALID_ARGUMENT,
            "the weights are said to be on cuda:{}, but this process sees {} CUDA device(s)",
            device, count);
  const ContextScope scope(d, device);

  // Every tensor checked before any is copied: [field] bytes, 0 = absent or empty.
  std::array<size_t, kWeightFields.size()> bytes{};
  for (size_t i = 0; i < kWeightFields.size(); ++i) {
    const moe_tensor& t = weights.*kWeightFields[i].second;
    if (t.data == nullptr) continue;
    const std::string name = fmt::format("weights.{}", kWeightFields[i].first);
    bytes[i] = tensor_bytes(t, name);
    if (bytes[i] > 0) check_on_device(d, t, bytes[i], device, name);
  }

  StagedWeights out;
  out.weights_ = weights;
  out.copies_.reserve(kWeightFields.size());
  for (size_t i = 0; i < kWeightFields.size(); ++i) {
    const moe_tensor& t = weights.*kWeightFields[i].second;
    if (t.data == nullptr) continue;
    HostTensor& copy = out.copies_.emplace_back(static_cast<moe_dtype>(t.dtype),
                                                std::vector<int64_t>(t.shape, t.shape + t.ndim));
    if (bytes[i] > 0) {
      const int c =
          d.memcpy_dtoh_async(copy.raw(), reinterpret_cast<uint64_t>(t.data), bytes[i], stream);
      MOE_CHECK(c == 0, MOE_STATUS_DEVICE_ERROR, "weights.{}: the copy to the host failed: {}",
                kWeightFields[i].first, device::driver_error(d, c));
    }
    out.weights_.*kWeightFields[i].second = copy.view();
  }
  const int s = d.stream_synchronize(stream);
  MOE_CHECK(s == 0, MOE_STATUS_DEVICE_ERROR, "the weights' copies to the host failed: {}",
            device::driver_error(d, s));
  return out;
}

int32_t current_cuda_device() {
  return device::current_device(driver_for_weights());
}

}  // namespace moe
