// What every in-tree GPU backend declares the same way (docs/design.md §11), as a base class of
// its declaration: device memory, routing on the device within the routing kernel's limits
// (beyond them the SDK routes on the host with the reference), and `moe bench` timed with device
// events. A backend adds what is its own: info, supports, prepare, run, describe_layout.
#pragma once

#include <cstdint>

#include "moe/abi/moe_abi.h"
#include "moe/sdk/backend.hpp"
#include "moe/sdk/verdict.hpp"
#include "moe_cuda/memory.hpp"

namespace moe::gpu {

struct GpuBackend {
  using Memory = CudaMemory;

  sdk::Verdict can_route(const moe_problem& p) const;
  void route(const moe_problem& p, const moe_route_args& a, int64_t tokens) const;
  void benchmark(const moe_bench_args& a, const sdk::RunFn& run) const;
};

}  // namespace moe::gpu
