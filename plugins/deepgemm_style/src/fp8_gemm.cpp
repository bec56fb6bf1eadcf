#include "fp8_gemm.hpp"

#include <algorithm>
#include <cstdint>

#include "fp8_gemm_launch.hpp"
#include "moe/sdk/error.hpp"

namespace moe::deepgemm {
namespace {

detail::Kernel kernel_of(Fp8Tiles t) {
  return t == Fp8Tiles::kTokens ? detail::Kernel::kTokens : detail::Kernel::kWeights;
}

void check(const Fp8GemmArgs& a) {
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
  MOE_CHECK(a.rows && a.row_scales && a.weights && a.w_scales && a.out && a.workspace,
            MOE_STATUS_INVALID_ARGUMENT, "fp8 block GEMM: a null pointer");
  MOE_CHECK(a.scale_ld >= 1 && a.scale_ld < (int64_t(1) << 31), MOE_STATUS_INVALID_ARGUMENT,
            "fp8 block GEMM: scale_ld={} must be in [1, 2^31)", a.scale_ld);
  auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  MOE_CHECK(aligned16(a.rows) && aligned16(a.out) && aligned16(a.workspace),
            MOE_STATUS_INVALID_ARGUMENT,
            "fp8 block GEMM: rows {}, out {} and workspace {} must be 16-byte aligned (TMA)",
            static_cast<const void*>(a.rows), a.out, a.workspace);
  const size_t need = fp8_gemm_workspace_bytes(a.groups, a.sm_count);
  MOE_CHECK(a.workspace_bytes >= need, MOE_STATUS_CAPACITY_EXCEEDED,
            "fp8 block GEMM workspace of {} bytes is smaller than the {} needed", a.workspace_bytes,
            need);
}

}  // namespace

const char* fp8_tiles_name(Fp8Tiles t) {
  switch (t) {
    case Fp8Tiles::kTokens:
      return "token tiles 128x128";
    case Fp8Tiles::kWeights:
      return "weight tiles 128x32 (swap AB)";
  }
  return "?";
}

size_t fp8_gemm_workspace_bytes(int groups, int sm_count) {
  size_t most = 0;
  for (auto kernel : {detail::Kernel::kTokens, detail::Kernel::kWeights})
    for (bool f32 : {false, true})
      most = std::max(most, detail::kernel_workspace(kernel, f32, groups, sm_count));
  return most;
}

void run_fp8_grouped_gemm(Fp8Tiles tiles, const Fp8GemmArgs& a, cudaStream_t stream) {
  check(a);
  const detail::GemmCall call{a.groups,  a.offsets,    a.counts,
                              a.max_m,   a.n,          a.k,
                              a.rows,    a.row_scales, static_cast<int32_t>(a.scale_ld),
                              a.weights, a.w_scales,   a.out,
                              a.f32_out, a.workspace,  a.sm_count,
                              stream};
  const detail::LaunchResult r = detail::launch(kernel_of(tiles), call);
  MOE_CHECK(r.stage == nullptr, MOE_STATUS_DEVICE_ERROR,
            "fp8 block GEMM ({}, {} out, n={}, k={}) {}: {}", fp8_tiles_name(tiles),
            a.f32_out ? "f32" : "bf16", a.n, a.k, r.stage ? r.stage : "",
            r.message ? r.message : "");
}

}  // namespace moe::deepgemm
