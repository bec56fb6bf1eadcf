// Host side of deepgemm_style's grouped fp8 block-scale GEMMs: the shared CUTLASS ones
// (moe_cuda/fp8_block_gemm.hpp) and the plugin's own (kernels/sm90_fp8_grouped_gemm_ffma.cuh).
// Every pointer is device memory; nothing is read back to the host, so a call can be captured in
// a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "fp8_gemm_launch.hpp"
#include "moe_cuda/fp8_block_gemm.hpp"

namespace moe::deepgemm {

enum class Fp8Tiles {
  kTokens,             // 128 tokens x 128 features per tile: many tokens per expert
  kWeights,            // swap AB, 128 features x 32 tokens per tile: few tokens per expert
  kTokensFfma,         // own kernel: 128 tokens x 128 features, a half-empty tile costs half
  kTokensFfma192,      // own kernel: 192 tokens x 128 features, 128 + a few rows in one tile
  kTokensFfmaSplitK,   // own kernel: 128x128 tiles, K split over a CTA pair (few tiles in all)
  kTokensPaired,       // kTokens in CTA pairs sharing the row tile by multicast (N/128 even)
  kWeightsFfma,        // own kernel, operands swapped: 128 features x 16 tokens (decode)
  kWeightsFfmaSplitK,  // kWeightsFfma with K split over a CTA pair (fewer tiles than SMs)
};

// Whether the tiling is the plugin's own kernel (stacked weights, no skipped groups).
inline bool is_own_kernel(Fp8Tiles t) {
  return t == Fp8Tiles::kTokensFfma || t == Fp8Tiles::kTokensFfma192 ||
         t == Fp8Tiles::kTokensFfmaSplitK || t == Fp8Tiles::kWeightsFfma ||
         t == Fp8Tiles::kWeightsFfmaSplitK;
}
// Whether the tiling splits K over a CTA pair, and whether it is the own kernel with its
// operands swapped.
inline bool splits_k(Fp8Tiles t) {
  return t == Fp8Tiles::kTokensFfmaSplitK || t == Fp8Tiles::kWeightsFfmaSplitK;
}
inline bool swaps_operands(Fp8Tiles t) {
  return t == Fp8Tiles::kWeightsFfma || t == Fp8Tiles::kWeightsFfmaSplitK;
}
// Whether the tiling can run GEMM1 with its activation fused (the own kernel's whole-K token
// tiles).
inline bool can_fuse_gemm1(Fp8Tiles t) {
  return t == Fp8Tiles::kTokensFfma || t == Fp8Tiles::kTokensFfma192;
}

const char* fp8_tiles_name(Fp8Tiles t);

// Workspace for one grouped GEMM of `groups` groups (group arrays + CUTLASS's own), enough for
// every tiling (the own kernel needs none).
size_t fp8_gemm_workspace_bytes(int groups, int sm_count);

// The shared CUTLASS GEMMs' operands (moe_cuda/fp8_block_gemm.hpp), plus the same weights and
// scales stacked group after group, which only the own kernel (is_own_kernel) reads.
struct Fp8GemmArgs : gpu::Fp8BlockGemmArgs {
  const uint8_t* weight_stack = nullptr;  // [groups, N, K] e4m3
  const float* w_scale_stack = nullptr;   // [groups][K/128][N/128]
  const Fp8FusedGemm1* fused = nullptr;   // own kernel only: GEMM1 with its activation fused
  Fp8Timeline timeline;                   // own kernel only: per-tile clocks (measurement)
  // The group offsets or counts were written before the launch just ahead of this GEMM on the
  // stream began (by a launch two or more back, or the host), and no launch in flight writes the
  // weights: the swapped-operand kernel may then build its schedule and start streaming weights
  // before it awaits that launch (PDL). The layer sets it; a caller that cannot say leaves it.
  bool groups_settled = false;
};

void run_fp8_grouped_gemm(Fp8Tiles tiles, const Fp8GemmArgs& args, cudaStream_t stream);

}  // namespace moe::deepgemm
