#include "fp8_gemm.hpp"

#include <cstdint>

#include "fp8_gemm_launch.hpp"
#include "moe/abi/moe_abi.h"
#include "moe/sdk/error.hpp"

namespace moe::deepgemm {
namespace {

gpu::Fp8BlockTiles cutlass_tiles(Fp8Tiles t) {
  return t == Fp8Tiles::kWeights        ? gpu::Fp8BlockTiles::kWeights
         : t == Fp8Tiles::kTokensPaired ? gpu::Fp8BlockTiles::kTokensPaired
                                        : gpu::Fp8BlockTiles::kTokens;
}

// The own kernel: stacked weights, no workspace, no skipped groups.
void run_ffma(Fp8Tiles tiles, const Fp8GemmArgs& a, cudaStream_t stream) {
  gpu::check_fp8_block_gemm_operands(a);
  MOE_CHECK(a.skip_begin == a.skip_end, MOE_STATUS_UNSUPPORTED,
            "fp8 block GEMM ({}): the own kernel skips no groups (sink experts)",
            fp8_tiles_name(tiles));
  MOE_CHECK(
      a.weight_stack && a.w_scale_stack && reinterpret_cast<uintptr_t>(a.weight_stack) % 16 == 0,
      MOE_STATUS_INVALID_ARGUMENT,
      "fp8 block GEMM ({}): needs the stacked weights (16-byte aligned) and scales",
      fp8_tiles_name(tiles));
  MOE_CHECK(a.groups <= detail::ffma_max_groups() && a.sm_count >= 1, MOE_STATUS_UNSUPPORTED,
            "fp8 block GEMM ({}): {} groups, at most {}", fp8_tiles_name(tiles), a.groups,
            detail::ffma_max_groups());
  // The kernels address the stack's rows with the TMA's 32-bit coordinates.
  MOE_CHECK(int64_t(a.groups) * a.n < (int64_t(1) << 31), MOE_STATUS_UNSUPPORTED,
            "fp8 block GEMM ({}): the weight stack's {} x {} rows exceed the 2^31 a TMA row "
            "coordinate holds",
            fp8_tiles_name(tiles), a.groups, a.n);
  detail::GemmCall call;
  call.groups = a.groups;
  call.offsets = a.offsets;
  call.counts = a.counts;
  call.max_m = a.max_m;
  call.n = a.n;
  call.k = a.k;
  call.rows = a.rows;
  call.row_scales = a.row_scales;
  call.scale_ld = static_cast<int32_t>(a.scale_ld);
  call.weight_stack = a.weight_stack;
  call.w_scale_stack = a.w_scale_stack;
  call.out = a.out;
  call.f32_out = a.f32_out;
  const bool swapped = swaps_operands(tiles);
  call.block_m = tiles == Fp8Tiles::kTokensFfma192 ? 192 : 128;  // (the swapped kernel: unused)
  call.split_k = splits_k(tiles);
  MOE_CHECK(!call.split_k || a.k >= 256, MOE_STATUS_UNSUPPORTED,
            "fp8 block GEMM ({}): split K needs K of two 128-wide blocks or more (K={})",
            fp8_tiles_name(tiles), a.k);
  if (const Fp8FusedGemm1* f = a.fused) {  // (run_fp8_grouped_gemm checked can_fuse_gemm1)
    MOE_CHECK(f->activation == MOE_ACTIVATION_SILU_MUL ||
                  f->activation == MOE_ACTIVATION_SILU_MUL_CLAMP ||
                  f->activation == MOE_ACTIVATION_SWIGLU_OAI ||
                  f->activation == MOE_ACTIVATION_GELU_MUL,
              MOE_STATUS_UNSUPPORTED,
              "fp8 block GEMM ({}): a fused GEMM1 takes a gated activation, not {}",
              fp8_tiles_name(tiles), f->activation);
    MOE_CHECK(a.n % 256 == 0 && f->codes != nullptr && f->scales != nullptr &&
                  reinterpret_cast<uintptr_t>(f->codes) % 16 == 0 && f->scale_ld >= a.scale_ld &&
                  (f->bias == nullptr || (f->bias_ld >= a.n && f->bias_groups >= 0)),
              MOE_STATUS_INVALID_ARGUMENT,
              "fp8 block GEMM ({}): a fused GEMM1 needs N = 2I with I % 128 == 0 (N={}), its codes "
              "(16-byte aligned), scales of a row stride of at least the rows' ({} < {}), and "
              "bias rows of at least N",
              fp8_tiles_name(tiles), a.n, f->scale_ld, a.scale_ld);
    call.fused = f;
    call.out = f->codes;
  }
  MOE_CHECK(a.timeline.records == nullptr ||
                (a.timeline.tiles >= 1 && a.timeline.words >= size_t(a.sm_count) * 2 *
                                                                  size_t(a.timeline.tiles) *
                                                                  Fp8Timeline::kWords),
            MOE_STATUS_INVALID_ARGUMENT,
            "fp8 block GEMM ({}): a timeline needs room for at least one tile a consumer, "
            "sm_count x 2 x tiles x {} words ({} x 2 x {} x {} > {})",
            fp8_tiles_name(tiles), Fp8Timeline::kWords, a.sm_count, a.timeline.tiles,
            Fp8Timeline::kWords, a.timeline.words);
  MOE_CHECK(!swapped || a.timeline.records == nullptr, MOE_STATUS_UNSUPPORTED,
            "fp8 block GEMM ({}): keeps no timeline", fp8_tiles_name(tiles));
  call.timeline = a.timeline;
  call.groups_settled = a.groups_settled;
  call.sm_count = a.sm_count;
  call.stream = stream;
  const detail::LaunchResult r = swapped ? detail::launch_swapab(call) : detail::launch_ffma(call);
  MOE_CHECK(r.stage == nullptr, MOE_STATUS_DEVICE_ERROR,
            "fp8 block GEMM ({}, {} out, n={}, k={}) {}: {}", fp8_tiles_name(tiles),
            a.f32_out ? "f32" : "bf16", a.n, a.k, r.stage ? r.stage : "",
            r.message ? r.message : "");
}

}  // namespace

const char* fp8_tiles_name(Fp8Tiles t) {
  if (t == Fp8Tiles::kTokensFfma)
    return "token tiles 128x128, own kernel (FFMA promotion, 64-row halves)";
  if (t == Fp8Tiles::kTokensFfma192)
    return "token tiles 192x128, own kernel (FFMA promotion, 64-row thirds)";
  if (t == Fp8Tiles::kTokensFfmaSplitK)
    return "token tiles 128x128 split in K over a CTA pair, own kernel (FFMA promotion)";
  if (t == Fp8Tiles::kWeightsFfma)
    return "weight tiles 128x16 (operands swapped), own kernel (FFMA promotion)";
  if (t == Fp8Tiles::kWeightsFfmaSplitK)
    return "weight tiles 128x16 (operands swapped) split in K over a CTA pair, own kernel (FFMA "
           "promotion)";
  return gpu::fp8_block_tiles_name(cutlass_tiles(t));
}

size_t fp8_gemm_workspace_bytes(int groups, int sm_count) {
  return gpu::fp8_block_gemm_workspace_bytes(groups, sm_count);
}

void run_fp8_grouped_gemm(Fp8Tiles tiles, const Fp8GemmArgs& a, cudaStream_t stream) {
  MOE_CHECK(a.fused == nullptr || can_fuse_gemm1(tiles), MOE_STATUS_UNSUPPORTED,
            "fp8 block GEMM ({}): only the own kernel's whole-K token tiles fuse GEMM1's "
            "activation",
            fp8_tiles_name(tiles));
  if (is_own_kernel(tiles)) {
    run_ffma(tiles, a, stream);
    return;
  }
  gpu::Fp8BlockTiles t = cutlass_tiles(tiles);
  // CTA pairs cannot split an odd number of N tiles: that GEMM runs unpaired.
  if (t == gpu::Fp8BlockTiles::kTokensPaired && (a.n / 128) % 2 != 0)
    t = gpu::Fp8BlockTiles::kTokens;
  gpu::run_fp8_block_grouped_gemm(t, a, stream);
}

}  // namespace moe::deepgemm
