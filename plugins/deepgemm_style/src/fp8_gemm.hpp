// Host side of deepgemm_style's grouped fp8 block-scale GEMMs: the shared CUTLASS ones
// (moe_cuda/fp8_block_gemm.hpp) and the plugin's own (kernels/sm90_fp8_grouped_gemm_ffma.cuh).
// Every pointer is device memory; nothing is read back to the host, so a call can be captured in
// a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "moe_cuda/fp8_block_gemm.hpp"

namespace moe::deepgemm {

enum class Fp8Tiles {
  kTokens,         // 128 tokens x 128 features per tile: many tokens per expert
  kWeights,        // swap AB, 128 features x 32 tokens per tile: few tokens per expert
  kTokensFfma,     // own kernel: 128 tokens x 128 features, a half-empty tile costs half
  kTokensFfma192,  // own kernel: 192 tokens x 128 features, 128 + a few rows in one tile
  kTokensPaired,   // kTokens in CTA pairs sharing the row tile by multicast (N/128 even)
};

// Whether the tiling is the plugin's own kernel (stacked weights, no skipped groups).
inline bool is_own_kernel(Fp8Tiles t) {
  return t == Fp8Tiles::kTokensFfma || t == Fp8Tiles::kTokensFfma192;
}

const char* fp8_tiles_name(Fp8Tiles t);

// Workspace for one grouped GEMM of `groups` groups (group arrays + CUTLASS's own), enough for
// every tiling (the own kernel needs none).
size_t fp8_gemm_workspace_bytes(int groups, int sm_count);

// GEMM1 of a gated layer with the activation and the intermediate's per-row 1x128 e4m3
// quantisation in the own kernel's epilogue (docs/design.md §12): the weights' N = 2I rows are I
// gate rows then I up rows (I % 128 == 0), and instead of `out` the GEMM writes
// codes[r, :I] and scale (r, b) at scales[b * scale_ld + r], what the activation kernel
// (moe_cuda/activation.hpp, out_fp8 from gemm1_f32) would make of the f32 output, bit for bit.
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

// The shared CUTLASS GEMMs' operands (moe_cuda/fp8_block_gemm.hpp), plus the same weights and
// scales stacked group after group, which only the own kernel (is_own_kernel) reads.
struct Fp8GemmArgs : gpu::Fp8BlockGemmArgs {
  const uint8_t* weight_stack = nullptr;  // [groups, N, K] e4m3
  const float* w_scale_stack = nullptr;   // [groups][K/128][N/128]
  const Fp8FusedGemm1* fused = nullptr;   // own kernel only: GEMM1 with its activation fused
};

void run_fp8_grouped_gemm(Fp8Tiles tiles, const Fp8GemmArgs& args, cudaStream_t stream);

}  // namespace moe::deepgemm
