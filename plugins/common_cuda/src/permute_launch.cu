// Permutation on the stream: keys, CUB's stable radix sort over the low bits, finish.
#include <algorithm>
#include <cub/device/device_radix_sort.cuh>

#include "kernels/dependent_launch.cuh"
#include "kernels/permute.cuh"
#include "launch.hpp"
#include "moe_cuda/check.hpp"

namespace moe::gpu::detail {

// NOTES: the only CUB instantiation of the library: SortPairs<uint32_t, int32_t> over
// DoubleBuffers, which needs no extra copy of the keys in temporary storage. Which buffer ends
// current is decided on the host from the pass count, so nothing waits on the device.
size_t radix_sort_temp_bytes(int64_t items, int end_bit) {
  cub::DoubleBuffer<uint32_t> keys(nullptr, nullptr);
  cub::DoubleBuffer<int32_t> slots(nullptr, nullptr);
  size_t bytes = 0;
  MOE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, slots,
                                                 static_cast<int>(items), 0, end_bit));
  return bytes;
}

namespace {

// The outputs of the permutation (all but the group counts' and offsets' inputs, `keys` and
// `slots`, which the caller sets).
kernels::PermuteFinishParams finish_params(const kernels::PermuteKeyParams& k,
                                           const Permutation& perm) {
  kernels::PermuteFinishParams f{};
  f.items = k.items;
  f.routed_slots = k.tokens * k.width;
  f.width = k.width;
  f.groups = static_cast<int32_t>(k.groups);
  f.group_counts = perm.group_counts;
  f.group_offsets = perm.group_offsets;
  f.row_token = perm.row_token;
  f.row_slot = perm.row_slot;
  f.row_group = perm.row_group;
  f.slot_row = perm.slot_row;
  return f;
}

}  // namespace

bool permute_in_one_launch(const kernels::PermuteKeyParams& k, const Permutation& perm) {
  return perm.one_launch_max_items > 0 && k.items <= perm.one_launch_max_items &&
         k.items <= kernels::kOneLaunchItems && k.groups <= uint32_t(kernels::kOneLaunchGroups);
}

void launch_permute_one_launch_kernel(const kernels::PermuteKeyParams& k, const Permutation& perm,
                                      cudaStream_t stream) {
  MOE_CUDA_CHECK(kernels::launch_dependent(kernels::permute_one_launch_kernel, 1,
                                           kernels::kPermuteThreads, 0, stream, k,
                                           finish_params(k, perm)));
  MOE_CUDA_CHECK_LAUNCH();
}

void launch_permute_kernels(kernels::PermuteKeyParams k, const Permutation& perm,
                            cudaStream_t stream) {
  k.keys = perm.sort_keys[0];
  k.slots = perm.sort_slots[0];
  cub::DoubleBuffer<uint32_t> keys(perm.sort_keys[0], perm.sort_keys[1]);
  cub::DoubleBuffer<int32_t> slots(perm.sort_slots[0], perm.sort_slots[1]);
  if (k.items > 0) {
    const int threads = kernels::kPermuteThreads;
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::permute_keys_kernel,
                                             grid_size((k.items + threads - 1) / threads, 8),
                                             threads, 0, stream, k));
    MOE_CUDA_CHECK_LAUNCH();
    size_t temp_bytes = perm.sort_temp_bytes;  // launch_permute checked it is enough
    MOE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(perm.sort_temp, temp_bytes, keys, slots,
                                                   static_cast<int>(k.items), 0, perm.sort_end_bit,
                                                   stream));
  }
  kernels::PermuteFinishParams f = finish_params(k, perm);
  f.keys = keys.Current();
  f.slots = slots.Current();
  const int64_t work = std::max<int64_t>(k.items, perm.groups + 1);
  const int threads = kernels::kPermuteThreads;
  MOE_CUDA_CHECK(kernels::launch_dependent(kernels::permute_finish_kernel,
                                           grid_size((work + threads - 1) / threads, 8), threads, 0,
                                           stream, f));
  MOE_CUDA_CHECK_LAUNCH();
}

void launch_permute_masked_kernels(const kernels::PermuteKeyParams& k, const Permutation& perm,
                                   cudaStream_t stream) {
  // Decode: one block clears and assigns (no memset nodes between it and the kernel before it).
  if (perm.max_rows <= kernels::kMaskedOneBlockRows &&
      k.groups <= uint32_t(kernels::kOneLaunchGroups)) {
    const kernels::MaskedRowsParams m{perm.max_m,     perm.group_counts, perm.slot_row,
                                      perm.row_token, perm.row_group,    perm.row_slot};
    MOE_CUDA_CHECK(kernels::launch_dependent(kernels::permute_masked_one_block_kernel, 1,
                                             kernels::kMaskedOneBlockThreads, 0, stream, k, m,
                                             perm.max_rows));
    MOE_CUDA_CHECK_LAUNCH();
    return;
  }
  MOE_CUDA_CHECK(
      cudaMemsetAsync(perm.group_counts, 0, size_t(perm.groups) * sizeof(int32_t), stream));
  MOE_CUDA_CHECK(
      cudaMemsetAsync(perm.row_token, 0xff, size_t(perm.max_rows) * sizeof(int32_t), stream));
  if (k.items == 0) return;
  kernels::MaskedRowsParams m{perm.max_m,     perm.group_counts, perm.slot_row,
                              perm.row_token, perm.row_group,    perm.row_slot};
  const int threads = kernels::kPermuteThreads;
  MOE_CUDA_CHECK(kernels::launch_dependent(kernels::permute_masked_kernel,
                                           grid_size((k.items + threads - 1) / threads, 8), threads,
                                           0, stream, k, m));
  MOE_CUDA_CHECK_LAUNCH();
}

}  // namespace moe::gpu::detail
