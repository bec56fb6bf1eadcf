// Canonical weights that already live in CUDA device memory (an engine loads them there: vLLM, a
// torch model), copied to host memory so that any plugin prepares them through the host path of
// the ABI (moe_prepare_args.weights is host memory). The copy costs what it says: every byte
// crosses PCIe to the host and, for a GPU plugin, back again, and the host holds the whole layer
// until prepare returns (docs/design.md §10).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "moe/abi/moe_abi.h"
#include "moe/sdk/host_tensor.hpp"

namespace moe {
namespace device {
struct CudaDriver;  // core/src/device/cuda_driver.hpp
}

// Host copies of a moe_weights' tensors, and the struct that points at them.
class StagedWeights {
 public:
  StagedWeights() = default;
  StagedWeights(StagedWeights&&) noexcept = default;
  StagedWeights& operator=(StagedWeights&&) noexcept = default;
  StagedWeights(const StagedWeights&) = delete;
  StagedWeights& operator=(const StagedWeights&) = delete;

  // The caller's struct (its ext chain borrowed as given) with every present tensor's data in
  // host memory owned here; strides 0 (contiguous).
  const moe_weights& weights() const { return weights_; }
  size_t bytes() const;  // copied from the device

 private:
  friend StagedWeights stage_device_weights(const device::CudaDriver&, const moe_weights&, int32_t,
                                            void*);
  std::vector<HostTensor> copies_;
  moe_weights weights_{};
};

// Copies every present tensor of `weights` (CUDA device memory of device `device`, contiguous) to
// the host on `stream` (a cudaStream_t of that device; NULL = the legacy default stream, which
// waits for the device's other blocking streams), and waits for the copies. Each tensor is checked
// with the driver first: device memory of `device`, and its bytes inside one allocation. Errors
// name the field ("weights.w13: ..."): INVALID_ARGUMENT for a tensor that is not such memory or
// not contiguous, NOT_FOUND / DEVICE_ERROR where there is no NVIDIA driver or no device.
StagedWeights stage_device_weights(const moe_weights& weights, int32_t device, void* stream);

// The same through `driver` in place of the one loaded at run time (tests: a fake driver).
StagedWeights stage_device_weights(const device::CudaDriver& driver, const moe_weights& weights,
                                   int32_t device, void* stream);

// The calling thread's current CUDA device, where a GPU plugin prepares a layer from device
// weights: that of its current context, else 0 (the CUDA runtime's default). Where there is no
// driver it throws as stage_device_weights does ("weights in CUDA device memory: ...").
int32_t current_cuda_device();

}  // namespace moe
