// Programmatic dependent launch (PDL, sm90): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the kernel before it on the
// stream is still running, so it must not touch global memory before `griddepcontrol.wait`, which
// returns once the grid before it has finished (and, since that one waited too, every earlier one)
// and its writes are visible. `griddepcontrol.launch_dependents` then lets the next such kernel
// start launching its blocks. In a CUDA graph the pair becomes a programmatic edge. Saved per
// kernel boundary of a replayed chain on the H200: 0.15-0.3 us (bench/NOTES.md, session 31).
//
// The rule every kernel launched through `launch_dependent` or `launch_persistent_clusters`
// keeps: `enter_dependent_grid()` is its first statement, in every thread, before any global load
// or store (read-after-write and write-after-read on the previous kernels' buffers). It is a no-op
// when the kernel was launched without the attribute, so the same kernel serves both launches.
// One exception, by a flag its caller sets: a kernel may read, before its wait, what no launch
// in flight writes (constant weights, and buffers written by a launch that finished before the
// previous one began: since every kernel awaits its predecessor before it lets the next one start,
// that launch was complete when this one started). deepgemm_style's swapped-operand GEMM reads its
// schedule and first weight boxes so (Fp8GemmArgs::groups_settled).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "moe_cuda/dependent_launch.hpp"

namespace moe::gpu::kernels {

__device__ __forceinline__ void enter_dependent_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The launch attribute that makes a launch dependent.
inline cudaLaunchAttribute dependent_launch_attribute() {
  cudaLaunchAttribute a{};
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
  return a;
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
  cudaLaunchAttribute attr[1] = {dependent_launch_attribute()};
  config.attrs = attr;
  config.numAttrs = gpu::dependent_launch_enabled() ? 1 : 0;  // moe_cuda/dependent_launch.hpp
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace moe::gpu::kernels
