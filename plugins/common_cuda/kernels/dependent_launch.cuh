// Programmatic dependent launch (PDL, sm90): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the kernel before it on the
// stream is still running; it must not touch global memory before `await_prior_grids()`, which
// returns once every earlier grid has finished and its writes are visible. `release_dependents()`
// lets the next such kernel start launching its blocks. In a CUDA graph the pair becomes a
// programmatic edge. Saved per kernel boundary of a replayed chain on the H200: 0.15-0.3 us
// (bench/NOTES.md, session 31).
//
// The rule every kernel launched through `launch_dependent` keeps: `await_prior_grids()` is the
// first statement, in every thread, before any global load or store (read-after-write and
// write-after-read on the previous kernels' buffers). Both calls are no-ops when the kernel was
// launched without the attribute, so the same kernel serves both launches.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "moe_cuda/dependent_launch.hpp"

namespace moe::gpu::kernels {

__device__ __forceinline__ void await_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void release_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// `kernel<<<grid, block, smem, stream>>>(args...)`, with the PDL attribute when
// gpu::dependent_launch_enabled().
// Returns the launch's error; the caller checks it as after <<<...>>>.
template <class... Params, class... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                             cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = gpu::dependent_launch_enabled() ? 1 : 0;  // moe_cuda/dependent_launch.hpp
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace moe::gpu::kernels
