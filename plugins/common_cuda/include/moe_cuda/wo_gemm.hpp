// Weight-only grouped GEMMs: mxfp4, nvfp4 or mxfp8 weights in the Hopper weight-only layouts
// (moe_cuda/fp4_chunks.hpp, moe_cuda/mxfp8_chunks.hpp) times bf16 rows, dequantised in the main
// loop and multiplied with bf16 wgmma (kernels/sm90_wo_grouped_gemm.cuh), bf16 out, GEMM1's bias
// and activation in the epilogue; bf16 weights (moe_cuda/bf16_tiles.hpp) run the same GEMM with
// nothing to dequantise, and e4m3 weights (fp8_tensor: per-tensor scales) the same GEMM on e4m3
// rows with e4m3 wgmma. Every pointer is device memory and nothing is read back to the
// host, so a call can be captured in a CUDA graph. Needs CUTLASS: the library moe_cuda_wo_gemm
// exists only in builds that found it.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "moe/abi/moe_abi.h"

namespace moe::gpu {

enum class WoWeights { kMxfp4, kNvfp4, kMxfp8, kBf16, kE4m3 };

// The bytes of one prepared chunk (128 rows x 128 K and their scales; bf16, e4m3: the 128 x 128
// weights, which are rows of a tile stack rather than a chunk of their own).
int64_t wo_chunk_bytes(WoWeights w);
const char* wo_weights_name(WoWeights w);

// How bf16 and e4m3 weight rows are laid out (weight_rows).
enum class WoWeightRows {
  kTiles,  // moe_cuda/bf16_tiles.hpp's tiles: a gated tile's rows paired 8 by 8 (kRowPairs)
  // TensorRT-LLM's layout for CUTLASS (docs/design.md §6): [groups][rows][weight_ld], a gated
  // w13 after w31 and the gated interleave (column c's up row 2c, its gate row 2c + 1), read in
  // place: the tiles are 128-row windows of a group (weight_group_rows a multiple of 16), so
  // rows past the group's (the next group's, or none) only feed columns past out_cols.
  kInterleaved,
};

enum class WoEpilogue {
  kGated,       // a tile is 64 columns' gate and up rows (GatePairing::kRowPairs): act(gate, up)
  kPlain,       // 128 output columns per tile, as computed (plus the bias)
  kPlainRelu2,  // the same through relu2 (a non-gated GEMM1)
};

struct WoGemmArgs {
  WoWeights weights = WoWeights::kMxfp4;
  int groups = 0;
  // [groups + 1]: group g's rows [offsets[g], offsets[g+1]), offsets[groups] <= max_rows (device
  // memory: the caller's promise, which the kernel cannot check).
  const int64_t* offsets = nullptr;
  // Groups [skip_begin, skip_end) run no rows whatever their offsets say (sink experts, computed
  // apart in bf16); their chunks or weight rows are never read.
  int skip_begin = 0, skip_end = 0;
  int64_t max_rows = 0;             // rows that `rows` and `out` hold
  const void* rows = nullptr;       // [max_rows, k] bf16 (e4m3: e4m3), 16-byte aligned
  int64_t k = 0;                    // elements per row (a multiple of 8); k <= 128 k_stages
  const uint8_t* chunks = nullptr;  // [groups][n_tiles][k_stages] prepared chunks (not bf16, e4m3)
  // bf16, e4m3: [groups x n_tiles x 128, 128 k_stages] weight rows, tile by tile
  // (moe_cuda/bf16_tiles.hpp); with kInterleaved, [groups x weight_group_rows, weight_ld]
  const void* weight_rows = nullptr;
  WoWeightRows weight_order = WoWeightRows::kTiles;
  int64_t weight_group_rows = 0;   // kInterleaved: rows of a group (a multiple of 16)
  int64_t weight_ld = 0;           // kInterleaved: elements of a row (>= k, a multiple of 8)
  int n_tiles = 0, k_stages = 0;   // k_stages: 128-K chunks (bf16 too)
  const float* scale_2 = nullptr;  // nvfp4: [groups] per-expert scale; e4m3: weight scales
  // e4m3 only: the activation scale (device [1]), the shared expert's group (-1: none) and its
  // own scale (device [1], or null: act_scale); a group's outputs are scaled by
  // scale_2[g] x its activation scale.
  const float* act_scale = nullptr;
  const float* act_scale_shared = nullptr;
  int shared_group = -1;
  const float* bias = nullptr;  // [bias_groups][bias_ld] f32, or null
  int bias_groups = 0;
  int64_t bias_ld = 0;
  // kGated: where column c's up bias is in its bias row: up_offset + c (kTiles), 2c (kInterleaved,
  // whose gate bias is at 2c + 1: the bias prepared with the weights)
  int64_t up_offset = 0;
  WoEpilogue epilogue = WoEpilogue::kPlain;
  uint16_t* out = nullptr;   // [max_rows, out_ld] bf16, 16-byte aligned (or null: out_f32,
                             // out_e4m3)
  float* out_f32 = nullptr;  // e4m3 only: [max_rows, out_ld] f32 instead of out
  // With out_f32 (or null): device uint32 [2] that receive, by atomicMax, the largest |value|
  // stored as float bits, [0] over the routed groups and [1] over shared_group's; the caller
  // zeroes both first. What the per-tensor quantisation's amax pass over out_f32 would find.
  uint32_t* out_amax = nullptr;
  // e4m3 only, instead of out / out_f32: [max_rows, out_ld] e4m3 codes of value / scale
  // (*out_e4m3_scale, device [1], every group) with the per-tensor quantisation's rounding, bit
  // for bit (moe_cuda/quantize.hpp): GEMM1 of a static-scale layer, whose intermediate then
  // never exists in f32.
  uint8_t* out_e4m3 = nullptr;
  const float* out_e4m3_scale = nullptr;
  int64_t out_ld = 0;
  int64_t out_cols = 0;     // columns stored, a multiple of 8 (<= 64 or 128 per weight tile)
  int tokens_per_tile = 0;  // 16, 32, 64, 96, 128, 192 (256: bf16); 0: wo_tokens_per_tile
  // bf16: weight rows a CTA tile, 128 or 256 (tall tiles, wo_tall_tiles); 0: 128
  int weight_tile_rows = 0;
  // bf16 on 128-row weight tiles (ignored on tall ones): a group's last token block, when it is
  // short, is computed, and its rows loaded, at the narrowest of 16, 32, 64 and 128 tokens under
  // the tile width that holds it (wo_narrow_width), rather than at the whole tile width.
  bool narrow_last_blocks = false;
  int sm_count = 0;
};

// The tile width for `rows` rows spread over `groups` groups of a layer of `hidden`: the tile of
// least expected cost under a model of token blocks and weight streams fitted to A/B runs (16 to
// 192; 256 for bf16 weights past 512 rows an expert); the model, and what measured it, in
// src/wo_gemm.cpp. `tall`: for tall tiles (bf16 weight_tile 256), which pair with 64 and 128
// tokens only: 96 and 192 are not candidates.
int wo_tokens_per_tile(int64_t rows, int groups, WoWeights weights, int64_t hidden,
                       bool tall = false);
// That rule in words, for `moe describe`: its picks as steps ("tokens a tile by the batch's rows
// an expert on average: 16 up to 10, 32 up to 24, ...").
std::string wo_token_tile_rule(WoWeights weights, int64_t hidden);

// Whether a launch of `tokens_per_tile`-token tiles takes tall tiles (256 weight rows: two
// prepared tiles a CTA, each consumer warpgroup two 64-row blocks, twice the flops per token byte):
// asked for by weight_tile_rows = 256, bf16 weights, 64 or 128 tokens a tile, n_tiles even.
bool wo_tall_tiles(const WoGemmArgs& a, int tokens_per_tile);

// With narrow_last_blocks, the tokens a block of `count` rows (1..tokens_per_tile) of a launch of
// `n_tiles` weight tiles is computed at: the narrowest of 16, 32, 64 and 128 below the tile width
// that holds it (where the launch pairs its CTAs, 64 tokens a tile or more and n_tiles even, at
// least 32), else the tile width.
int wo_narrow_width(int count, int tokens_per_tile, int n_tiles);

// How a launch views bf16 and e4m3 weight rows: the rows of a group, and whether each 16 rows of
// a box land as up rows then gate rows (kInterleaved gated w13: the epilogue swaps them back).
struct WoWeightView {
  int64_t group_rows = 0;
  bool up_first = false;
};
WoWeightView wo_weight_view(const WoGemmArgs& a);
// The TMA descriptor of that view over a.weight_rows (moe_cuda/tensor_map.hpp's paired rows,
// 128 bytes of K a box); false where the driver refuses it.
bool encode_wo_weights_map(CUtensorMap* map, const WoGemmArgs& a) noexcept;

// The most groups one launch schedules (the kernel keeps their tile prefix in shared memory).
int wo_gemm_max_groups();

// The checks every launch makes (sizes, pointers, alignment, the tile width); throws moe::Error.
void check_wo_gemm_operands(const WoGemmArgs& a);

// `p` gives the activation of kGated (its kind, alpha, limit, gelu form).
void run_wo_grouped_gemm(const moe_problem& p, const WoGemmArgs& a, cudaStream_t stream);

}  // namespace moe::gpu
