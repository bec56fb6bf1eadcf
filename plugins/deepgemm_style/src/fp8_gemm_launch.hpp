// The boundary between the nvcc-compiled launcher of the own kernel (fp8_gemm_ffma_launch.cu)
// and the host code that checks and reports (fp8_gemm.cpp): plain types only, no exceptions, no
// fmt. (The CUTLASS GEMMs are common_cuda's: moe_cuda/fp8_block_gemm.hpp.)
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

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
  int block_m = 128;  // rows per tile: 128 (two consumer warpgroups) or 192 (three)
  // GEMM1 with the gated activation and the 1x128 quantisation in its epilogue (Fp8FusedGemm1):
  // `out` then takes [R, N/2] e4m3 codes and `code_scales` [N/256][code_scale_ld] scales.
  bool fused = false;
  float* code_scales = nullptr;
  int64_t code_scale_ld = 0;
  const float* bias = nullptr;  // [bias_groups][bias_ld] f32, GEMM1's columns, or null
  int bias_groups = 0;
  int64_t bias_ld = 0;
  int activation = 0;  // moe_activation (gated)
  float alpha = 0, limit = 0;
  int gelu_tanh = 0;
  int sm_count = 0;
  cudaStream_t stream = nullptr;
};

// The own kernel (kernels/sm90_fp8_grouped_gemm_ffma.cuh, fp8_gemm_ffma_launch.cu): needs the
// stacked weights and scales, at most ffma_max_groups() groups, no workspace.
int ffma_max_groups();
LaunchResult launch_ffma(const GemmCall& call) noexcept;

}  // namespace moe::deepgemm::detail
