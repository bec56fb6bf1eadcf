#include "kernels/activation.cuh"
#include "launch.hpp"
#include "moe_cuda/check.hpp"

namespace moe::gpu::detail {

void launch_activation_kernel(const kernels::ActivationParams& p, bool vec, cudaStream_t stream) {
  const int blocks = grid_size(p.max_rows, 8);
  if (vec)
    kernels::activation_kernel<true><<<blocks, kernels::kActivationThreads, 0, stream>>>(p);
  else
    kernels::activation_kernel<false><<<blocks, kernels::kActivationThreads, 0, stream>>>(p);
  MOE_CUDA_CHECK_LAUNCH();
}

}  // namespace moe::gpu::detail
