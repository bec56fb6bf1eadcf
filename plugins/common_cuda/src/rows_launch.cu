// Gather, scatter and finalize on the stream: grid-stride blocks, a few per multiprocessor.
#include "kernels/dependent_launch.cuh"
#include "kernels/finalize.cuh"
#include "kernels/gather.cuh"
#include "launch.hpp"
#include "moe_cuda/check.hpp"
#include "moe_cuda/permute.hpp"

namespace moe::gpu::detail {

static_assert(kernels::kFinalizeMaxWidth == kCombineMaxColumns,
              "the finalize kernel's shared rows and the limit plugins refuse past must agree");

// NOTES: grids are sized from the worst case (R_max rows, T x column tiles) and capped at 8 blocks
// per SM; blocks past the rows actually in use (group_offsets[G], read on the device) leave at
// once.
void launch_gather_kernel(const kernels::GatherParams& p, bool vec, cudaStream_t stream) {
  const int blocks = grid_size(p.max_rows, 8);
  if (vec)
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::gather_rows_kernel<true>, blocks,
                                             kernels::kGatherThreads, 0, stream, p));
  else
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::gather_rows_kernel<false>, blocks,
                                             kernels::kGatherThreads, 0, stream, p));
  MOE_CUDA_CHECK_LAUNCH();
}

void launch_scatter_slot_rows_kernel(const kernels::ScatterSlotParams& p, bool vec,
                                     cudaStream_t stream) {
  const int blocks = grid_size(p.columns * p.tokens, 8);
  if (vec)
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::scatter_slot_rows_kernel<true>, blocks,
                                             kernels::kGatherThreads, 0, stream, p));
  else
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::scatter_slot_rows_kernel<false>, blocks,
                                             kernels::kGatherThreads, 0, stream, p));
  MOE_CUDA_CHECK_LAUNCH();
}

// A block per token once tokens outnumber 4 blocks per SM; below that, tiles of one pass of the
// block (1024 columns vectorised) so that decode batches still use many SMs.
void launch_finalize_kernel(kernels::FinalizeParams p, bool vec, cudaStream_t stream) {
  const int64_t pass_cols = int64_t(kernels::kFinalizeThreads) * (vec ? kernels::kVecElems : 1);
  const bool many_tokens = p.tokens >= 4 * int64_t(multiprocessor_count());
  p.tile_cols = many_tokens ? p.hidden : pass_cols;
  const int blocks = grid_size(p.tokens * ((p.hidden + p.tile_cols - 1) / p.tile_cols), 8);
  if (vec)
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::finalize_kernel<true>, blocks,
                                             kernels::kFinalizeThreads, 0, stream, p));
  else
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::finalize_kernel<false>, blocks,
                                             kernels::kFinalizeThreads, 0, stream, p));
  MOE_CUDA_CHECK_LAUNCH();
}

}  // namespace moe::gpu::detail
