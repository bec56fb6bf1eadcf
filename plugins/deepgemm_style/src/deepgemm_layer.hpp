// One deepgemm_style layer on the GPU: fp8 128x128 block-scale weights kept as the checkpoint
// gives them (e4m3 [N, K], K contiguous) with their scales turned MN-major, uploaded at prepare.
// At run time: permutation with the per-token 1x128 activation quantisation fused into its
// gather, grouped fp8 GEMM1, the activation with the intermediate's 1x128 re-quantisation in
// one kernel, grouped fp8 GEMM2, the sink experts apart (bf16, moe_cuda/sink_experts.hpp) into
// their slots' rows, the weighted combine; all on the caller's stream and workspace (capturable in
// a CUDA graph).
//
// Two row layouts (docs/design.md §12): `masked` for small batches (each group owns T rows of a
// [G * T, K] buffer, filled by one kernel without a sort), `contiguous` otherwise (sorted
// segments). Options: `layout: auto | contiguous | masked`, `masked_max_tokens: N` (the auto
// threshold, default 64), `gemm_tiles: auto | tokens | tokens_paired | tokens_ffma | tokens_ffma192
// | tokens_ffma_split | weights_ffma | weights_ffma_split | weights`, `gemm1_epilogue: auto |
// separate | fused` (fused: where the own kernel's token tiles run GEMM1 of a gated layer, the
// activation and the re-quantisation are its epilogue).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "fp8_gemm.hpp"
#include "moe/abi/moe_abi.h"
#include "moe/sdk/options.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/verdict.hpp"
#include "moe_cuda/device.hpp"
#include "moe_cuda/permute.hpp"
#include "moe_cuda/sink_experts.hpp"

namespace moe::deepgemm {

// Why this backend cannot run `p` on this machine (reason NONE: it can).
sdk::Verdict check_support(const moe_problem& p);

enum class RowLayout { kContiguous, kMasked };
const char* row_layout_name(RowLayout l);

struct LayerOptions {
  std::optional<RowLayout> layout;  // nullopt = auto
  int64_t masked_max_tokens = 64;
  std::optional<Fp8Tiles> tiles;    // nullopt = auto
  std::optional<bool> fused_gemm1;  // gemm1_epilogue: nullopt = auto, else fused / separate
};
LayerOptions parse_options(const Options& options);
// The options that cannot serve `p` (the own kernel's tilings or a fused GEMM1 with sink experts,
// a fused GEMM1 with relu2 or a CUTLASS tiling): CONFIG_ERROR naming the option.
void check_options(const moe_problem& p, const LayerOptions& o);
// Whether GEMM1 run with `tiles` on a batch of `tokens` writes the intermediate's codes itself
// (docs/design.md §12): `fused` wherever the own kernel runs; `auto` on a gated activation without
// sink experts where it runs its 192-row tiles, or its 128-row tiles from hidden 4096 and 32 rows
// an expert (where the fused epilogue measured no loss).
bool fuses_gemm1(const moe_problem& p, const LayerOptions& o, Fp8Tiles tiles, int64_t tokens);

// The GEMM tiling `gemm_tiles: auto` takes for a batch of `tokens` (docs/design.md §12): the own
// kernel where a layer's rows are few in all (at most 4096) and at most 176 an expert, in
// 192-row tiles past 112 rows an expert; else CUTLASS's token tiles, or its swap-AB weight
// tiles under 32 rows an expert. Layers with sink experts keep CUTLASS (the own kernel runs every
// group).
Fp8Tiles auto_fp8_tiles(const moe_problem& p, int64_t tokens);
// Where `auto` splits the K of GEMM2 (N columns, K deep) on the own kernel's 128-row tiles over
// CTA pairs: its whole tiles, under even routing, would keep at most half of `sm_count` SMs busy;
// K of two blocks or more.
bool split_k_pays(const moe_problem& p, int64_t tokens, int64_t n, int64_t k, int sm_count);

// What the plugin does with `p`, for `moe describe` / `moe select`.
std::string describe(const moe_problem& p, const LayerOptions& o);

class DeviceLayer {
 public:
  DeviceLayer(const moe_problem& problem, const moe_weights& weights, const Options& options);

  size_t workspace_size(int64_t tokens) const;
  void run(const moe_run_args& args) const;

  RowLayout layout(int64_t tokens) const;
  Fp8Tiles tiles(int64_t tokens) const;
  // GEMM2's tiling in that batch: tiles(), or its split-K form (split_k_pays) under `auto`.
  Fp8Tiles gemm2_tiles(int64_t tokens) const;

  // Where a run keeps each stage's result inside the caller's workspace (public so the stage
  // test can read them back): the same walk sizes (base == nullptr) and fills.
  struct Workspace {
    gpu::Permutation perm;
    uint8_t* rows;      // [R, H] e4m3: each group's tokens
    float* row_scales;  // [H/128][R]
    float* gemm1;       // [R, n1] f32
    uint8_t* act;       // [R, I] e4m3
    float* act_scales;  // [I/128][R]
    uint16_t* gemm2;    // [R, H] bf16
    void* gemm_ws;
    void* sinks;    // SinkExperts::workspace_bytes (none without sinks)
    void* staging;  // contiguous layout: the tokens quantised once (gpu::Fp8Staging)
  };
  Workspace carve(void* base, int64_t tokens, RowLayout layout, size_t* bytes) const;

 private:
  Problem problem_;
  LayerOptions options_;
  int64_t groups_ = 0;                       // the permutation's: local experts, sinks, shared
  int64_t n1_ = 0;                           // GEMM1 output width: 2I gated, I for relu2
  gpu::DeviceBuffer w13_, w2_;               // [groups][n1, H], [groups][H, I] e4m3
  gpu::DeviceBuffer s13_, s2_;               // [groups][H/128][n1/128], [groups][I/128][H/128]
  gpu::DeviceBuffer w13_ptrs_, w2_ptrs_;     // [groups] pointers into them
  gpu::DeviceBuffer s13_ptrs_, s2_ptrs_;     // [groups]
  gpu::DeviceBuffer local_map_;              // [E] global -> local expert id, -1 elsewhere
  gpu::DeviceBuffer b13_, b2_;               // [E, n1], [E, H] f32 with expert_bias, else empty
  std::unique_ptr<gpu::SinkExperts> sinks_;  // bf16 sink experts, run apart; null without them
  size_t gemm_ws_bytes_ = 0;
  int sm_count_ = 0;
};

}  // namespace moe::deepgemm
