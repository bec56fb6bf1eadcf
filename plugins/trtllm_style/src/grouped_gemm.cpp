#include "grouped_gemm.hpp"

#include "grouped_gemm_launch.hpp"
#include "moe/error.hpp"

namespace moe::trtllm {

const char* gemm_tiles_name(GemmTiles t) {
  return t == GemmTiles::kTokens ? "token tiles 128x128" : "weight tiles 128x32 (swap AB)";
}

size_t grouped_gemm_workspace_bytes(GemmTiles tiles, int groups, int sm_count) {
  return tiles == GemmTiles::kTokens ? detail::token_tiles_workspace(groups, sm_count)
                                     : detail::weight_tiles_workspace(groups, sm_count);
}

void run_grouped_gemm(GemmTiles tiles, int groups, const int64_t* offsets, int n, int k,
                      const void* rows, const void* const* weights, void* out, void* workspace,
                      size_t workspace_bytes, int sm_count, cudaStream_t stream) {
  MOE_CHECK(n % 8 == 0 && k % 8 == 0, MOE_STATUS_UNSUPPORTED,
            "grouped GEMM needs N={} and K={} to be multiples of 8 (16-byte TMA strides)", n, k);
  const size_t need = grouped_gemm_workspace_bytes(tiles, groups, sm_count);
  MOE_CHECK(workspace_bytes >= need, MOE_STATUS_CAPACITY_EXCEEDED,
            "grouped GEMM workspace of {} bytes is smaller than the {} needed", workspace_bytes,
            need);
  const detail::LaunchResult r =
      tiles == GemmTiles::kTokens
          ? detail::launch_token_tiles(groups, offsets, n, k, rows, weights, out, workspace,
                                       sm_count, stream)
          : detail::launch_weight_tiles(groups, offsets, n, k, rows, weights, out, workspace,
                                        sm_count, stream);
  MOE_CHECK(r.stage == nullptr, MOE_STATUS_DEVICE_ERROR, "grouped GEMM ({}, n={}, k={}) {}: {}",
            gemm_tiles_name(tiles), n, k, r.stage ? r.stage : "", r.message ? r.message : "");
}

}  // namespace moe::trtllm
