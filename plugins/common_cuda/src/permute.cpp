// Permutation geometry, workspace carving and the checks before each launch of permute, gather
// and finalize.
#include "moe_cuda/permute.hpp"

#include <bit>
#include <vector>

#include "launch.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/check.hpp"
#include "moe_cuda/workspace.hpp"

namespace moe::gpu {
namespace {

constexpr size_t kAlign = kWorkspaceAlign;
constexpr auto kInvalid = MOE_STATUS_INVALID_ARGUMENT;

void check_problem(const moe_problem& p, int64_t max_tokens) {
  MOE_CHECK(p.experts >= 1 && p.top_k >= 1 && p.sink_experts >= 0 && p.local_experts >= 1 &&
                p.local_experts <= p.experts,
            kInvalid,
            "permutation needs experts >= 1, top_k >= 1, sink_experts >= 0 and local_experts in "
            "[1, experts]: got experts={} top_k={} sink_experts={} local_experts={}",
            p.experts, p.top_k, p.sink_experts, p.local_experts);
  MOE_CHECK(max_tokens >= 0, kInvalid, "max_tokens={} must be >= 0", max_tokens);
  MOE_CHECK(permutation_max_rows(p, max_tokens) < (int64_t(1) << 31), MOE_STATUS_UNSUPPORTED,
            "max_tokens={} gives {} permuted rows; row indices are int32", max_tokens,
            permutation_max_rows(p, max_tokens));
}

void check_masked(const moe_problem& p, int64_t max_tokens) {
  check_problem(p, max_tokens);
  MOE_CHECK(max_tokens >= 1, kInvalid, "a masked permutation needs max_tokens >= 1, got {}",
            max_tokens);
  MOE_CHECK(permutation_groups(p) * max_tokens < (int64_t(1) << 31), MOE_STATUS_UNSUPPORTED,
            "the masked layout of {} groups x max_m={} rows overflows int32 row indices",
            permutation_groups(p), max_tokens);
}

void check_workspace(const void* workspace) {
  MOE_CHECK(workspace != nullptr && reinterpret_cast<uintptr_t>(workspace) % kAlign == 0, kInvalid,
            "permutation workspace {} must be non-null and {}-byte aligned", workspace, kAlign);
}

int sort_end_bit(int64_t groups) {
  return std::bit_width(static_cast<uint64_t>(groups));  // keys in [0, G]
}

// Carves every piece in a fixed order; the same walk sizes (workspace == nullptr) and fills.
// max_m > 0: the masked layout (rows per group; no sort scratch, no offsets).
Permutation carve(const moe_problem& p, int64_t max_tokens, int64_t max_m, void* workspace,
                  size_t* bytes) {
  Permutation perm;
  perm.max_tokens = max_tokens;
  perm.width = topk_width(p);
  perm.groups = permutation_groups(p);
  perm.max_m = max_m;
  const int64_t slots = permutation_max_rows(p, max_tokens);
  perm.max_rows = max_m > 0 ? perm.groups * max_m : slots;
  perm.has_shared = p.shared_intermediate > 0;
  WorkspaceCarver c(workspace);
  perm.group_counts = c.take<int32_t>(size_t(perm.groups));
  if (max_m == 0) perm.group_offsets = c.take<int64_t>(size_t(perm.groups + 1));
  perm.row_token = c.take<int32_t>(size_t(perm.max_rows));
  perm.row_slot = c.take<int32_t>(size_t(perm.max_rows));
  perm.row_group = c.take<int32_t>(size_t(perm.max_rows));
  perm.slot_row = c.take<int32_t>(size_t(slots));
  if (max_m == 0) {
    perm.sort_end_bit = sort_end_bit(perm.groups);
    perm.sort_temp_bytes = detail::radix_sort_temp_bytes(perm.max_rows, perm.sort_end_bit);
    for (int i = 0; i < 2; ++i) {
      perm.sort_keys[i] = c.take<uint32_t>(size_t(perm.max_rows));
      perm.sort_slots[i] = c.take<int32_t>(size_t(perm.max_rows));
    }
    perm.sort_temp = c.take<char>(perm.sort_temp_bytes);
  }
  if (bytes != nullptr) *bytes = c.used();
  return perm;
}

// The EP map of `p` when the kernel may compute it itself: placement arithmetic equals ep_map.
bool map_is_arithmetic(const moe_problem& p) {
  if (p.ep_map == nullptr) return true;
  moe_problem arithmetic = p;
  arithmetic.ep_map = nullptr;
  for (int64_t e = 0; e < p.experts; ++e)
    if (p.ep_map[e] != local_expert_id(arithmetic, e)) return false;
  return true;
}

void check_geometry(const moe_problem& p, int64_t tokens, const Permutation& perm) {
  MOE_CHECK(perm.width == topk_width(p) && perm.groups == permutation_groups(p) &&
                perm.has_shared == (p.shared_intermediate > 0),
            kInvalid,
            "the permutation was carved for W={} G={} shared={}, the problem has W={} G={} "
            "shared={}",
            perm.width, perm.groups, perm.has_shared, topk_width(p), permutation_groups(p),
            p.shared_intermediate > 0);
  MOE_CHECK(tokens >= 0 && tokens <= perm.max_tokens, MOE_STATUS_CAPACITY_EXCEEDED,
            "tokens={} exceeds the max_tokens={} the permutation workspace was sized for", tokens,
            perm.max_tokens);
}

}  // namespace

int64_t permutation_groups(const moe_problem& p) {
  return p.local_experts + p.sink_experts + (p.shared_intermediate > 0 ? 1 : 0);
}

int64_t permutation_max_rows(const moe_problem& p, int64_t max_tokens) {
  return max_tokens * topk_width(p) + (p.shared_intermediate > 0 ? max_tokens : 0);
}

size_t permutation_workspace_bytes(const moe_problem& p, int64_t max_tokens) {
  check_problem(p, max_tokens);
  size_t bytes = 0;
  carve(p, max_tokens, 0, nullptr, &bytes);
  return bytes;
}

Permutation carve_permutation(const moe_problem& p, int64_t max_tokens, void* workspace) {
  check_problem(p, max_tokens);
  check_workspace(workspace);
  return carve(p, max_tokens, 0, workspace, nullptr);
}

size_t masked_permutation_workspace_bytes(const moe_problem& p, int64_t max_tokens) {
  check_masked(p, max_tokens);
  size_t bytes = 0;
  carve(p, max_tokens, max_tokens, nullptr, &bytes);
  return bytes;
}

Permutation carve_masked_permutation(const moe_problem& p, int64_t max_tokens, void* workspace) {
  check_masked(p, max_tokens);
  check_workspace(workspace);
  return carve(p, max_tokens, max_tokens, workspace, nullptr);
}

void upload_expert_map(const moe_problem& p, int32_t* device_map, cudaStream_t stream) {
  MOE_CHECK(device_map != nullptr && p.experts >= 1, kInvalid,
            "upload_expert_map needs a device buffer of experts={} ints", p.experts);
  std::vector<int32_t> map(size_t(p.experts));
  for (int64_t e = 0; e < p.experts; ++e) map[e] = local_expert_id(p, e);
  MOE_CUDA_CHECK(cudaMemcpyAsync(device_map, map.data(), map.size() * sizeof(int32_t),
                                 cudaMemcpyHostToDevice, stream));
  MOE_CUDA_CHECK(cudaStreamSynchronize(stream));  // `map` dies here
}

namespace {

kernels::PermuteKeyParams key_params(const moe_problem& p, int64_t tokens, const int32_t* topk_ids,
                                     const Permutation& perm) {
  check_geometry(p, tokens, perm);
  MOE_CHECK(tokens == 0 || topk_ids != nullptr, kInvalid, "topk_ids is null with tokens={}",
            tokens);
  MOE_CHECK(perm.local_of_global != nullptr || map_is_arithmetic(p), kInvalid,
            "ep_map is not the {} map of ep_rank={} of ep_size={}: upload it with "
            "upload_expert_map and set Permutation::local_of_global",
            ep_placement_name(static_cast<moe_ep_placement>(p.ep_placement)), p.ep_rank, p.ep_size);
  kernels::PermuteKeyParams k{};
  k.topk_ids = topk_ids;
  k.local_of_global = perm.local_of_global;
  k.tokens = tokens;
  k.width = static_cast<int32_t>(perm.width);
  k.top_k = static_cast<int32_t>(p.top_k);
  k.experts = static_cast<int32_t>(p.experts);
  k.local_experts = static_cast<int32_t>(p.local_experts);
  k.sinks = static_cast<int32_t>(p.sink_experts);
  k.placement = p.ep_placement;
  k.ep_size = p.ep_size;
  k.ep_rank = p.ep_rank;
  k.local_offset = p.local_expert_offset;
  k.has_shared = perm.has_shared;
  k.items = tokens * perm.width + (perm.has_shared ? tokens : 0);
  k.groups = static_cast<uint32_t>(perm.groups);
  return k;
}

}  // namespace

void launch_permute(const moe_problem& p, int64_t tokens, const int32_t* topk_ids,
                    const Permutation& perm, cudaStream_t stream) {
  MOE_CHECK(perm.max_m == 0, kInvalid,
            "launch_permute: the permutation was carved for the masked layout (max_m={})",
            perm.max_m);
  const kernels::PermuteKeyParams k = key_params(p, tokens, topk_ids, perm);
  if (detail::permute_in_one_launch(k, perm)) {
    detail::launch_permute_one_launch_kernel(k, perm, stream);
    return;
  }
  const size_t temp_bytes = detail::radix_sort_temp_bytes(k.items, perm.sort_end_bit);
  MOE_CHECK(temp_bytes <= perm.sort_temp_bytes, MOE_STATUS_CAPACITY_EXCEEDED,
            "the sort of {} slots needs {} bytes of temporary storage, the workspace holds {}",
            k.items, temp_bytes, perm.sort_temp_bytes);
  detail::launch_permute_kernels(k, perm, stream);
}

void launch_permute_masked(const moe_problem& p, int64_t tokens, const int32_t* topk_ids,
                           const Permutation& perm, cudaStream_t stream) {
  MOE_CHECK(perm.max_m >= 1, kInvalid,
            "launch_permute_masked: the permutation was not carved for the masked layout");
  const kernels::PermuteKeyParams k = key_params(p, tokens, topk_ids, perm);
  // tokens <= max_tokens == max_m (check_geometry): a group receives at most one row per token.
  detail::launch_permute_masked_kernels(k, perm, stream);
}

void launch_gather_rows(const Permutation& perm, int64_t hidden_size, const uint16_t* hidden,
                        uint16_t* out, cudaStream_t stream, int32_t skip_begin, int32_t skip_end) {
  MOE_CHECK(hidden_size >= 1, kInvalid, "hidden_size={} must be >= 1", hidden_size);
  MOE_CHECK(perm.group_offsets != nullptr, kInvalid, "the permutation is not carved");
  MOE_CHECK(skip_begin >= 0 && skip_begin <= skip_end && skip_end <= perm.groups, kInvalid,
            "gather: skipped groups [{}, {}) must lie in [0, {}]", skip_begin, skip_end,
            perm.groups);
  MOE_CHECK(skip_begin == skip_end || perm.row_group != nullptr, kInvalid,
            "gather: skipping groups [{}, {}) needs the permutation's row_group", skip_begin,
            skip_end);
  if (perm.max_rows == 0) return;
  MOE_CHECK(hidden != nullptr && out != nullptr, kInvalid, "gather: hidden and out must be given");
  const kernels::GatherParams k{perm.group_offsets + perm.groups,
                                perm.max_rows,
                                perm.row_token,
                                hidden,
                                out,
                                hidden_size,
                                skip_begin < skip_end ? perm.row_group : nullptr,
                                skip_begin,
                                skip_end};
  detail::launch_gather_kernel(k, hidden_size % 8 == 0 && detail::aligned(16, hidden, out), stream);
}

void launch_scatter_slot_rows(const Permutation& perm, int64_t tokens, int64_t first_column,
                              int64_t columns, int64_t hidden_size, const uint16_t* src,
                              uint16_t* out, cudaStream_t stream) {
  MOE_CHECK(perm.slot_row != nullptr, kInvalid, "scatter: the permutation is not carved");
  MOE_CHECK(tokens >= 0 && tokens <= perm.max_tokens && hidden_size >= 1, kInvalid,
            "scatter: tokens={} must be in [0, max_tokens={}] and hidden_size={} >= 1", tokens,
            perm.max_tokens, hidden_size);
  MOE_CHECK(first_column >= 0 && columns >= 0 && first_column + columns <= perm.width, kInvalid,
            "scatter: columns [{}, {}) are not slot columns of width {}", first_column,
            first_column + columns, perm.width);
  if (tokens == 0 || columns == 0) return;
  MOE_CHECK(src != nullptr && out != nullptr, kInvalid, "scatter: src and out must be given");
  const kernels::ScatterSlotParams k{perm.slot_row, tokens, perm.width, first_column,
                                     columns,       src,    out,        hidden_size};
  detail::launch_scatter_slot_rows_kernel(k, hidden_size % 8 == 0 && detail::aligned(16, src, out),
                                          stream);
}

void launch_finalize(const moe_problem& p, int64_t tokens, const Permutation& perm,
                     const FinalizeArgs& a, cudaStream_t stream) {
  check_geometry(p, tokens, perm);
  MOE_CHECK(perm.width <= kCombineMaxColumns, MOE_STATUS_UNSUPPORTED,
            "finalize handles top_k + sink_experts <= {}, got {}", kCombineMaxColumns, perm.width);
  MOE_CHECK(p.hidden >= 1, kInvalid, "hidden={} must be >= 1", p.hidden);
  if (tokens == 0) return;
  MOE_CHECK(a.gemm2 != nullptr && a.topk_weights != nullptr && a.out != nullptr, kInvalid,
            "finalize: gemm2, topk_weights and out must be given");
  kernels::FinalizeParams k{};
  k.gemm2 = a.gemm2;
  k.weights = a.topk_weights;
  k.bias = a.bias;
  k.bias_groups = static_cast<int32_t>(p.local_experts);
  k.slot_row = perm.slot_row;
  k.row_group = perm.row_group;
  k.out = a.out;
  k.tokens = tokens;
  k.hidden = p.hidden;
  k.width = static_cast<int32_t>(perm.width);
  k.has_shared = perm.has_shared;
  k.accumulate = a.accumulate ? 1 : 0;
  const bool vec = p.hidden % 8 == 0 && detail::aligned(16, a.gemm2, a.out);
  detail::launch_finalize_kernel(k, vec, stream);
}

}  // namespace moe::gpu
