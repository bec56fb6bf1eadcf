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

void launch_activation_quantize_kernel(const kernels::ActivationParams& p, cudaStream_t stream) {
  const int blocks = grid_size(p.max_rows, 8);
  constexpr int kThreads = kernels::kActivationThreads;
  const bool masked = p.row_live != nullptr, f32 = p.gemm1_f32 != nullptr;
  if (masked && f32)
    kernels::activation_quantize_kernel<true, float><<<blocks, kThreads, 0, stream>>>(p);
  else if (masked)
    kernels::activation_quantize_kernel<true, uint16_t><<<blocks, kThreads, 0, stream>>>(p);
  else if (f32)
    kernels::activation_quantize_kernel<false, float><<<blocks, kThreads, 0, stream>>>(p);
  else
    kernels::activation_quantize_kernel<false, uint16_t><<<blocks, kThreads, 0, stream>>>(p);
  MOE_CUDA_CHECK_LAUNCH();
}

}  // namespace moe::gpu::detail
