// Launching a persistent sm90a kernel in clusters (host code, nvcc): as many clusters of
// `cluster` CTAs as can be resident at once (asked of the runtime once per kernel), at most
// `max_clusters` (one per unit of work), each CTA `threads` threads with `smem` bytes of dynamic
// shared memory, as a dependent launch (the kernel must begin with enter_dependent_grid()). Shared
// by deepgemm_style's own fp8 GEMM and the weight-only grouped GEMM.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "dependent_launch.cuh"

namespace moe::gpu::kernels {

template <auto* kKernel, class Params>
cudaError_t launch_persistent_clusters(const Params& p, int cluster, int threads, size_t smem,
                                       int sm_count, int64_t max_clusters, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = unsigned(cluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  config.blockDim = dim3(unsigned(threads));
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  // An SM left without a partner in its GPC cannot host half a cluster: ask the runtime.
  static const int resident = [&] {
    config.gridDim = dim3(unsigned(sm_count));
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kKernel, &config) != cudaSuccess) {
      (void)cudaGetLastError();  // fall back to one cluster per `cluster` SMs
      n = 0;
    }
    return n;
  }();
  const int most = resident > 0 ? std::min(resident, sm_count / cluster) : sm_count / cluster;
  const int clusters = int(std::max<int64_t>(1, std::min<int64_t>(most, max_clusters)));
  config.gridDim = dim3(unsigned(clusters * cluster));
  // The kernel awaits the previous grids first (dependent_launch.cuh), so it may start early.
  attr[1] = dependent_launch_attribute();
  config.numAttrs = gpu::dependent_launch_enabled() ? 2 : 1;
  if (cudaError_t e = cudaLaunchKernelEx(&config, kKernel, p); e != cudaSuccess) return e;
  return cudaGetLastError();
}

}  // namespace moe::gpu::kernels
