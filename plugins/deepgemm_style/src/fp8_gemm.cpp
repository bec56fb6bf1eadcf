#include "fp8_gemm.hpp"

#include <algorithm>
#include <cstdint>

#include "fp8_gemm_launch.hpp"
#include "moe/sdk/error.hpp"

namespace moe::deepgemm {
namespace {

detail::Kernel kernel_of(Fp8Tiles t) {
  return t == Fp8Tiles::kWeights ? detail::Kernel::kWeights : detail::Kernel::kTokens;
}

void check(Fp8Tiles tiles, const Fp8GemmArgs& a) {
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
  MOE_CHECK(tiles != Fp8Tiles::kTokensFfma || a.skip_begin == a.skip_end, MOE_STATUS_UNSUPPORTED,
            "fp8 block GEMM ({}): the own kernel skips no groups (sink experts)",
            fp8_tiles_name(tiles));
  if (tiles == Fp8Tiles::kTokensFfma) {  // the own kernel: stacked weights, no workspace
    MOE_CHECK(a.weight_stack && a.w_scale_stack && aligned16(a.weight_stack),
              MOE_STATUS_INVALID_ARGUMENT,
              "fp8 block GEMM ({}): needs the stacked weights (16-byte aligned) and scales",
              fp8_tiles_name(tiles));
    MOE_CHECK(a.groups <= detail::ffma_max_groups() && a.sm_count >= 1, MOE_STATUS_UNSUPPORTED,
              "fp8 block GEMM ({}): {} groups, at most {}", fp8_tiles_name(tiles), a.groups,
              detail::ffma_max_groups());
    return;
  }
  MOE_CHECK(a.weights && a.w_scales && a.workspace && aligned16(a.workspace),
            MOE_STATUS_INVALID_ARGUMENT,
            "fp8 block GEMM ({}): needs the per-group weight and scale pointers and a 16-byte "
            "aligned workspace",
            fp8_tiles_name(tiles));
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
    case Fp8Tiles::kTokensFfma:
      return "token tiles 128x128, own kernel (FFMA promotion, 64-row halves)";
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
  check(tiles, a);
  detail::GemmCall call;
  call.groups = a.groups;
  call.offsets = a.offsets;
  call.counts = a.counts;
  call.max_m = a.max_m;
  call.skip_begin = a.skip_begin;
  call.skip_end = a.skip_end;
  call.n = a.n;
  call.k = a.k;
  call.rows = a.rows;
  call.row_scales = a.row_scales;
  call.scale_ld = static_cast<int32_t>(a.scale_ld);
  call.weights = a.weights;
  call.w_scales = a.w_scales;
  call.weight_stack = a.weight_stack;
  call.w_scale_stack = a.w_scale_stack;
  call.out = a.out;
  call.f32_out = a.f32_out;
  call.workspace = a.workspace;
  call.sm_count = a.sm_count;
  call.stream = stream;
  const detail::LaunchResult r = tiles == Fp8Tiles::kTokensFfma
                                     ? detail::launch_ffma(call)
                                     : detail::launch(kernel_of(tiles), call);
  MOE_CHECK(r.stage == nullptr, MOE_STATUS_DEVICE_ERROR,
            "fp8 block GEMM ({}, {} out, n={}, k={}) {}: {}", fp8_tiles_name(tiles),
            a.f32_out ? "f32" : "bf16", a.n, a.k, r.stage ? r.stage : "",
            r.message ? r.message : "");
}

}  // namespace moe::deepgemm
