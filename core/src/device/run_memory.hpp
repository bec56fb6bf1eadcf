// Where the tensors of a run or a routing call live, against the memory their layer's plugin runs
// in (docs/design.md §10): the host C API checks them before a plugin reads them, since a host
// plugin dereferencing a device pointer crashes the process and a GPU kernel reading plain host
// memory (or another device's) faults with an error that sticks to the context. By the driver's
// pointer attributes (cuPointerGetAttributes); managed memory is fine everywhere.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "device/cuda_driver.hpp"
#include "moe/abi/moe_abi.h"

namespace moe::device {

class RunMemory {
 public:
  RunMemory() = default;  // checks nothing
  // At prepare. A device-memory plugin: the driver (its CUDA runtime loaded it) and the device
  // current now, where its layer lives. A host-memory plugin: the driver only once something in
  // the process has loaded it, asked at each check (never loaded or initialised here: a host-only
  // process stays free of CUDA, and forks freely); until then no pointer is device memory.
  static RunMemory of_layer(moe_memory memory, const std::string& plugin);
  // Host memory, whatever the plugin: for calls that copy their tensors on the host (the host EP
  // step); `who` names the call in messages.
  static RunMemory host_only(std::string who);
  // Tests: over `driver`, `who` (e.g. "plugin 'x'") in `memory` on `device`.
  RunMemory(const CudaDriver* driver, moe_memory memory, int32_t device, std::string who);

  // INVALID_ARGUMENT naming the field where `data` lies in the wrong memory (its first byte; the
  // plugin checks the rest of the tensor). NULL data, or a tensor of no elements: nothing to
  // check (the plugin refuses what it needs).
  void check(const void* data, const char* name) const;
  // Both ends of a copy (one driver lookup for the pair).
  void check_copy(const void* dst, const void* src, const std::string& prefix) const;
  // A device-memory layer: INVALID_ARGUMENT unless the calling thread's current device is the
  // one current at prepare (its weights' and kernels' device). A call launched on another device
  // would read the layer from the wrong device, and a workspace allocated for it would land there.
  // `call` names the entry point in the message.
  void check_current(const char* call) const;
  void check_run(const moe_run_args& a) const;      // the current device; hidden ... routing fields
  void check_route(const moe_route_args& a) const;  // the current device; logits ... workspace
  // The four tensors of a step (`prefix`: "moe_host_ep_step_args", ...).
  void check_step(const std::string& prefix, const moe_tensor& hidden, const moe_tensor& ids,
                  const moe_tensor& weights, const moe_tensor& output) const;

 private:
  struct Field {
    const void* data;  // NULL: nothing to check
    std::string name;
  };
  const CudaDriver* driver() const;  // driver_, or for host memory one loaded since
  void check_fields(std::initializer_list<Field> fields) const;
  void check_at(const CudaDriver& d, const void* data, const std::string& name) const;
  static const void* data_of(const moe_tensor& t);  // NULL for no elements

  const CudaDriver* driver_ = nullptr;
  bool host_lazy_ = false;  // host memory: ask for a loaded driver at each check
  moe_memory memory_ = MOE_MEMORY_HOST;
  int32_t device_ = -1;
  std::string who_;
};

}  // namespace moe::device
