#include "kernels/dependent_launch.cuh"
#include "kernels/quantize.cuh"
#include "launch.hpp"
#include "moe_cuda/check.hpp"

namespace moe::gpu::detail {

void launch_fp8_1x128_kernel(const kernels::Fp8BlockParams& p, bool vec, cudaStream_t stream) {
  // A warp takes 2 (vec) or 1 (scalar) of the 128-channel blocks per step.
  const int64_t per_block = kernels::kQuantThreads / kernels::kWarpSize * (vec ? 2 : 1);
  const int64_t rows = p.row_list != nullptr ? p.row_list_count : p.max_rows;
  const int64_t work = rows * ((p.hidden + kernels::kQuantBlock - 1) / kernels::kQuantBlock);
  const int blocks = grid_size((work + per_block - 1) / per_block, 8);
  if (vec)
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::quantize_fp8_1x128_kernel<true>, blocks,
                                             kernels::kQuantThreads, 0, stream, p));
  else
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::quantize_fp8_1x128_kernel<false>, blocks,
                                             kernels::kQuantThreads, 0, stream, p));
  MOE_CUDA_CHECK_LAUNCH();
}

void launch_gather_fp8_1x128_kernel(const kernels::Fp8GatherParams& p, cudaStream_t stream) {
  const int64_t per_block = kernels::kQuantThreads / kernels::kWarpSize;  // a row a warp
  const int blocks = grid_size((p.max_rows + per_block - 1) / per_block, 8);
  MOE_CUDA_CHECK(kernels::launch_dependent(kernels::gather_fp8_1x128_kernel<uint4>, blocks,
                                           kernels::kQuantThreads, 0, stream, p));
  MOE_CUDA_CHECK_LAUNCH();
}

void launch_fp8_tensor_kernels(const kernels::Fp8TensorParams& p, bool vec, cudaStream_t stream,
                               bool amax_ready) {
  if (p.amax_bits != nullptr && !amax_ready &&
      p.max_rows * p.hidden <= kernels::kSmallTensorElems) {
    if (vec)
      MOE_CUDA_CHECK(kernels::launch_dependent(kernels::fp8_tensor_dynamic_small_kernel<true>, 1,
                                               kernels::kSmallTensorThreads, 0, stream, p));
    else
      MOE_CUDA_CHECK(kernels::launch_dependent(kernels::fp8_tensor_dynamic_small_kernel<false>, 1,
                                               kernels::kSmallTensorThreads, 0, stream, p));
    MOE_CUDA_CHECK_LAUNCH();
    return;
  }
  const int64_t per_block = int64_t(kernels::kQuantThreads) * (vec ? kernels::kVecElems : 1);
  const int blocks = grid_size((p.max_rows * p.hidden + per_block - 1) / per_block, 4);
  if (p.amax_bits != nullptr && !amax_ready) {
    MOE_CUDA_CHECK(cudaMemsetAsync(p.amax_bits, 0, sizeof(uint32_t), stream));
    if (vec)
      MOE_CUDA_CHECK(kernels::launch_dependent(kernels::fp8_tensor_amax_kernel<true>, blocks,
                                               kernels::kQuantThreads, 0, stream, p));
    else
      MOE_CUDA_CHECK(kernels::launch_dependent(kernels::fp8_tensor_amax_kernel<false>, blocks,
                                               kernels::kQuantThreads, 0, stream, p));
    MOE_CUDA_CHECK_LAUNCH();
  }
  if (vec)
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::fp8_tensor_quantize_kernel<true>, blocks,
                                             kernels::kQuantThreads, 0, stream, p));
  else
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::fp8_tensor_quantize_kernel<false>, blocks,
                                             kernels::kQuantThreads, 0, stream, p));
  MOE_CUDA_CHECK_LAUNCH();
}

}  // namespace moe::gpu::detail
