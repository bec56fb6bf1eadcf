// The nvcc half of each host file: launches kernel arguments that the g++ half has validated.
// Split this way because moe/error.hpp (fmt) does not compile under nvcc; the launchers throw
// only through MOE_CUDA_CHECK. Internal to moe_cuda_common.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/params.hpp"
#include "moe_cuda/permute.hpp"

namespace moe::gpu::detail {

// Multiprocessors of the current device (cached per device): sizes grid-stride launches.
int multiprocessor_count();
// Blocks for `work` independent units, at most `per_sm` per multiprocessor; >= 1.
int grid_size(int64_t work, int per_sm);

void launch_route_kernel(kernels::RouteParams p, cudaStream_t stream);

size_t radix_sort_temp_bytes(int64_t items, int end_bit);
// Whether a permutation of these keys runs in one launch (perm.one_launch_max_items and the
// kernel's own limits), and that launch.
bool permute_in_one_launch(const kernels::PermuteKeyParams& keys, const Permutation& perm);
void launch_permute_one_launch_kernel(const kernels::PermuteKeyParams& keys,
                                      const Permutation& perm, cudaStream_t stream);
// Keys, stable sort, finish. `keys` is complete but for its outputs, which live in `perm`.
void launch_permute_kernels(kernels::PermuteKeyParams keys, const Permutation& perm,
                            cudaStream_t stream);

// The masked layout: one block clears and assigns rows where it holds them (decode), else
// memsets zero the counts and clear row_token, then one kernel assigns rows.
void launch_permute_masked_kernels(const kernels::PermuteKeyParams& keys, const Permutation& perm,
                                   cudaStream_t stream);
void launch_gather_kernel(const kernels::GatherParams& p, bool vec, cudaStream_t stream);
void launch_scatter_slot_rows_kernel(const kernels::ScatterSlotParams& p, bool vec,
                                     cudaStream_t stream);
void launch_finalize_kernel(kernels::FinalizeParams p, bool vec, cudaStream_t stream);
void launch_activation_kernel(const kernels::ActivationParams& p, bool vec, cudaStream_t stream);
void launch_activation_quantize_kernel(const kernels::ActivationParams& p, cudaStream_t stream);
void launch_fp8_1x128_kernel(const kernels::Fp8BlockParams& p, bool vec, cudaStream_t stream);
void launch_gather_fp8_1x128_kernel(const kernels::Fp8GatherParams& p, cudaStream_t stream);
// amax_bits != null: dynamic (zero it, reduce, quantise; `amax_ready`: only quantise, from the
// amax already there); else static from p.scale_in.
void launch_fp8_tensor_kernels(const kernels::Fp8TensorParams& p, bool vec, cudaStream_t stream,
                               bool amax_ready = false);

// True when every pointer is aligned to `bytes` (null counts as aligned).
template <class... Ptrs>
bool aligned(size_t bytes, const Ptrs*... ptrs) {
  return ((reinterpret_cast<uintptr_t>(ptrs) % bytes == 0) && ...);
}

}  // namespace moe::gpu::detail
