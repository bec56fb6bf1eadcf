// The boundary between the nvcc-compiled launcher of the own kernel (fp8_gemm_ffma_launch.cu)
// and the host code that checks and reports (fp8_gemm.cpp): plain types only, no exceptions, no
// fmt. (The CUTLASS GEMMs are common_cuda's: moe_cuda/fp8_block_gemm.hpp.)
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace moe::deepgemm {

// GEMM1 of a gated layer with the activation and the intermediate's per-row 1x128 e4m3
// quantisation in the own kernel's epilogue (docs/design.md §12): the weights' N = 2I rows are I
// gate rows then I up rows (I % 128 == 0), and instead of `out` the GEMM writes
// codes[r, :I] and scale (r, b) at scales[b * scale_ld + r], what the activation kernel
// (moe_cuda/activation.hpp, out_fp8 from gemm1_f32) would make of the f32 output, bit for bit.
// Plain types, so the launcher reads the caller's struct as it is (fp8_gemm.hpp's
// Fp8GemmArgs::fused points at one).
struct Fp8FusedGemm1 {
  int activation = 0;  // a gated moe_activation
  float alpha = 0, limit = 0;
  int gelu_tanh = 0;
  const float* bias = nullptr;  // [bias_groups][bias_ld] f32 in the weights' row order, or null
  int bias_groups = 0;          // groups from bias_groups on take none (a shared expert)
  int64_t bias_ld = 0;
  uint8_t* codes = nullptr;  // [R, I], 16-byte aligned
  float* scales = nullptr;   // [I/128][scale_ld]
  int64_t scale_ld = 0;
};

}  // namespace moe::deepgemm

namespace moe::deepgemm {

// Measurement of the own kernel (moe_deepgemm_gemm_bench --timeline): per CTA and consumer
// warpgroup, up to `tiles` records of kWords uint64: the tile's unit, and clock64() at its start
// (before its first stage wait), at the end of its main loop, before and after the fused
// epilogue's exchange of row maxima with the peer CTA (both the main loop's end when not fused),
// and at the end of its epilogue, at records[((cta * consumers + consumer) * tiles + i) * kWords];
// bits 32 and 33 of the unit's word: the fused epilogue's activation and quantisation took their
// exact paths (the rare inputs kernels/exact_math.cuh's fast forms leave) in the first warp.
// 128-row tiles only (two consumers; the 192-row instances record nothing). Null records:
// nothing is recorded.
struct Fp8Timeline {
  static constexpr int kWords = 6;
  unsigned long long* records = nullptr;
  int tiles = 0;
  size_t words = 0;  // records' size: at least sm_count * 2 * tiles * kWords (one CTA per SM)
};

}  // namespace moe::deepgemm

namespace moe::deepgemm::detail {

struct LaunchResult {
  const char* stage = nullptr;    // what failed ("setup", "can_implement", ...), nullptr if ok
  const char* message = nullptr;  // cudaGetErrorString / cutlassGetStatusString
};

// One grouped GEMM (kernels/sm90_fp8_grouped_gemm_ffma.cuh): out[r, :N] = dequant(rows[r, :K])
// * dequant(weights[g])^T for the rows r of each group g.
struct GemmCall {
  int groups = 0;
  const int64_t* offsets = nullptr;  // contiguous layout: [groups + 1], device
  const int32_t* counts = nullptr;   // masked layout: [groups], device (selects it)
  int64_t max_m = 0;                 // masked layout: rows per group
  int n = 0, k = 0;
  const void* rows = nullptr;         // [R, K] e4m3
  const float* row_scales = nullptr;  // [K/128][scale_ld]
  int32_t scale_ld = 0;
  const void* weight_stack = nullptr;    // [groups, N, K] e4m3 (the own kernel's TMA map)
  const float* w_scale_stack = nullptr;  // [groups][K/128][N/128]
  void* out = nullptr;                   // [R, N] bf16, or f32 with f32_out
  bool f32_out = false;
  int block_m = 128;     // rows per tile: 128 (two consumer warpgroups) or 192 (three)
  bool split_k = false;  // a CTA pair a tile, each half of K (128-row tiles, not fused, K >= 256)
  // GEMM1 with the gated activation and the 1x128 quantisation in its epilogue, or null; `out`
  // is then its codes.
  const Fp8FusedGemm1* fused = nullptr;
  Fp8Timeline timeline;         // measurement only: off unless its buffer is given
  bool groups_settled = false;  // Fp8GemmArgs::groups_settled (the swapped kernel reads it)
  int sm_count = 0;
  cudaStream_t stream = nullptr;
};

// The own kernel (kernels/sm90_fp8_grouped_gemm_ffma.cuh, fp8_gemm_ffma_launch.cu): needs the
// stacked weights and scales, at most ffma_max_groups() groups, no workspace.
int ffma_max_groups();
LaunchResult launch_ffma(const GemmCall& call) noexcept;
// The own kernel with the operands swapped (kernels/sm90_fp8_grouped_gemm_swapab.cuh): 128 weight
// rows x 16 token rows a tile, for a few rows an expert; block_m is ignored, split_k splits K over
// a CTA pair (K of 2 blocks or more), and it takes no fused epilogue or timeline. The same groups
// limit.
LaunchResult launch_swapab(const GemmCall& call) noexcept;

}  // namespace moe::deepgemm::detail
