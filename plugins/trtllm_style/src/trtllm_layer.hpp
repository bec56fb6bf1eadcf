// One trtllm_style layer on the GPU: weights (bf16, or fp8_tensor e4m3 with per-matrix scales)
// prepared in the TensorRT-LLM layout (w31 swap and gated interleave, so GEMM1 writes (up_i,
// gate_i) pairs side by side) and uploaded at prepare; at run time permute -> gather (fp8_tensor:
// quantise the hidden states first) -> grouped GEMM1 with the activation in its epilogue ->
// (fp8_tensor: quantise the intermediate) -> grouped GEMM2 -> weighted combine, all on the caller's
// stream and workspace (capturable in a CUDA graph). Option `activation_epilogue: separate` runs
// the activation as a kernel of its own instead (GEMM1 then writes its 2I-wide output; bf16
// layers only: fp8_tensor always fuses, its epilogue writing the f32 activation that the
// intermediate's quantisation reads). `auto` (the default) fuses with few rows per expert (swap-AB
// weight tiles) and otherwise runs 128x256 tiles with the separate kernel, the faster pair there
// (bench/NOTES.md). `gemm_tiles: auto | tokens | weights | wide`.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>

#include "device.hpp"
#include "grouped_gemm.hpp"
#include "layout/prepare.hpp"
#include "moe/abi/moe_abi.h"
#include "moe/sdk/options.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/sink_experts.hpp"

namespace moe::trtllm {

inline bool is_fp8_block(const moe_problem& p) {
  return p.format == MOE_FORMAT_FP8_BLOCK;
}

// mxfp4, nvfp4 and mxfp8 (src/weight_only_run.cpp): weight-only on bf16 activations, in the
// Hopper weight-only layouts.
bool is_weight_only(const moe_problem& p);
struct WoGeometry {
  int64_t padded_h = 0, padded_i = 0;   // K of GEMM1 and GEMM2, whole 128-deep chunks
  int64_t w13_tiles = 0, w2_tiles = 0;  // 128-row weight tiles per expert
};
WoGeometry wo_geometry(const moe_problem& p);
// What `moe describe` prints for a weight-only layer: the layout prepared instead of
// TensorRT-LLM's.
std::string describe_weight_only_layout(const moe_problem& p);

// The rows a batch of `tokens` gives the local groups with uniform routing (under expert
// parallelism local_experts/experts of the routed ones), sinks and shared expert included.
int64_t expected_group_rows(const moe_problem& p, int64_t tokens);
// The groups the weight-only GEMM schedules for `p`: the local experts and the shared one.
int64_t weight_only_groups(const moe_problem& p);
// bf16_gemm: auto. Whether a bf16 layer runs on the weight-only GEMM (bf16 tiles) rather than
// CUTLASS's: when it can (no sinks, few enough groups), unless CUTLASS's options are set
// (`cutlass_options`: gemm_tiles or activation_epilogue other than auto), and when token_tile or
// weight_tile is set (`own_options`), or when even a max_tokens batch averages at most 128 rows
// an expert (16 past hidden 4096).
bool auto_own_bf16(const moe_problem& p, bool cutlass_options, bool own_options);
// The most rows an expert (on average, for a max_tokens batch) up to which bf16_gemm and fp8_gemm
// auto take the weight-only GEMM: 128, or 16 past hidden 4096.
int64_t own_gemm_most_rows(const moe_problem& p);
// bf16_gemm: auto on a layer that prepared CUTLASS's layout (auto_own_bf16 false): whether
// batches of at most own_gemm_most_rows rows an expert run the weight-only GEMM on those weights
// in place (gpu::WoWeightRows::kInterleaved) instead of CUTLASS's GEMMs: when it can (no sinks,
// few enough groups, no CUTLASS options) and GEMM1's n1 rows and the hidden size are whole
// 128-row tiles.
bool own_gemm_in_place(const moe_problem& p, int64_t n1, bool cutlass_options);
// Where a batch of `rows` over `groups` stays on CUTLASS's GEMMs although in place is allowed:
// from hidden 4096, 1 to kInPlaceLosesRows rows an expert on average.
constexpr int64_t kInPlaceLosesRows = 8;
bool in_place_loses(const moe_problem& p, int64_t rows, int64_t groups);
// fp8_gemm: auto. Whether an fp8_tensor layer runs on the weight-only GEMM's e4m3 instance rather
// than CUTLASS's promoted fp8 GEMMs: when it can (few enough groups) and gemm_tiles is unset
// (`cutlass_options`), when token_tile or weight_tile is set (`own_options`), up to hidden
// kOwnFp8AnyRowsHidden at any batch, and past it when a max_tokens batch averages at most
// own_gemm_most_rows rows an expert.
constexpr int64_t kOwnFp8AnyRowsHidden = 4096;
bool auto_own_fp8(const moe_problem& p, bool cutlass_options, bool own_options);

// Why this backend cannot run `p` on this machine, or MOE_REASON_NONE.
struct Refusal {
  moe_reason reason = MOE_REASON_NONE;
  std::string message;
};
Refusal check_support(const moe_problem& p);

// The layout this backend prepares: w31 + gated interleave (fp8_block: w31 alone, its scale
// blocks covering 128 rows), no row shuffle, padded I.
PrepareOptions layout_options(const moe_problem& p, const Options& options);

class DeviceLayer {
 public:
  DeviceLayer(const moe_problem& problem, const moe_weights& weights, const Options& options);

  size_t workspace_size(int64_t tokens) const;
  void run(const moe_run_args& args) const;
  const LayoutTag& tag() const { return tag_; }

 private:
  struct Workspace;
  std::array<size_t, 9> pieces(int64_t tokens) const;
  Workspace carve(void* base, int64_t tokens) const;
  void run_fp8_block(const moe_run_args& args, const Workspace& ws, cudaStream_t stream) const;
  void prepare_weight_only(const moe_problem& p, const moe_weights& w);
  void run_weight_only(const moe_run_args& args, const Workspace& ws, cudaStream_t stream) const;
  // fp8_tensor, both GEMM paths: the batch's hidden states quantised over one scale (padding
  // tokens included, as the reference does) and their e4m3 rows gathered into ws.rows; returns
  // the scales GEMM1 multiplies by (activation, weights, the shared expert's group).
  Fp8Scales quantize_hidden_fp8(const moe_run_args& args, const Workspace& ws,
                                cudaStream_t stream) const;
  // fp8_tensor (but static scales on the weight-only GEMM, whose GEMM1 writes the codes): GEMM1's
  // f32 intermediate (ws.act) quantised into ws.act_codes, the routed rows
  // over one scale and the shared expert's (the last group) over its own (dynamic), or a2_scale;
  // the padding columns are zero and move no amax. Returns the scales GEMM2 multiplies by.
  // `gemm1_amax` (dynamic only): the two amaxes GEMM1's epilogue reduced (routed, shared;
  // WoGemmArgs::out_amax), so only the quantisation passes run.
  Fp8Scales quantize_intermediate_fp8(const Workspace& ws, cudaStream_t stream,
                                      const uint32_t* gemm1_amax = nullptr) const;
  // fp8_tensor_static: a2_scale on the device ([1], every group's intermediate).
  const float* intermediate_static_scale() const { return static_scales_.as<float>() + 1; }
  // mxfp4, nvfp4, mxfp8, bf16 with bf16_gemm: own and fp8_tensor with fp8_gemm: own run on the
  // weight-only GEMM.
  bool weight_only_path() const;
  // The options and problems bf16_gemm: own and fp8_gemm: own cannot take (and token_tile off
  // the weight-only GEMM): config errors naming them.
  void check_own_gemm(const moe_problem& p, const Options& options) const;

  Problem problem_;
  LayoutTag tag_;
  int64_t groups_ = 0;                     // local experts, then sinks, then the shared expert
  int64_t n1_ = 0;                         // GEMM1 output width: 2P gated, P for relu2
  int64_t padded_i_ = 0;                   // P
  std::optional<GemmTiles> tiles_option_;  // gemm_tiles; nullopt = auto
  std::optional<bool> fuse_option_;        // activation_epilogue fused/separate; nullopt = auto
  std::optional<int> token_tile_option_;   // token_tile: 16, 32, ..., 256; nullopt = auto
  std::optional<int> weight_tile_option_;  // weight_tile: 128, 256; nullopt = auto
  // last_block: narrow (bf16 on the weight-only GEMM: WoGemmArgs::narrow_last_blocks); auto and
  // full: the tile's width
  bool narrow_last_blocks_ = false;
  bool own_bf16_ = false;      // bf16 on the weight-only GEMM (bf16 tiles)
  bool own_fp8_ = false;       // fp8_tensor on its e4m3 instance (e4m3 tiles)
  bool own_in_place_ = false;  // bf16 on CUTLASS's layout: own_gemm_in_place
  // Whether a batch of `tokens` runs on the weight-only GEMM over CUTLASS's layout.
  bool runs_in_place(int64_t tokens) const;
  WoGeometry wo_;  // mxfp4, nvfp4, mxfp8
  bool small_groups(int64_t tokens) const;
  bool fuse_activation(int64_t tokens) const;
  GemmTiles tiles(int64_t tokens) const;
  DeviceBuffer w13_, w2_;              // every group's weights, [groups][n1, H] and [groups][H, P]
                                       // (weight-only: the groups' chunks, src/weight_only_run.cpp)
  DeviceBuffer w13_ptrs_, w2_ptrs_;    // [groups] pointers into them
  DeviceBuffer b13_, b2_;              // [groups, n1] and [groups, H] f32 (zeros where absent)
  DeviceBuffer local_map_;             // [E] global -> local expert id, -1 elsewhere
  DeviceBuffer w13_scale_, w2_scale_;  // fp8_tensor: [groups] f32 weight scales; nvfp4: scale_2
  DeviceBuffer static_scales_;         // fp8_tensor_static: a13_scale, a2_scale
  DeviceBuffer s13_, s2_;              // fp8_block: [groups] MN-major block scales
  DeviceBuffer s13_ptrs_, s2_ptrs_;    // fp8_block: [groups] pointers into them
  bool has_bias_ = false;
  size_t gemm_ws_bytes_ = 0;  // grouped GEMM scratch (every kernel), fixed at prepare
  // Weight-only and fp8_block layers with sinks: the sinks in bf16 by cuBLAS, their results
  // scattered into the sink slots' GEMM2 rows; the quantised path skips their groups,
  // sink_groups() (an empty range without sinks apart).
  std::unique_ptr<gpu::SinkExperts> sinks_;
  struct GroupRange {
    int32_t begin = 0, end = 0;
  };
  GroupRange sink_groups() const;
};

}  // namespace moe::trtllm
