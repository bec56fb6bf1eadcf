// Where the tensors of a run or a routing call live, against the memory their layer's plugin runs
// in (docs/design.md §10): the host C API checks them before a plugin reads them, since a host
// plugin dereferencing a device pointer crashes the process and a GPU kernel reading plain host
// memory (or another device's) faults with an error that sticks to the context. By the driver's
// pointer attributes (cuPointerGetAttributes); managed memory is fine everywhere.
#pragma once

#include <cstdint>
#include <string>

#include "device/cuda_driver.hpp"
#include "moe/abi/moe_abi.h"

namespace moe::device {

class RunMemory {
 public:
  RunMemory() = default;  // checks nothing
  // At prepare: the driver where one loads (where none does, no pointer is device memory and
  // nothing is checked), and for a device-memory plugin the device current now, where its layer
  // lives.
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
  void check(const moe_tensor& t, const char* name) const;
  void check_run(const moe_run_args& a) const;      // hidden ... workspace, routing fields
  void check_route(const moe_route_args& a) const;  // logits ... workspace
  // The four tensors of a step (`prefix`: "moe_host_ep_step_args", ...).
  void check_step(const char* prefix, const moe_tensor& hidden, const moe_tensor& ids,
                  const moe_tensor& weights, const moe_tensor& output) const;

 private:
  const CudaDriver* driver_ = nullptr;
  moe_memory memory_ = MOE_MEMORY_HOST;
  int32_t device_ = -1;
  std::string who_;
};

}  // namespace moe::device
