#include "moe_cuda/fp8_block_gemm.hpp"

#include <algorithm>
#include <cstdint>

#include "fp8_block_gemm_launch.hpp"
#include "moe/sdk/error.hpp"

namespace moe::gpu {

const char* fp8_block_tiles_name(Fp8BlockTiles t) {
  switch (t) {
    case Fp8BlockTiles::kTokens:
      return "token tiles 128x128";
    case Fp8BlockTiles::kWeights:
      return "weight tiles 128x32 (swap AB)";
    case Fp8BlockTiles::kTokensPaired:
      return "token tiles 128x128 in 1x2 clusters (row tile multicast)";
  }
  return "?";
}

size_t fp8_block_gemm_workspace_bytes(int groups, int sm_count) {
  size_t most = 0;
  for (auto tiles : {Fp8BlockTiles::kTokens, Fp8BlockTiles::kWeights, Fp8BlockTiles::kTokensPaired})
    for (bool f32 : {false, true})
      most = std::max(most, detail::fp8_block_kernel_workspace(tiles, f32, groups, sm_count));
  return most;
}

void check_fp8_block_gemm_operands(const Fp8BlockGemmArgs& a) {
  MOE_CHECK(a.n % 128 == 0 && a.k % 128 == 0 && a.n > 0 && a.k > 0, MOE_STATUS_UNSUPPORTED,
            "fp8 block GEMM needs N={} and K={} to be positive multiples of 128 (the scale "
            "blocks)",
            a.n, a.k);
  MOE_CHECK(a.groups >= 1 && (a.offsets != nullptr) != (a.counts != nullptr),
            MOE_STATUS_INVALID_ARGUMENT,
            "fp8 block GEMM: groups={} with exactly one of offsets (contiguous) or counts "
            "(masked) needed",
            a.groups);
  MOE_CHECK(a.counts == nullptr || a.max_m >= 1, MOE_STATUS_INVALID_ARGUMENT,
            "fp8 block GEMM: the masked layout needs max_m >= 1, got {}", a.max_m);
  MOE_CHECK(a.rows && a.row_scales && a.out, MOE_STATUS_INVALID_ARGUMENT,
            "fp8 block GEMM: a null rows, row_scales or out pointer");
  MOE_CHECK(a.scale_ld >= 1 && a.scale_ld < (int64_t(1) << 31), MOE_STATUS_INVALID_ARGUMENT,
            "fp8 block GEMM: scale_ld={} must be in [1, 2^31)", a.scale_ld);
  auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  MOE_CHECK(aligned16(a.rows) && aligned16(a.out), MOE_STATUS_INVALID_ARGUMENT,
            "fp8 block GEMM: rows {} and out {} must be 16-byte aligned (TMA)",
            static_cast<const void*>(a.rows), a.out);
  MOE_CHECK(a.skip_begin >= 0 && a.skip_begin <= a.skip_end && a.skip_end <= a.groups,
            MOE_STATUS_INVALID_ARGUMENT,
            "fp8 block GEMM: skipped groups [{}, {}) are not a range of the {} groups",
            a.skip_begin, a.skip_end, a.groups);
}

void run_fp8_block_grouped_gemm(Fp8BlockTiles tiles, const Fp8BlockGemmArgs& a,
                                cudaStream_t stream) {
  check_fp8_block_gemm_operands(a);
  auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  MOE_CHECK(a.weights && a.w_scales && a.workspace && aligned16(a.workspace),
            MOE_STATUS_INVALID_ARGUMENT,
            "fp8 block GEMM ({}): needs the per-group weight and scale pointers and a 16-byte "
            "aligned workspace",
            fp8_block_tiles_name(tiles));
  MOE_CHECK(tiles != Fp8BlockTiles::kTokensPaired || (a.n / 128) % 2 == 0, MOE_STATUS_UNSUPPORTED,
            "fp8 block GEMM ({}): N={} holds an odd number of 128-wide tiles, which CTA pairs "
            "cannot split",
            fp8_block_tiles_name(tiles), a.n);
  const size_t need = fp8_block_gemm_workspace_bytes(a.groups, a.sm_count);
  MOE_CHECK(a.workspace_bytes >= need, MOE_STATUS_CAPACITY_EXCEEDED,
            "fp8 block GEMM workspace of {} bytes is smaller than the {} needed", a.workspace_bytes,
            need);
  const detail::BlockGemmResult r = detail::launch_fp8_block_gemm(tiles, a, stream);
  MOE_CHECK(r.stage == nullptr, MOE_STATUS_DEVICE_ERROR,
            "fp8 block GEMM ({}, {} out, n={}, k={}) {}: {}", fp8_block_tiles_name(tiles),
            a.f32_out ? "f32" : "bf16", a.n, a.k, r.stage ? r.stage : "",
            r.message ? r.message : "");
}

}  // namespace moe::gpu
