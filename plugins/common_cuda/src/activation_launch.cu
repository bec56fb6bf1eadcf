#include <algorithm>

#include "kernels/activation.cuh"
#include "kernels/dependent_launch.cuh"
#include "launch.hpp"
#include "moe_cuda/check.hpp"

namespace moe::gpu::detail {
namespace {

// x: the rows to visit (grid-stride); y: chunks of 8 x kActivationThreads outputs of a row. Once
// the rows are many, 8 / chunks row blocks an SM (at least 1), so 8 blocks an SM in all up to 8
// chunks a row, as the row-per-block grid had (16 measured 1.3% slower on Qwen3-30B-A3B at
// T = 4096, one chunk a row; bench/NOTES.md session 25), `chunks` an SM past that (Mixtral: 14).
dim3 activation_grid(const kernels::ActivationParams& p) {
  constexpr int64_t kChunk = int64_t(kernels::kActivationThreads) * kernels::kVecElems;
  const int64_t chunks = std::min<int64_t>((p.intermediate + kChunk - 1) / kChunk, 65535);
  const int64_t rows = p.row_list != nullptr ? p.row_list_count : p.max_rows;
  const int per_sm = int(std::max<int64_t>(1, 8 / chunks));
  return dim3(unsigned(grid_size(rows, per_sm)), unsigned(std::max<int64_t>(1, chunks)));
}

}  // namespace

void launch_activation_kernel(const kernels::ActivationParams& p, bool vec, cudaStream_t stream) {
  const dim3 blocks = activation_grid(p);
  if (vec)
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::activation_kernel<true>, blocks,
                                             kernels::kActivationThreads, 0, stream, p));
  else
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::activation_kernel<false>, blocks,
                                             kernels::kActivationThreads, 0, stream, p));
  MOE_CUDA_CHECK_LAUNCH();
}

void launch_activation_quantize_kernel(const kernels::ActivationParams& p, cudaStream_t stream) {
  const dim3 blocks = activation_grid(p);
  constexpr int kThreads = kernels::kActivationThreads;
  if (p.gemm1_f32 != nullptr)
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::activation_quantize_kernel<float>, blocks,
                                             kThreads, 0, stream, p));
  else
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::activation_quantize_kernel<uint16_t>, blocks,
                                             kThreads, 0, stream, p));
  MOE_CUDA_CHECK_LAUNCH();
}

}  // namespace moe::gpu::detail
