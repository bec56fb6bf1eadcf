// Weight-only layers on trtllm_style (docs/design.md §6): mxfp4, nvfp4 or mxfp8 weights on bf16
// activations. TensorRT-LLM's own layouts for them (128x4-swizzled block scales for Blackwell's
// block-scaled MMA) have no reader on sm_90, so these layers prepare the Hopper weight-only
// layouts instead (moe_cuda/fp4_chunks.hpp, moe_cuda/mxfp8_chunks.hpp: chunks of 128 rows x 128 K
// with their block scales, gate and up columns paired per tile), padded to whole tiles, and run
// permute -> gather -> weight-only GEMM1 with the bias and activation in its epilogue ->
// weight-only GEMM2 -> weighted combine (moe_cuda/wo_gemm.hpp). `moe describe` says so.
// bf16 layers on it (bf16_gemm: own, or auto's choice: trtllm_layer.cpp, auto_own_bf16) take the
// same path on bf16 tiles of the same geometry (moe_cuda/bf16_tiles.hpp): the weight-only GEMM
// with nothing to dequantise. A bf16 layer that prepared CUTLASS's layout (auto, for a large
// max_tokens) takes this path too for batches of few rows an expert (runs_in_place), the GEMM
// reading TensorRT-LLM's rows in place. fp8_tensor layers with fp8_gemm: own take it on e4m3 tiles
// of that geometry: the hidden states quantised (one scale over the batch) and gathered as e4m3
// rows, GEMM1 e4m3 x e4m3 with the activation in its epilogue, f32 out, the intermediate quantised
// (one scale over the routed rows, one over the shared expert's; with static scales GEMM1 writes
// the e4m3 codes itself), GEMM2 e4m3 x e4m3, bf16 out.
#include <fmt/format.h>

#include <cmath>

#include "layer_workspace.hpp"
#include "moe/sdk/bias_values.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/struct_io.hpp"
#include "moe_cuda/bf16_tiles.hpp"
#include "moe_cuda/check.hpp"
#include "moe_cuda/fp4_chunks.hpp"
#include "moe_cuda/mxfp8_chunks.hpp"
#include "moe_cuda/permute.hpp"
#include "moe_cuda/quantize.hpp"
#include "moe_cuda/wo_gemm.hpp"
#include "trtllm_layer.hpp"

namespace moe::trtllm {
namespace {

int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

gpu::WoWeights wo_weights(const moe_problem& p) {
  return p.format == MOE_FORMAT_MXFP4        ? gpu::WoWeights::kMxfp4
         : p.format == MOE_FORMAT_NVFP4      ? gpu::WoWeights::kNvfp4
         : p.format == MOE_FORMAT_BF16       ? gpu::WoWeights::kBf16
         : p.format == MOE_FORMAT_FP8_TENSOR ? gpu::WoWeights::kE4m3
                                             : gpu::WoWeights::kMxfp8;
}

// A gated w13 tile pairs each 8 gate rows with the 8 up rows of the same columns: the GEMM's
// thread holds both and applies the activation in registers (moe_cuda/fp4_chunks.hpp).
constexpr gpu::GatePairing kPairing = gpu::GatePairing::kRowPairs;

// nvfp4's per-matrix scale_2 values, checked (finite, positive: docs/design.md §3.3).
void append_scale_2(std::vector<float>& out, const moe_tensor& t, const char* name, int64_t count) {
  MOE_CHECK(t.data != nullptr && t.dtype == MOE_DTYPE_F32, MOE_STATUS_INVALID_ARGUMENT,
            "trtllm_style: {} must be given as f32 for nvfp4 weights", name);
  const auto* v = static_cast<const float*>(t.data);
  for (int64_t e = 0; e < count; ++e) {
    MOE_CHECK(std::isfinite(v[e]) && v[e] > 0.0f, MOE_STATUS_INVALID_ARGUMENT,
              "trtllm_style: {}[{}] = {}: nvfp4's scale_2 must be finite and positive", name, e,
              v[e]);
    out.push_back(v[e]);
  }
}

}  // namespace

// The GEMMs and the layout they read (describe_weight_only_layout adds the sinks).
static std::string describe_weight_only_gemms(const moe_problem& p);

bool is_weight_only(const moe_problem& p) {
  return p.format == MOE_FORMAT_MXFP4 || p.format == MOE_FORMAT_NVFP4 ||
         p.format == MOE_FORMAT_MXFP8;
}

WoGeometry wo_geometry(const moe_problem& p) {
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  WoGeometry g;
  g.padded_h = round_up(p.hidden, 128);
  g.padded_i = round_up(p.intermediate, 128);
  g.w13_tiles = gated ? g.padded_i / 64 : g.padded_i / 128;
  g.w2_tiles = g.padded_h / 128;
  return g;
}

std::string describe_weight_only_layout(const moe_problem& p) {
  return describe_weight_only_gemms(p) +
         (p.sink_experts > 0 && is_weight_only(p)
              ? fmt::format("; {} sink experts (bf16, silu_mul, I={}) apart: cuBLAS GEMMs on every "
                            "token, each result into its sink slot's GEMM2 row, weighed by the "
                            "combine like the others (the weight-only GEMMs skip their groups)",
                            p.sink_experts, p.sink_intermediate)
              : std::string());
}

static std::string describe_weight_only_gemms(const moe_problem& p) {
  const WoGeometry g = wo_geometry(p);
  const gpu::WoWeights w = wo_weights(p);
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  if (w == gpu::WoWeights::kBf16)
    return fmt::format(
        "bf16 on the weight-only GEMM (bf16_gemm: auto takes it when a max_tokens batch averages "
        "at most 128 rows an expert, 16 past hidden 4096; bf16_gemm: own always): tiles of 128 "
        "weight rows (weight_tile: 256 pairs them), w13 as {} "
        "tiles per expert{}, w2 as {} tiles, K padded to {} and {}, read by TMA 64 K a stage, "
        "both wgmma operands from shared memory, the bias and activation in GEMM1's epilogue "
        "(bf16_gemm: cutlass prepares TensorRT-LLM's layout for CUTLASS's GEMMs instead); "
        "last_block: narrow computes a group's last token block, when it is short, at the "
        "narrowest of 16, 32, 64 and 128 tokens under the tile's width that holds it (auto, "
        "full: at the tile's width); token_tile auto: {}",
        g.w13_tiles, gated ? " (64 gate columns and their up rows, paired 8 by 8)" : "", g.w2_tiles,
        g.padded_h, g.padded_i, gpu::wo_token_tile_rule(w, p.hidden));
  if (w == gpu::WoWeights::kE4m3)
    return fmt::format(
        "fp8_tensor on the weight-only GEMM's e4m3 instance (fp8_gemm: auto takes it up to "
        "hidden 4096, and past that when a max_tokens batch averages at most 16 rows an expert; "
        "fp8_gemm: own always): tiles of 128 e4m3 weight rows, w13 as {} tiles per expert{}, w2 as "
        "{} tiles, "
        "K padded to {} and {}, "
        "read by TMA 128 K a stage, e4m3 wgmma on both operands from shared memory, the sums "
        "promoted to f32 every 128 K; the hidden states and the intermediate quantised per "
        "tensor, GEMM1's activation (and bias) in its epilogue, f32 out for that quantisation "
        "(e4m3 codes out with static scales); "
        "token_tile auto: {}",
        g.w13_tiles, gated ? " (64 gate columns and their up rows, paired 8 by 8)" : "", g.w2_tiles,
        g.padded_h, g.padded_i, gpu::wo_token_tile_rule(w, p.hidden));
  return fmt::format(
      "{} weights, bf16 activations (weight-only) on Hopper: TensorRT-LLM's layout for them "
      "(scales swizzled 128x4 for Blackwell's block-scaled MMA) has no sm_90 reader, so the "
      "Hopper weight-only layout is prepared instead: chunks of 128 rows x 128 K ({} bytes: "
      "codes arranged for the wgmma A fragments, then the {} scales, {} bytes a row), w13 as {} "
      "tiles per expert{}, w2 as {} tiles, K padded to {} and {}; dequantised in registers and "
      "multiplied with bf16 wgmma, the bias and activation in GEMM1's epilogue; token_tile "
      "auto: {}",
      format_name(static_cast<moe_format>(p.format)), gpu::wo_chunk_bytes(w),
      w == gpu::WoWeights::kNvfp4 ? "e4m3 per 16" : "ue8m0 per 32",
      w == gpu::WoWeights::kNvfp4 ? 8 : 4, g.w13_tiles,
      gated ? " (64 gate columns and their up rows, paired 8 by 8)" : "", g.w2_tiles, g.padded_h,
      g.padded_i, gpu::wo_token_tile_rule(w, p.hidden));
}

void DeviceLayer::prepare_weight_only(const moe_problem& p, const moe_weights& w) {
  const gpu::WoWeights kind = wo_weights(p);
  const bool nv = kind == gpu::WoWeights::kNvfp4;
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  const WoGeometry g = wo_geometry(p);
  wo_ = g;
  padded_i_ = g.padded_i;
  n1_ = gated ? 2 * g.padded_i : g.padded_i;
  const int64_t h = p.hidden, i = p.intermediate, rows13 = w13_rows(p);
  const gpu::Fp4Padding pad13{g.w13_tiles, g.padded_h / 128}, pad2{g.w2_tiles, g.padded_i / 128};
  // nvfp4's scale_2 first (cheap: a bad one fails before any packing), then the chunks: w13 of
  // the routed experts, of the shared one, w2 alike, each stack packed (scales and codes the
  // kernel cannot take are refused by name), uploaded at its place and freed before the next, so
  // the host holds one packed stack at a time.
  const bool shared = p.shared_intermediate > 0;
  // Groups: the routed experts, the sinks (run apart, bf16 by cuBLAS: their groups hold no chunks
  // the GEMMs read, and scale_2 1), then the shared expert (moe_cuda/permute.hpp's order).
  const int64_t sinks = p.sink_experts;
  if (nv) {
    std::vector<float> g13, g2;
    append_scale_2(g13, w.w13_scale_2, "w13_scale_2", p.local_experts);
    append_scale_2(g2, w.w2_scale_2, "w2_scale_2", p.local_experts);
    g13.resize(g13.size() + size_t(sinks), 1.0f);
    g2.resize(g2.size() + size_t(sinks), 1.0f);
    if (shared) {
      append_scale_2(g13, w.shared_w13_scale_2, "shared_w13_scale_2", 1);
      append_scale_2(g2, w.shared_w2_scale_2, "shared_w2_scale_2", 1);
    }
    w13_scale_ = upload_vector(g13);
    w2_scale_ = upload_vector(g2);
  }
  const size_t chunk = size_t(gpu::wo_chunk_bytes(kind));
  const size_t group13 = size_t(pad13.tiles * pad13.stages) * chunk;
  const size_t group2 = size_t(pad2.tiles * pad2.stages) * chunk;
  w13_ = DeviceBuffer(group13 * size_t(groups_));
  w2_ = DeviceBuffer(group2 * size_t(groups_));
  // One stack of `count` experts whose intermediate is `inter` (the shared expert's may be
  // narrower, then padded), uploaded from group `first` on.
  auto put = [&](DeviceBuffer& dst, size_t group_bytes, int64_t first, const moe_tensor& q,
                 const moe_tensor& sc, int64_t count, int64_t rows, int64_t k, int64_t gate_up,
                 const std::string& name, gpu::Fp4Padding pad) {
    // The packed stack at its place, its size checked against the layout's.
    auto upload = [&](const void* packed, size_t bytes) {
      MOE_CHECK(bytes == group_bytes * size_t(count), MOE_STATUS_INTERNAL,
                "trtllm_style: {} packed into {} bytes, expected {}", name, bytes,
                group_bytes * size_t(count));
      dst.upload(packed, bytes, group_bytes * size_t(first));
    };
    if (kind == gpu::WoWeights::kBf16) {
      const std::vector<uint16_t> tiles = gpu::pack_bf16_stack(
          static_cast<const uint16_t*>(q.data), count, rows, k, gate_up, name, pad, kPairing);
      upload(tiles.data(), tiles.size() * 2);
      return;
    }
    if (kind == gpu::WoWeights::kE4m3) {  // the scales went up with the layer's (trtllm_layer.cpp)
      const std::vector<uint8_t> tiles = gpu::pack_e4m3_stack(
          static_cast<const uint8_t*>(q.data), count, rows, k, gate_up, name, pad, kPairing);
      upload(tiles.data(), tiles.size());
      return;
    }
    const auto* codes = static_cast<const uint8_t*>(q.data);
    const auto* scales = static_cast<const uint8_t*>(sc.data);
    const std::vector<uint8_t> packed =
        kind == gpu::WoWeights::kMxfp8
            ? gpu::pack_mxfp8_stack(codes, scales, count, rows, k, gate_up, name, pad, kPairing)
            : gpu::pack_fp4_stack(
                  kind == gpu::WoWeights::kMxfp4 ? gpu::Fp4Scales::kMx : gpu::Fp4Scales::kNv, codes,
                  scales, count, rows, k, gate_up, name, pad, kPairing);
    upload(packed.data(), packed.size());
  };
  const int64_t e = p.local_experts, si = p.shared_intermediate, shared_group = e + sinks;
  put(w13_, group13, 0, w.w13, w.w13_scale, e, rows13, h, gated ? i : 0, "w13", pad13);
  if (shared)
    put(w13_, group13, shared_group, w.shared_w13, w.shared_w13_scale, 1, gated ? 2 * si : si, h,
        gated ? si : 0, "shared_w13", pad13);
  put(w2_, group2, 0, w.w2, w.w2_scale, e, h, i, 0, "w2", pad2);
  if (shared)
    put(w2_, group2, shared_group, w.shared_w2, w.shared_w2_scale, 1, h, si, 0, "shared_w2", pad2);
  if (sinks > 0) sinks_ = std::make_unique<gpu::SinkExperts>(p, w);
  // Biases (routed experts only): b13 as [E][gate | up] over the padded columns, zeros in the
  // padding (its activation is then 0), b2 as given for the combine.
  has_bias_ = p.expert_bias != 0;
  if (has_bias_) {
    const std::vector<float> b13 = sdk::bias_values(w.b13, "b13", p.local_experts * rows13);
    std::vector<float> padded(size_t(p.local_experts * n1_), 0.0f);
    for (int64_t e = 0; e < p.local_experts; ++e)
      for (int64_t r = 0; r < rows13; ++r) {
        const int64_t col = gated && r >= i ? g.padded_i + (r - i) : r;
        padded[size_t(e * n1_ + col)] = b13[size_t(e * rows13 + r)];
      }
    b13_ = upload_vector(padded);
    std::vector<float> b2 = sdk::bias_values(w.b2, "b2", p.local_experts * h);
    b2.resize(size_t(groups_ * h), 0.0f);  // the shared expert's: none
    b2_ = upload_vector(b2);
  }
}

void DeviceLayer::run_weight_only(const moe_run_args& a, const Workspace& ws,
                                  cudaStream_t stream) const {
  const moe_problem p = problem_.c();
  const int64_t tokens = a.hidden.shape[0];
  const gpu::Permutation& perm = ws.perm;
  const int64_t* offsets = perm.group_offsets;
  moe::gpu::launch_permute(p, tokens, static_cast<const int32_t*>(a.topk_ids.data), perm, stream);
  const auto* hidden = static_cast<const uint16_t*>(a.hidden.data);
  const bool fp8 = own_fp8_;
  // The sinks' groups run apart (below): not gathered (they run on the hidden states themselves),
  // no rows in either GEMM.
  const GroupRange sinks = sink_groups();
  Fp8Scales s1, s2;  // fp8: what GEMM1 and GEMM2 scale by
  if (fp8) {
    s1 = quantize_hidden_fp8(a, ws, stream);
  } else {
    moe::gpu::launch_gather_rows(perm, p.hidden, hidden, static_cast<uint16_t*>(ws.rows), stream,
                                 sinks.begin, sinks.end);
  }
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  // The rows and groups the GEMMs run: the sinks' are not theirs.
  const int64_t apart = sinks.end - sinks.begin;
  const int64_t rows = expected_group_rows(p, tokens) - tokens * apart;

  gpu::WoGemmArgs g;
  g.weights = wo_weights(p);
  g.groups = int(groups_);
  g.offsets = offsets;
  g.max_rows = perm.max_rows;
  g.sm_count = device_info().sm_count;
  g.tokens_per_tile = token_tile_option_
                          ? *token_tile_option_
                          : gpu::wo_tokens_per_tile(rows, int(groups_ - apart), g.weights, p.hidden,
                                                    weight_tile_option_ == 256);
  g.weight_tile_rows = weight_tile_option_.value_or(0);
  g.narrow_last_blocks = narrow_last_blocks_;  // bf16 layers only (the option's check)
  g.shared_group = s1.shared_group;
  g.skip_begin = sinks.begin;
  g.skip_end = sinks.end;

  // A bf16 layer on CUTLASS's layout (runs_in_place): its [groups][n1][H] and [groups][H][P]
  // rows read in place, whole 128-row tiles of both (own_gemm_in_place), the bias interleaved as
  // its rows are.
  const bool in_place = !weight_only_path();
  // (token_tile and weight_tile would have prepared the tiles: auto's token tile, 128 rows.)
  if (in_place) g.weight_order = gpu::WoWeightRows::kInterleaved;
  gpu::WoGemmArgs g1 = g;
  g1.rows = ws.rows;
  g1.k = p.hidden;
  const bool tiles = g.weights == gpu::WoWeights::kBf16 || fp8;  // weight rows, not chunks
  g1.chunks = tiles ? nullptr : w13_.as<uint8_t>();
  g1.weight_rows = tiles ? w13_.get() : nullptr;
  g1.n_tiles = int(in_place ? n1_ / 128 : wo_.w13_tiles);
  g1.k_stages = int(in_place ? (p.hidden + 127) / 128 : wo_.padded_h / 128);
  g1.weight_group_rows = n1_;
  g1.weight_ld = p.hidden;
  g1.scale_2 = w13_scale_.as<float>();
  g1.act_scale = s1.act;
  g1.bias = has_bias_ ? b13_.as<float>() : nullptr;
  g1.bias_groups = has_bias_ ? int(p.local_experts) : 0;
  g1.bias_ld = n1_;
  g1.up_offset = gated && !in_place ? wo_.padded_i : 0;
  g1.epilogue = gated ? gpu::WoEpilogue::kGated : gpu::WoEpilogue::kPlainRelu2;
  // fp8: unrounded f32 activations for the quantisation that follows (bf16 would move ~3% of
  // the codes off the reference's); with a static scale the epilogue quantises them itself, so
  // the intermediate is written once, as e4m3 codes.
  const bool static_fp8 = fp8 && p.input_format == MOE_INPUT_FP8_TENSOR_STATIC;
  g1.out = fp8 ? nullptr : static_cast<uint16_t*>(ws.act);
  g1.out_f32 = fp8 && !static_fp8 ? static_cast<float*>(ws.act) : nullptr;
  g1.out_e4m3 = static_fp8 ? static_cast<uint8_t*>(ws.act_codes) : nullptr;
  g1.out_e4m3_scale = static_fp8 ? intermediate_static_scale() : nullptr;
  g1.out_ld = padded_i_;
  g1.out_cols = padded_i_;
  // Dynamic fp8: GEMM1's epilogue reduces the intermediate's amaxes as it stores the values (no
  // amax pass over the f32 intermediate).
  const bool fused_amax = fp8 && p.input_format == MOE_INPUT_FP8_TENSOR_DYNAMIC;
  if (fused_amax) {
    MOE_CUDA_CHECK(cudaMemsetAsync(ws.gemm1_amax, 0, 2 * sizeof(uint32_t), stream));
    g1.out_amax = ws.gemm1_amax;
  }
  gpu::run_wo_grouped_gemm(p, g1, stream);

  const void* gemm2_rows = ws.act;
  if (static_fp8) {
    s2 = {intermediate_static_scale(), nullptr, w2_scale_.as<float>(), s1.shared_group};
    gemm2_rows = ws.act_codes;
  } else if (fp8) {
    s2 = quantize_intermediate_fp8(ws, stream, fused_amax ? ws.gemm1_amax : nullptr);
    gemm2_rows = ws.act_codes;
  }

  gpu::WoGemmArgs g2 = g;
  g2.rows = gemm2_rows;
  g2.k = padded_i_;
  g2.chunks = tiles ? nullptr : w2_.as<uint8_t>();
  g2.weight_rows = tiles ? w2_.get() : nullptr;
  g2.n_tiles = int(in_place ? p.hidden / 128 : wo_.w2_tiles);
  g2.k_stages = int(in_place ? (padded_i_ + 127) / 128 : wo_.padded_i / 128);
  g2.weight_group_rows = p.hidden;
  g2.weight_ld = padded_i_;
  g2.scale_2 = w2_scale_.as<float>();
  g2.act_scale = s2.act;
  g2.act_scale_shared = s2.act_shared;
  g2.epilogue = gpu::WoEpilogue::kPlain;
  g2.out = static_cast<uint16_t*>(ws.gemm2);
  g2.out_ld = p.hidden;
  g2.out_cols = p.hidden;
  gpu::run_wo_grouped_gemm(p, g2, stream);
  // The sinks in bf16 on the hidden states, each result into its sink slot's GEMM2 row, which the
  // combine then weighs by the slot's gamma like any other.
  if (sinks_)
    sinks_->run(tokens, hidden, perm, static_cast<uint16_t*>(ws.gemm2), ws.gemm_ws, stream);

  moe::gpu::FinalizeArgs fin;
  fin.gemm2 = static_cast<const uint16_t*>(ws.gemm2);
  fin.topk_weights = static_cast<const float*>(a.topk_weights.data);
  fin.bias = has_bias_ ? b2_.as<float>() : nullptr;
  fin.out = static_cast<uint16_t*>(a.output.data);
  fin.accumulate = sdk::run_accumulates(a);
  moe::gpu::launch_finalize(p, tokens, perm, fin, stream);
}

}  // namespace moe::trtllm
