// mxfp4 and nvfp4 layers on trtllm_style (docs/design.md §6, 4-bit weights on Hopper): weight-only,
// bf16 activations. TensorRT-LLM's own fp4 layout (128x4-swizzled scales for Blackwell's
// block-scaled MMA) has no reader on sm_90, so these layers prepare the Hopper fp4 layout instead
// (moe_cuda/fp4_chunks.hpp: chunks of 128 rows x 128 K with their block scales, gate and up
// columns paired per tile), padded to whole tiles, and run permute -> gather -> weight-only
// GEMM1 with the bias and activation in its epilogue -> weight-only GEMM2 -> weighted combine
// (moe_cuda/wo_gemm.hpp). `moe describe` says so.
#include <fmt/format.h>

#include <cmath>

#include "layer_workspace.hpp"
#include "moe/sdk/bias_values.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/fp4_chunks.hpp"
#include "moe_cuda/permute.hpp"
#include "moe_cuda/wo_gemm.hpp"
#include "trtllm_layer.hpp"

namespace moe::trtllm {
namespace {

int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

gpu::Fp4Scales fp4_scales(const moe_problem& p) {
  return p.format == MOE_FORMAT_MXFP4 ? gpu::Fp4Scales::kMx : gpu::Fp4Scales::kNv;
}

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

bool is_fp4(const moe_problem& p) {
  return p.format == MOE_FORMAT_MXFP4 || p.format == MOE_FORMAT_NVFP4;
}

Fp4Geometry fp4_geometry(const moe_problem& p) {
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  Fp4Geometry g;
  g.padded_h = round_up(p.hidden, 128);
  g.padded_i = round_up(p.intermediate, 128);
  g.w13_tiles = gated ? g.padded_i / 64 : g.padded_i / 128;
  g.w2_tiles = g.padded_h / 128;
  return g;
}

std::string describe_fp4_layout(const moe_problem& p) {
  const Fp4Geometry g = fp4_geometry(p);
  const bool mx = p.format == MOE_FORMAT_MXFP4;
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  return fmt::format(
      "{} weights, bf16 activations (weight-only) on Hopper: TensorRT-LLM's fp4 layout (scales "
      "swizzled 128x4 for Blackwell's block-scaled MMA) has no sm_90 reader, so the Hopper fp4 "
      "layout is prepared instead: chunks of 128 rows x 128 K ({} bytes: codes arranged for the "
      "wgmma A fragments, then the {} scales, {} bytes a row), w13 as {} tiles per expert{}, w2 "
      "as {} tiles, K padded to {} and {}; dequantised in registers and multiplied with bf16 "
      "wgmma, the bias and activation in GEMM1's epilogue",
      format_name(static_cast<moe_format>(p.format)), gpu::fp4_chunk_bytes(fp4_scales(p)),
      mx ? "ue8m0 per 32" : "e4m3 per 16", mx ? 4 : 8, g.w13_tiles,
      gated ? " (64 gate and the 64 up rows of the same columns)" : "", g.w2_tiles, g.padded_h,
      g.padded_i);
}

void DeviceLayer::prepare_fp4(const moe_problem& p, const moe_weights& w) {
  const gpu::Fp4Scales kind = fp4_scales(p);
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  const Fp4Geometry g = fp4_geometry(p);
  fp4_ = g;
  padded_i_ = g.padded_i;
  n1_ = gated ? 2 * g.padded_i : g.padded_i;
  const int64_t h = p.hidden, i = p.intermediate, rows13 = w13_rows(p);
  const gpu::Fp4Padding pad13{g.w13_tiles, g.padded_h / 128}, pad2{g.w2_tiles, g.padded_i / 128};
  // The routed experts' chunks, then the shared expert's; each stack packed, checked (scales the
  // kernel cannot take are refused by name) and uploaded before the next.
  // `inter`: the stack's own intermediate (the shared expert's may be narrower, then padded).
  auto stack = [&](const moe_tensor& q13, const moe_tensor& s13, const moe_tensor& q2,
                   const moe_tensor& s2, int64_t count, int64_t inter, const char* prefix) {
    const std::string n13 = fmt::format("{}w13", prefix), n2 = fmt::format("{}w2", prefix);
    std::vector<uint8_t> c13 = gpu::pack_fp4_stack(
        kind, static_cast<const uint8_t*>(q13.data), static_cast<const uint8_t*>(s13.data), count,
        gated ? 2 * inter : inter, h, gated ? inter : 0, n13, pad13);
    std::vector<uint8_t> c2 =
        gpu::pack_fp4_stack(kind, static_cast<const uint8_t*>(q2.data),
                            static_cast<const uint8_t*>(s2.data), count, h, inter, 0, n2, pad2);
    return std::pair(std::move(c13), std::move(c2));
  };
  auto [c13, c2] = stack(w.w13, w.w13_scale, w.w2, w.w2_scale, p.local_experts, i, "");
  std::vector<float> g13, g2;
  if (kind == gpu::Fp4Scales::kNv) {
    append_scale_2(g13, w.w13_scale_2, "w13_scale_2", p.local_experts);
    append_scale_2(g2, w.w2_scale_2, "w2_scale_2", p.local_experts);
  }
  if (p.shared_intermediate > 0) {
    auto [s13, s2] = stack(w.shared_w13, w.shared_w13_scale, w.shared_w2, w.shared_w2_scale, 1,
                           p.shared_intermediate, "shared_");
    c13.insert(c13.end(), s13.begin(), s13.end());
    c2.insert(c2.end(), s2.begin(), s2.end());
    if (kind == gpu::Fp4Scales::kNv) {
      append_scale_2(g13, w.shared_w13_scale_2, "shared_w13_scale_2", 1);
      append_scale_2(g2, w.shared_w2_scale_2, "shared_w2_scale_2", 1);
    }
  }
  w13_ = upload_vector(c13);
  w2_ = upload_vector(c2);
  if (kind == gpu::Fp4Scales::kNv) {
    w13_scale_ = upload_vector(g13);
    w2_scale_ = upload_vector(g2);
  }
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

void DeviceLayer::run_fp4(const moe_run_args& a, const Workspace& ws, cudaStream_t stream) const {
  const moe_problem p = problem_.c();
  const int64_t tokens = a.hidden.shape[0];
  const gpu::Permutation& perm = ws.perm;
  moe::gpu::launch_permute(p, tokens, static_cast<const int32_t*>(a.topk_ids.data), perm, stream);
  moe::gpu::launch_gather_rows(perm, p.hidden, static_cast<const uint16_t*>(a.hidden.data),
                               static_cast<uint16_t*>(ws.rows), stream);
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  const int64_t rows = expected_rows(tokens);

  gpu::WoGemmArgs g;
  g.scales = fp4_scales(p);
  g.groups = int(groups_);
  g.offsets = perm.group_offsets;
  g.max_rows = perm.max_rows;
  g.sm_count = device_info().sm_count;
  g.tokens_per_tile =
      fp4_tile_option_ ? *fp4_tile_option_ : gpu::wo_tokens_per_tile(rows, int(groups_));

  gpu::WoGemmArgs g1 = g;
  g1.rows = static_cast<const uint16_t*>(ws.rows);
  g1.k = p.hidden;
  g1.chunks = w13_.as<uint8_t>();
  g1.n_tiles = int(fp4_.w13_tiles);
  g1.k_stages = int(fp4_.padded_h / 128);
  g1.scale_2 = w13_scale_.as<float>();
  g1.bias = has_bias_ ? b13_.as<float>() : nullptr;
  g1.bias_groups = has_bias_ ? int(p.local_experts) : 0;
  g1.bias_ld = n1_;
  g1.up_offset = gated ? fp4_.padded_i : 0;
  g1.epilogue = gated ? gpu::WoEpilogue::kGated : gpu::WoEpilogue::kPlainRelu2;
  g1.out = static_cast<uint16_t*>(ws.act);
  g1.out_ld = padded_i_;
  g1.out_cols = padded_i_;
  gpu::run_wo_grouped_gemm(p, g1, stream);

  gpu::WoGemmArgs g2 = g;
  g2.rows = static_cast<const uint16_t*>(ws.act);
  g2.k = padded_i_;
  g2.chunks = w2_.as<uint8_t>();
  g2.n_tiles = int(fp4_.w2_tiles);
  g2.k_stages = int(fp4_.padded_i / 128);
  g2.scale_2 = w2_scale_.as<float>();
  g2.epilogue = gpu::WoEpilogue::kPlain;
  g2.out = static_cast<uint16_t*>(ws.gemm2);
  g2.out_ld = p.hidden;
  g2.out_cols = p.hidden;
  gpu::run_wo_grouped_gemm(p, g2, stream);

  moe::gpu::FinalizeArgs fin;
  fin.gemm2 = static_cast<const uint16_t*>(ws.gemm2);
  fin.topk_weights = static_cast<const float*>(a.topk_weights.data);
  fin.bias = has_bias_ ? b2_.as<float>() : nullptr;
  fin.out = static_cast<uint16_t*>(a.output.data);
  moe::gpu::launch_finalize(p, tokens, perm, fin, stream);
}

}  // namespace moe::trtllm
