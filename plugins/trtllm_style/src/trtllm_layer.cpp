#include "trtllm_layer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>

#include "grouped_gemm.hpp"
#include "layer_workspace.hpp"
#include "moe/sdk/bias_values.hpp"
#include "moe/sdk/block_scales.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/struct_io.hpp"
#include "moe/sdk/tensor_checks.hpp"
#include "moe/sdk/weights.hpp"
#include "moe_cuda/activation.hpp"
#include "moe_cuda/fp8_block_gemm.hpp"
#include "moe_cuda/permute.hpp"
#include "moe_cuda/quantize.hpp"
#include "moe_cuda/wo_gemm.hpp"
#include "moe_cuda/workspace.hpp"

namespace moe::trtllm {
namespace {

int64_t rows_per_token(const moe_problem& p) {
  return p.top_k + p.sink_experts + (p.shared_intermediate > 0 ? 1 : 0);
}

// The caller's canonical [E, rows, cols] tensor of `dtype` (checked by check_weights), read in
// place.
TensorView view(const moe_tensor& t, moe_dtype dtype, int64_t e, int64_t rows, int64_t cols) {
  const MatrixStack s{e, rows, cols, dtype == MOE_DTYPE_BF16 ? 2 : dtype == MOE_DTYPE_F32 ? 4 : 1};
  return {dtype, s, ByteSpan(static_cast<const uint8_t*>(t.data), size_t(s.bytes()))};
}

bool is_fp8(const moe_problem& p) {
  return p.format == MOE_FORMAT_FP8_TENSOR;
}

// A prepared (E, n_blocks, k_blocks) f32 block-scale tensor, checked and turned MN-major
// ([k_blocks][n_blocks] per matrix, what the blockwise mainloop reads), appended to `out`.
void append_block_scales(std::vector<float>& out, const LayoutTensor& s, const std::string& name) {
  moe_tensor view{};
  view.data = const_cast<uint8_t*>(s.bytes.data());
  view.dtype = MOE_DTYPE_F32;
  view.ndim = 3;
  view.shape[0] = s.shape.batch;
  view.shape[1] = s.shape.rows;
  view.shape[2] = s.shape.cols;
  const std::vector<float> v = sdk::checked_block_scales(
      view, name, s.shape.batch, s.shape.rows, s.shape.cols, sdk::BlockScaleOrder::kMnMajor);
  out.insert(out.end(), v.begin(), v.end());
}

// A bias LayoutTensor (E, rows, 1), bf16 or f32, as floats (the SDK's bias_values), appended to
// `out`.
void append_bias(std::vector<float>& out, const LayoutTensor& b, const char* name) {
  moe_tensor view{};
  view.data = const_cast<uint8_t*>(b.bytes.data());
  view.dtype = b.dtype;
  view.ndim = 2;
  view.shape[0] = b.shape.batch;
  view.shape[1] = b.shape.rows;
  const std::vector<float> v = sdk::bias_values(view, name, b.shape.batch * b.shape.rows);
  out.insert(out.end(), v.begin(), v.end());
}

}  // namespace

Refusal check_support(const moe_problem& p) {
  const bool fp8 = is_fp8(p), block = is_fp8_block(p), wo = is_weight_only(p);
  const char* format = format_name(static_cast<moe_format>(p.format));
  if (p.format != MOE_FORMAT_BF16 && !fp8 && !block && !wo)
    return {MOE_REASON_FORMAT,
            fmt::format("bf16, fp8_tensor, fp8_block, mxfp4, nvfp4 and mxfp8 weights only, not {}",
                        format)};
  const auto input = static_cast<moe_input_format>(p.input_format);
  if (block && input != MOE_INPUT_FP8_1X128)
    return {MOE_REASON_INPUT_FORMAT,
            fmt::format("fp8_block weights run e4m3 x e4m3 blockwise GEMMs: activations "
                        "fp8_1x128, not {}",
                        input_format_name(input))};
  if (block && (p.hidden % 128 != 0 || p.intermediate % 128 != 0))
    return {MOE_REASON_SHAPE,
            fmt::format("fp8_block needs hidden={} and intermediate={} to be multiples of 128 "
                        "(whole 128x128 scale blocks; w31 moves whole blocks)",
                        p.hidden, p.intermediate)};
  if (wo && input != MOE_INPUT_BF16)
    return {MOE_REASON_INPUT_FORMAT,
            fmt::format("{} weights run weight-only (dequantised to bf16 in the GEMMs' main "
                        "loop): activations bf16, not {}",
                        format, input_format_name(input))};
  if (!fp8 && !block && input != MOE_INPUT_BF16)
    return {MOE_REASON_INPUT_FORMAT, fmt::format("bf16 weights take bf16 activations only, not {}",
                                                 input_format_name(input))};
  if (fp8 && input != MOE_INPUT_FP8_TENSOR_DYNAMIC && input != MOE_INPUT_FP8_TENSOR_STATIC)
    return {MOE_REASON_INPUT_FORMAT,
            fmt::format("fp8_tensor weights run e4m3 x e4m3 GEMMs: activations "
                        "fp8_tensor_dynamic or fp8_tensor_static, not {}",
                        input_format_name(input))};
  const int64_t align = fp8 ? 16 : 8;
  if (p.hidden % align != 0)
    return {MOE_REASON_SHAPE,
            fmt::format("hidden={} must be a multiple of {} (16-byte TMA rows)", p.hidden, align)};
  if (fp8 && p.sink_experts > 0)
    return {MOE_REASON_SHARED,
            fmt::format("sink experts are bf16 on bf16 hidden states; the e4m3 grouped GEMMs of "
                        "an {} layer cannot run them",
                        format)};
  if (wo && weight_only_groups(p) > gpu::wo_gemm_max_groups())
    return {MOE_REASON_SHAPE,
            fmt::format("{} groups (local experts, sinks, shared expert): the weight-only GEMM "
                        "schedules at most {}",
                        weight_only_groups(p), gpu::wo_gemm_max_groups())};
  // Weight-only layers pad the shared expert to the routed experts' whole chunks
  // (weight_only_run.cpp).
  const int64_t routed_i = (p.intermediate + 127) / 128 * 128;
  if (wo && p.shared_intermediate > routed_i)
    return {MOE_REASON_SHARED,
            fmt::format("shared_intermediate={} must be at most intermediate={} rounded up to "
                        "128 ({}): the shared expert is padded to the routed experts' tiles",
                        p.shared_intermediate, p.intermediate, routed_i)};
  if (!wo && p.shared_intermediate > 0 && p.shared_intermediate != p.intermediate)
    return {MOE_REASON_SHARED,
            fmt::format("shared_intermediate={} must equal intermediate={} (one grouped GEMM)",
                        p.shared_intermediate, p.intermediate)};
  // Sinks in the layer's own GEMMs (bf16): their groups are the routed experts' shape.
  const bool sinks_apart = wo || block;
  if (!sinks_apart && p.sink_experts > 0 && p.sink_intermediate != p.intermediate)
    return {MOE_REASON_SHARED, fmt::format("sink_intermediate={} must equal intermediate={}",
                                           p.sink_intermediate, p.intermediate)};
  if (!sinks_apart && p.sink_experts > 0 && p.activation == MOE_ACTIVATION_RELU2)
    return {MOE_REASON_SHARED, "silu_mul sink experts next to relu2 routed experts"};
  if (p.redundant_experts > 0)
    return {MOE_REASON_EP, "redundant experts (EPLB) are not implemented"};
  using gpu::kCombineMaxColumns;
  if (topk_width(p) > kCombineMaxColumns)
    return {MOE_REASON_OTHER,
            fmt::format("top_k + sink_experts = {} columns a token; the combine takes at most {}",
                        topk_width(p), kCombineMaxColumns)};
  const DeviceInfo& d = device_info();
  if (!d.usable) return {MOE_REASON_ARCH, d.why_not};
  return {};
}

PrepareOptions layout_options(const moe_problem& p, const Options& options) {
  PrepareOptions o;
  o.epilogue_tile_m = 0;  // the CUTLASS kernels read rows in order; no transposed epilogue
  o.w31 = true;
  // fp8_block's 128-row scale blocks cannot follow a row interleave (layout/prepare.hpp), so its
  // activation runs as a kernel of its own on [up | gate] halves.
  o.gated_interleave = !is_fp8_block(p);
  for (const auto& [key, value] : options) {
    if (key == "gemm_tiles" || key == "activation_epilogue" || key == "token_tile" ||
        key == "bf16_gemm" || key == "fp8_gemm" || key == "weight_tile" || key == "last_block")
      continue;  // read by DeviceLayer
    MOE_FAIL(MOE_STATUS_CONFIG_ERROR,
             "trtllm_style: unknown option '{}' (known: gemm_tiles, activation_epilogue, "
             "token_tile, bf16_gemm, fp8_gemm, weight_tile, last_block)",
             key);
  }
  return o;
}

DeviceLayer::DeviceLayer(const moe_problem& problem, const moe_weights& w, const Options& options)
    : problem_(problem) {
  const moe_problem p = problem_.c();
  const Refusal r = check_support(p);
  MOE_CHECK(r.reason == MOE_REASON_NONE, MOE_STATUS_UNSUPPORTED, "trtllm_style: {}", r.message);
  check_weights(p, w);
  // bf16_gemm and fp8_gemm own/cutlass (nullopt = auto), each read only by its format's layers
  // (the other's `auto` is accepted and ignored: one config may hold both).
  std::optional<bool> own_bf16_option, own_fp8_option;
  for (const auto& [key, value] : options) {
    if (key == "gemm_tiles") {
      MOE_CHECK(value == "auto" || value == "tokens" || value == "weights" || value == "wide",
                MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: gemm_tiles '{}' is not auto, tokens, weights or wide", value);
      tiles_option_ = value == "tokens"    ? std::optional(GemmTiles::kTokens)
                      : value == "weights" ? std::optional(GemmTiles::kWeights)
                      : value == "wide"    ? std::optional(GemmTiles::kWide)
                                           : std::nullopt;
      MOE_CHECK(!is_weight_only(p) || value == "auto", MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: gemm_tiles '{}' is for the CUTLASS GEMMs; {} layers run the "
                "weight-only GEMM, whose token tile is token_tile (auto, 16, 32, 64, 96, 128, 192)",
                value, format_name(static_cast<moe_format>(p.format)));
      MOE_CHECK(p.format == MOE_FORMAT_BF16 || value != "wide", MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: gemm_tiles 'wide' is for bf16 layers; {} takes tokens or weights "
                "(its promoted fp32 accumulators do not fit 128x256 tiles)",
                format_name(static_cast<moe_format>(p.format)));
    } else if (key == "token_tile") {
      MOE_CHECK(value == "auto" || value == "16" || value == "32" || value == "64" ||
                    value == "96" || value == "128" || value == "192" ||
                    (value == "256" && p.format == MOE_FORMAT_BF16),
                MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: token_tile '{}' is not auto, 16, 32, 64, 96, 128 or 192 (256: "
                "bf16 layers only)",
                value);
      token_tile_option_ = value == "auto" ? std::nullopt : std::optional(std::stoi(value));
    } else if (key == "weight_tile") {
      MOE_CHECK(
          value == "auto" || value == "128" || (value == "256" && p.format == MOE_FORMAT_BF16),
          MOE_STATUS_CONFIG_ERROR,
          "trtllm_style: weight_tile '{}' is not auto, 128 or 256 (256: bf16 layers only)", value);
      weight_tile_option_ = value == "auto" ? std::nullopt : std::optional(std::stoi(value));
    } else if (key == "last_block") {
      MOE_CHECK(value == "auto" || value == "full" || value == "narrow", MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: last_block '{}' is not auto, full or narrow", value);
      MOE_CHECK(value != "narrow" || p.format == MOE_FORMAT_BF16, MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: last_block 'narrow' is for bf16 layers (the weight-only GEMM's bf16 "
                "instance), not {}",
                format_name(static_cast<moe_format>(p.format)));
      narrow_last_blocks_ = value == "narrow";
    } else if (key == "bf16_gemm") {
      MOE_CHECK(value == "auto" || value == "cutlass" || value == "own", MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: bf16_gemm '{}' is not auto, cutlass or own", value);
      MOE_CHECK(value == "auto" || p.format == MOE_FORMAT_BF16, MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: bf16_gemm '{}' is for bf16 layers; a {} layer's GEMMs follow its "
                "format{}",
                value, format_name(static_cast<moe_format>(p.format)),
                is_fp8(p) ? " (fp8_tensor layers: fp8_gemm)" : "");
      own_bf16_option = value == "auto" ? std::nullopt : std::optional(value == "own");
    } else if (key == "fp8_gemm") {
      MOE_CHECK(value == "auto" || value == "cutlass" || value == "own", MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: fp8_gemm '{}' is not auto, cutlass or own", value);
      MOE_CHECK(value == "auto" || is_fp8(p), MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: fp8_gemm '{}' is for fp8_tensor layers; a {} layer's GEMMs follow "
                "its format{}",
                value, format_name(static_cast<moe_format>(p.format)),
                p.format == MOE_FORMAT_BF16 ? " (bf16 layers: bf16_gemm)" : "");
      own_fp8_option = value == "auto" ? std::nullopt : std::optional(value == "own");
    } else if (key == "activation_epilogue") {
      MOE_CHECK(value == "auto" || value == "fused" || value == "separate", MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: activation_epilogue '{}' is not auto, fused or separate", value);
      fuse_option_ = value == "auto" ? std::nullopt : std::optional(value == "fused");
      MOE_CHECK(!(is_weight_only(p) && value == "separate"), MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: activation_epilogue 'separate' is not for {} layers: their "
                "weight-only GEMM1 always applies the activation in its epilogue",
                format_name(static_cast<moe_format>(p.format)));
      MOE_CHECK(!(is_fp8(p) && value == "separate"), MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: activation_epilogue 'separate' is for bf16 layers; fp8_tensor "
                "always fuses the activation into GEMM1 (its f32 output is quantised next)");
      MOE_CHECK(!(is_fp8_block(p) && value == "fused"), MOE_STATUS_CONFIG_ERROR,
                "trtllm_style: activation_epilogue 'fused' is not for fp8_block layers: their w13 "
                "is not row-interleaved (128-row scale blocks), so the activation runs apart");
    }
  }
  MOE_CHECK(!narrow_last_blocks_ || weight_tile_option_ != 256, MOE_STATUS_CONFIG_ERROR,
            "trtllm_style: last_block 'narrow' is for 128-row weight tiles, not weight_tile 256");
  const bool own_options = token_tile_option_.has_value() || weight_tile_option_.has_value();
  if (is_fp8(p))
    own_fp8_ = own_fp8_option.value_or(auto_own_fp8(p, tiles_option_.has_value(), own_options));
  else
    own_bf16_ =
        own_bf16_option.value_or(auto_own_bf16(p, tiles_option_ || fuse_option_, own_options));
  check_own_gemm(p, options);
  std::vector<int32_t> map(size_t(p.experts));
  for (int64_t e = 0; e < p.experts; ++e) map[e] = local_expert_id(p, e);
  local_map_ = upload_vector(map);
  groups_ = p.local_experts + p.sink_experts + (p.shared_intermediate > 0 ? 1 : 0);
  // fp8_tensor: every group's weight scales, and the static activation scales, checked before
  // any weight is prepared or uploaded (a corrupt scale fails fast), then put on the device
  // (GEMMs multiply them into alpha there, next to a dynamic scale computed there).
  const bool fp8 = is_fp8(p);
  if (fp8) {
    std::vector<float> s13 = sdk::checked_tensor_scales(w.w13_scale, "w13_scale", p.local_experts);
    std::vector<float> s2 = sdk::checked_tensor_scales(w.w2_scale, "w2_scale", p.local_experts);
    if (p.shared_intermediate > 0) {
      s13.push_back(sdk::checked_tensor_scales(w.shared_w13_scale, "shared_w13_scale", 1)[0]);
      s2.push_back(sdk::checked_tensor_scales(w.shared_w2_scale, "shared_w2_scale", 1)[0]);
    }
    w13_scale_ = upload_vector(s13);
    w2_scale_ = upload_vector(s2);
    if (p.input_format == MOE_INPUT_FP8_TENSOR_STATIC)
      static_scales_ = upload_vector(
          std::vector<float>{sdk::checked_tensor_scales(w.a13_scale, "a13_scale", 1)[0],
                             sdk::checked_tensor_scales(w.a2_scale, "a2_scale", 1)[0]});
  }
  if (weight_only_path()) {
    (void)layout_options(p, options);  // unknown options are config errors here too
    prepare_weight_only(p, w);
    return;
  }
  const PrepareOptions opts = layout_options(p, options);
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  const int64_t h = p.hidden;
  const LayerShape routed = layer_shape(p);
  padded_i_ = plan_layout(routed, w.b13.data != nullptr, opts).padded_intermediate;
  n1_ = gated ? 2 * padded_i_ : padded_i_;
  own_in_place_ = !own_bf16_option.has_value() &&
                  own_gemm_in_place(p, n1_, tiles_option_.has_value() || fuse_option_.has_value());

  // fp8_block: the caller's block scales checked as given (finite and positive; the layout's
  // floor would otherwise turn a negative or -inf scale into 1e-10 without a word), naming the
  // tensor, the matrix and the block in the caller's order.
  if (is_fp8_block(p)) {
    const int64_t r13 = w13_rows(p) / 128, hb = h / 128, ib = p.intermediate / 128;
    using sdk::BlockScaleOrder, sdk::checked_block_scales;
    checked_block_scales(w.w13_scale, "w13_scale", p.local_experts, r13, hb,
                         BlockScaleOrder::kKMajor);
    checked_block_scales(w.w2_scale, "w2_scale", p.local_experts, hb, ib, BlockScaleOrder::kKMajor);
    if (p.shared_intermediate > 0) {
      checked_block_scales(w.shared_w13_scale, "shared_w13_scale", 1, r13, hb,
                           BlockScaleOrder::kKMajor);
      checked_block_scales(w.shared_w2_scale, "shared_w2_scale", 1, hb, ib,
                           BlockScaleOrder::kKMajor);
    }
  }

  // Routed experts, then sinks, then the shared expert, each prepared the same way from the
  // caller's bytes (no host copy first) and uploaded straight from the prepared buffers, which
  // are freed before the next part: the host never holds more than one prepared copy.
  const bool block = is_fp8_block(p);
  const int64_t eb = fp8 || block ? 1 : 2;  // bytes per weight
  const size_t w13_group = size_t(n1_ * h * eb), w2_group = size_t(h * padded_i_ * eb);
  w13_ = DeviceBuffer(w13_group * size_t(groups_));
  w2_ = DeviceBuffer(w2_group * size_t(groups_));
  std::vector<float> b13, b2;
  std::vector<float> s13, s2;  // fp8_block: MN-major block scales, group after group
  int64_t group = 0;
  auto upload = [&](const PreparedLayer& part, const char* who) {
    const LayerTensors& t = part.tensors;
    const int64_t count = t.w13.shape.batch;
    MOE_CHECK(t.w13.bytes.size() == w13_group * size_t(count) &&
                  t.w2.bytes.size() == w2_group * size_t(count) && group + count <= groups_,
              MOE_STATUS_INTERNAL,
              "trtllm_style: prepared {} groups of {} + {} bytes, expected {} + {}", count,
              t.w13.bytes.size(), t.w2.bytes.size(), w13_group, w2_group);
    w13_.upload(t.w13.bytes.data(), t.w13.bytes.size(), size_t(group) * w13_group);
    w2_.upload(t.w2.bytes.data(), t.w2.bytes.size(), size_t(group) * w2_group);
    if (block) {
      append_block_scales(s13, t.w13_scale, fmt::format("{}w13_scale", who));
      append_block_scales(s2, t.w2_scale, fmt::format("{}w2_scale", who));
    }
    if (t.b13.present()) {
      append_bias(b13, t.b13, "b13");
      append_bias(b2, t.b2, "b2");
    } else {
      b13.resize(b13.size() + size_t(count * n1_), 0.0f);
      b2.resize(b2.size() + size_t(count * h), 0.0f);
    }
    group += count;
  };
  {
    const PreparedLayer part = prepare(routed, w, opts);
    tag_ = part.tag;
    upload(part, "");
  }
  // Sinks are bf16 (refused next to fp8_tensor); the shared expert is in the layer's format, its
  // fp8_tensor scales one f32 per matrix.
  auto prepare_extra = [&](moe_format format, const moe_tensor& w13, const moe_tensor& w13_scale,
                           const moe_tensor& w2, const moe_tensor& w2_scale, int64_t count) {
    const LayerShape s{format, gated, count, h, p.intermediate};
    const moe_dtype dtype = format == MOE_FORMAT_BF16 ? MOE_DTYPE_BF16 : MOE_DTYPE_E4M3;
    LayerView v;
    v.w13 = view(w13, dtype, count, gated ? 2 * p.intermediate : p.intermediate, h);
    v.w2 = view(w2, dtype, count, h, p.intermediate);
    if (format == MOE_FORMAT_FP8_TENSOR) {
      v.w13_scale = view(w13_scale, MOE_DTYPE_F32, count, 1, 1);
      v.w2_scale = view(w2_scale, MOE_DTYPE_F32, count, 1, 1);
    } else if (format == MOE_FORMAT_FP8_BLOCK) {  // whole blocks (check_support)
      const int64_t rows13 = gated ? 2 * p.intermediate : p.intermediate;
      v.w13_scale = view(w13_scale, MOE_DTYPE_F32, count, rows13 / 128, h / 128);
      v.w2_scale = view(w2_scale, MOE_DTYPE_F32, count, h / 128, p.intermediate / 128);
    }
    upload(prepare(s, v, opts), format == MOE_FORMAT_BF16 ? "sink_" : "shared_");
  };
  if (p.sink_experts > 0 && block) {
    // fp8_block: the sinks run apart (bf16 by cuBLAS, fp8_block_run.cpp), their groups skipped by
    // the gather, the GEMMs and the activation: no weights there, block scales 1, no bias.
    const int64_t sinks = p.sink_experts;
    s13.resize(s13.size() + size_t(sinks * (n1_ / 128) * (h / 128)), 1.0f);
    s2.resize(s2.size() + size_t(sinks * (h / 128) * (padded_i_ / 128)), 1.0f);
    b13.resize(b13.size() + size_t(sinks * n1_), 0.0f);
    b2.resize(b2.size() + size_t(sinks * h), 0.0f);
    group += sinks;
    sinks_ = std::make_unique<gpu::SinkExperts>(p, w);
  } else if (p.sink_experts > 0) {
    prepare_extra(MOE_FORMAT_BF16, w.sink_w13, {}, w.sink_w2, {}, p.sink_experts);
  }
  if (p.shared_intermediate > 0)
    prepare_extra(static_cast<moe_format>(p.format), w.shared_w13, w.shared_w13_scale, w.shared_w2,
                  w.shared_w2_scale, 1);

  std::vector<const void*> p13, p2;
  for (int64_t g = 0; g < groups_; ++g) {
    p13.push_back(static_cast<const char*>(w13_.get()) + size_t(g) * w13_group);
    p2.push_back(static_cast<const char*>(w2_.get()) + size_t(g) * w2_group);
  }
  w13_ptrs_ = upload_vector(p13);
  w2_ptrs_ = upload_vector(p2);
  if (block) {
    const size_t s13_group = size_t(n1_ / 128 * (h / 128)),
                 s2_group = size_t(h / 128 * (padded_i_ / 128));
    MOE_CHECK(s13.size() == s13_group * size_t(groups_) && s2.size() == s2_group * size_t(groups_),
              MOE_STATUS_INTERNAL, "trtllm_style: {} + {} block scales for {} groups", s13.size(),
              s2.size(), groups_);
    s13_ = upload_vector(s13);
    s2_ = upload_vector(s2);
    std::vector<const float*> q13, q2;
    for (int64_t g = 0; g < groups_; ++g) {
      q13.push_back(s13_.as<float>() + size_t(g) * s13_group);
      q2.push_back(s2_.as<float>() + size_t(g) * s2_group);
    }
    s13_ptrs_ = upload_vector(q13);
    s2_ptrs_ = upload_vector(q2);
  }
  has_bias_ = p.expert_bias != 0;
  if (has_bias_) {
    b13_ = upload_vector(b13);
    b2_ = upload_vector(b2);
  }
  // In place, the weight-only GEMM views w13 as pairs of rows (a TMA dimension whose stride is
  // larger than the next one's): where the driver would not encode that view, every batch stays
  // on CUTLASS's GEMMs rather than failing at its launch.
  if (own_in_place_) {
    gpu::WoGemmArgs view;  // GEMM1's weights as run_weight_only gives them
    view.weights = gpu::WoWeights::kBf16;
    view.groups = int(groups_);
    view.weight_rows = w13_.get();
    view.k = h;
    view.weight_order = gpu::WoWeightRows::kInterleaved;
    view.weight_group_rows = n1_;
    view.weight_ld = h;
    view.epilogue = gated ? gpu::WoEpilogue::kGated : gpu::WoEpilogue::kPlainRelu2;
    CUtensorMap map;
    own_in_place_ = gpu::encode_wo_weights_map(&map, view);
  }
  // The grouped GEMMs' scratch depends on the groups and the device only: asked of CUTLASS once.
  gemm_ws_bytes_ =
      block ? moe::gpu::fp8_block_gemm_workspace_bytes(int(groups_), device_info().sm_count)
            : grouped_gemm_workspace_bytes(int(groups_), device_info().sm_count);
}

int64_t expected_group_rows(const moe_problem& p, int64_t tokens) {
  const int64_t extra = p.sink_experts + (p.shared_intermediate > 0 ? 1 : 0);
  return tokens * p.top_k * p.local_experts / std::max<int64_t>(1, p.experts) + tokens * extra;
}

DeviceLayer::GroupRange DeviceLayer::sink_groups() const {
  if (!sinks_) return {};
  const moe_problem p = problem_.c();
  const auto first = int32_t(gpu::first_sink_group(p));
  return {first, first + int32_t(p.sink_experts)};
}

int64_t weight_only_groups(const moe_problem& p) {
  return p.local_experts + p.sink_experts + (p.shared_intermediate > 0 ? 1 : 0);
}

bool auto_own_bf16(const moe_problem& p, bool cutlass_options, bool own_options) {
  const int64_t groups = weight_only_groups(p);
  if (p.format != MOE_FORMAT_BF16 || p.sink_experts > 0 || groups > gpu::wo_gemm_max_groups() ||
      cutlass_options)
    return false;
  // Measured on the H200 (bench/NOTES.md, sessions 18 and 19): the weight-only GEMM on bf16
  // tiles is 1-18% faster than CUTLASS's up to 128 rows per expert and 0-16% slower past 256 on
  // Qwen3-30B-A3B and Mixtral (hidden 2048, 4096); on DeepSeek-V3 (hidden 7168) 3-5% faster up
  // to 16 rows an expert, but 3.5% slower at 32, 28% at 64 and 17% at 128. A layer holds one of
  // the two layouts: the one for the largest batch it takes.
  return own_options || expected_group_rows(p, p.max_tokens) <= own_gemm_most_rows(p) * groups;
}

int64_t own_gemm_most_rows(const moe_problem& p) {
  return p.hidden <= 4096 ? 128 : 16;
}

bool own_gemm_in_place(const moe_problem& p, int64_t n1, bool cutlass_options) {
  // The same measurements as auto_own_bf16's, per batch rather than for the largest: the
  // weight-only GEMM reads TensorRT-LLM's interleaved rows as its own tiles (two TMA dimensions
  // pick a pair's rows), so only whole 128-row tiles of both GEMMs are asked for.
  return p.format == MOE_FORMAT_BF16 && p.sink_experts == 0 &&
         weight_only_groups(p) <= gpu::wo_gemm_max_groups() && !cutlass_options && n1 % 128 == 0 &&
         p.hidden % 128 == 0;
}

bool DeviceLayer::runs_in_place(int64_t tokens) const {
  const moe_problem p = problem_.c();
  const int64_t rows = expected_group_rows(p, tokens);
  return own_in_place_ && rows <= own_gemm_most_rows(p) * groups_ &&
         !in_place_loses(p, rows, groups_);
}

bool in_place_loses(const moe_problem& p, int64_t rows, int64_t groups) {
  // Measured on the H200 (bench/NOTES.md, session 36; the same run, in place / CUTLASS): Qwen3
  // T=1/8/64/512/2048 0.77/0.93/0.98/0.89/0.92, Mixtral T=1/8/64/512 0.85/1.025/1.00/0.83,
  // DeepSeek-V3 T=1/64/512 0.96/1.009/0.97. Both losses are at 2 rows an expert on the wide
  // layers, where CUTLASS's swapped-operand weight tiles stream a little better than 16-token
  // tiles.
  return p.hidden >= 4096 && rows >= groups && rows <= kInPlaceLosesRows * groups;
}

bool auto_own_fp8(const moe_problem& p, bool cutlass_options, bool own_options) {
  // Measured on the H200 (bench/NOTES.md, session 24) against CUTLASS's promoted fp8 GEMMs in
  // the same run: up to hidden 4096 faster at every batch (Qwen3-30B-A3B 0.68-0.90x, Mixtral
  // 0.79-0.92x of their time from T = 512 to 16384); on DeepSeek-V3 (hidden 7168) 0.93x at 16
  // rows an expert (session 23) but 1.03x at T = 4096 and 16384.
  // (A shared expert is as wide as the routed experts on fp8_tensor layers: check_support.)
  if (!is_fp8(p) || weight_only_groups(p) > gpu::wo_gemm_max_groups() || cutlass_options)
    return false;
  return own_options || p.hidden <= kOwnFp8AnyRowsHidden ||
         expected_group_rows(p, p.max_tokens) <= own_gemm_most_rows(p) * weight_only_groups(p);
}

bool DeviceLayer::weight_only_path() const {
  return own_bf16_ || own_fp8_ || is_weight_only(problem_.c());
}

void DeviceLayer::check_own_gemm(const moe_problem& p, const Options& options) const {
  const char* format = format_name(static_cast<moe_format>(p.format));
  for (const auto& [key, value] : options)
    MOE_CHECK((key != "token_tile" && key != "weight_tile") || weight_only_path(),
              MOE_STATUS_CONFIG_ERROR,
              "trtllm_style: {} is for the weight-only GEMM (mxfp4, nvfp4 and mxfp8 layers, or "
              "bf16 and fp8_tensor ones with bf16_gemm or fp8_gemm: own), not a {} layer on "
              "CUTLASS",
              key, format);
  if (!own_bf16_ && !own_fp8_) return;
  // (fp8_tensor layers refuse sinks and a separate activation before this: check_support and
  // the option parser.)
  const char* option = own_fp8_ ? "fp8_gemm" : "bf16_gemm";
  if (own_bf16_)
    MOE_CHECK(p.sink_experts == 0, MOE_STATUS_CONFIG_ERROR,
              "trtllm_style: bf16_gemm 'own' runs the weight-only GEMM, which prepares the routed "
              "and shared experts only, not the {} sink experts (bf16_gemm: cutlass runs them)",
              p.sink_experts);
  const int64_t groups = weight_only_groups(p);
  MOE_CHECK(groups <= gpu::wo_gemm_max_groups(), MOE_STATUS_CONFIG_ERROR,
            "trtllm_style: {} 'own' schedules at most {} groups, not {}", option,
            gpu::wo_gemm_max_groups(), groups);
  MOE_CHECK(!tiles_option_, MOE_STATUS_CONFIG_ERROR,
            "trtllm_style: gemm_tiles is for the CUTLASS GEMMs; with {} 'own' the token tile is "
            "token_tile (auto, 16, 32, 64, 96, 128, 192{})",
            option, own_bf16_ ? ", 256" : "");
  if (own_bf16_)
    MOE_CHECK(fuse_option_ != false, MOE_STATUS_CONFIG_ERROR,
              "trtllm_style: activation_epilogue 'separate' does not go with bf16_gemm 'own', "
              "whose GEMM1 always applies the activation in its epilogue");
}

// Fewer than 32 rows per group on average: decode-like, weight tiles (swap AB). Under expert
// parallelism only local_experts/experts of the routed rows land here (uniform routing).
bool DeviceLayer::small_groups(int64_t tokens) const {
  return expected_group_rows(problem_.c(), tokens) < 32 * groups_;
}

bool DeviceLayer::fuse_activation(int64_t tokens) const {
  // fp8_tensor always fuses: the epilogue hands the quantisation unrounded f32 values (a bf16
  // GEMM1 output or activation would move ~3% of the intermediate's codes off the reference's).
  // fp8_block never does (no row interleave); its GEMM1 writes f32 for the same reason.
  if (is_fp8(problem_.c())) return true;
  if (is_fp8_block(problem_.c())) return false;
  if (fuse_option_) return *fuse_option_;
  // Measured on the H200 (bench/NOTES.md, v2): with few rows per group the fused epilogue saves
  // a launch and wins; with more, 128x256 tiles and a separate activation kernel beat the fused
  // 128x128 kernel by 12-19% (qwen3, mixtral at T >= 512).
  return small_groups(tokens);
}

GemmTiles DeviceLayer::tiles(int64_t tokens) const {
  if (tiles_option_) return *tiles_option_;
  if (small_groups(tokens)) return GemmTiles::kWeights;
  // e4m3 has no 128x256 tiles (kernels/sm90_grouped_gemm.cuh, OperandTraits).
  return problem_.c().format == MOE_FORMAT_BF16 ? GemmTiles::kWide : GemmTiles::kTokens;
}

// The workspace pieces in carve order: permutation, gathered rows, GEMM1 output (none when the
// activation is fused), activation, GEMM2 output, grouped-GEMM scratch (shared by both GEMMs:
// they run one after the other); fp8_tensor adds the quantised hidden states, the quantised
// intermediate, and three scales with the dynamic quantisation's amax scratch; fp8_block has e4m3
// rows, an f32 GEMM1 output, an e4m3 intermediate, the two MN-major 1x128 scale matrices and
// the hidden states quantised once before they are gathered (gpu::Fp8Staging).
std::array<size_t, 9> DeviceLayer::pieces(int64_t tokens) const {
  const moe_problem p = problem_.c();
  const bool fp8 = is_fp8(p);
  const size_t rows = size_t(tokens * rows_per_token(p));
  if (own_fp8_)  // e4m3 rows, the f32 activated intermediate (not with static scales: GEMM1
                 // writes its codes), GEMM2's output, the e4m3 hidden states and intermediate,
                 // the scales with the amax scratch and GEMM1's amaxes
    return {moe::gpu::permutation_workspace_bytes(p, tokens),
            rows * p.hidden,
            0,
            p.input_format == MOE_INPUT_FP8_TENSOR_STATIC ? 0 : rows * padded_i_ * 4,
            rows * p.hidden * 2,
            0,
            size_t(tokens * p.hidden),
            rows * padded_i_,
            gpu::workspace_round_up(3 * sizeof(float)) +
                moe::gpu::quantize_fp8_tensor_workspace_bytes() + 2 * sizeof(uint32_t)};
  if (weight_only_path())  // bf16 rows, the activated intermediate (GEMM1 fuses it), GEMM2's
                           // output; the sinks' own pieces where they run apart
    return {moe::gpu::permutation_workspace_bytes(p, tokens),
            rows * p.hidden * 2,
            0,
            rows * padded_i_ * 2,
            rows * p.hidden * 2,
            sinks_ ? sinks_->workspace_bytes(tokens) : 0,
            0,
            0,
            0};
  if (is_fp8_block(p))  // the sinks (run apart after GEMM2) reuse the GEMMs' scratch
    return {moe::gpu::permutation_workspace_bytes(p, tokens),
            rows * p.hidden,
            rows * n1_ * 4,
            rows * padded_i_,
            rows * p.hidden * 2,
            std::max(gemm_ws_bytes_, sinks_ ? sinks_->workspace_bytes(tokens) : size_t(0)),
            rows * (p.hidden / 128) * 4,
            rows * (padded_i_ / 128) * 4,
            gpu::fp8_staging_pays(p.top_k, p.local_experts, p.experts)
                ? moe::gpu::gather_quantize_fp8_staging_bytes(tokens, p.hidden)
                : 0};
  const size_t eb = fp8 ? 1 : 2;
  return {moe::gpu::permutation_workspace_bytes(p, tokens),
          rows * p.hidden * eb,
          fuse_activation(tokens) ? 0 : rows * n1_ * 2,
          rows * padded_i_ * (fp8 ? 4 : 2),
          rows * p.hidden * 2,
          gemm_ws_bytes_,
          fp8 ? size_t(tokens * p.hidden) : 0,
          fp8 ? rows * padded_i_ : 0,
          fp8 ? gpu::workspace_round_up(3 * sizeof(float)) +
                    moe::gpu::quantize_fp8_tensor_workspace_bytes()
              : 0};
}

size_t DeviceLayer::workspace_size(int64_t tokens) const {
  size_t total = 0;
  for (size_t bytes : pieces(tokens)) total += gpu::workspace_round_up(bytes);
  return total;
}

DeviceLayer::Workspace DeviceLayer::carve(void* base, int64_t tokens) const {
  const moe_problem p = problem_.c();
  const std::array<size_t, 9> size = pieces(tokens);
  gpu::WorkspaceCarver c(base);
  auto take = [&](size_t bytes) { return c.take(bytes); };
  Workspace ws;
  ws.perm = moe::gpu::carve_permutation(p, tokens, take(size[0]));
  ws.perm.local_of_global = local_map_.as<int32_t>();
  ws.rows = take(size[1]);
  ws.gemm1 = take(size[2]);
  ws.act = take(size[3]);
  if (size[3] == 0) ws.act = nullptr;  // none (fp8_tensor_static's own GEMM1 writes act_codes)
  ws.gemm2 = take(size[4]);
  ws.gemm_ws_bytes = size[5];
  ws.gemm_ws = take(size[5]);
  void* piece6 = take(size[6]);
  void* piece7 = take(size[7]);
  auto* scales = static_cast<uint8_t*>(take(size[8]));
  const bool block = is_fp8_block(p);
  ws.hidden_codes = block ? nullptr : static_cast<uint8_t*>(piece6);
  ws.act_codes = block ? nullptr : static_cast<uint8_t*>(piece7);
  ws.row_scales = block ? static_cast<float*>(piece6) : nullptr;
  ws.act_scales = block ? static_cast<float*>(piece7) : nullptr;
  ws.staging = block && size[8] > 0 ? scales : nullptr;
  ws.scales = block ? nullptr : reinterpret_cast<float*>(scales);
  ws.amax_ws = scales && !block ? scales + gpu::workspace_round_up(3 * sizeof(float)) : nullptr;
  ws.gemm1_amax = own_fp8_
                      ? reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(ws.amax_ws) +
                                                    moe::gpu::quantize_fp8_tensor_workspace_bytes())
                      : nullptr;
  return ws;
}

Fp8Scales DeviceLayer::quantize_hidden_fp8(const moe_run_args& a, const Workspace& ws,
                                           cudaStream_t stream) const {
  const moe_problem p = problem_.c();
  const auto* hidden = static_cast<const uint16_t*>(a.hidden.data);
  const moe::gpu::RowRange all{a.hidden.shape[0], nullptr, nullptr};
  const bool dynamic = p.input_format == MOE_INPUT_FP8_TENSOR_DYNAMIC;
  const float* x_scale = dynamic ? ws.scales : static_scales_.as<float>();
  if (dynamic)
    moe::gpu::launch_quantize_fp8_tensor_dynamic(hidden, p.hidden, all, ws.hidden_codes, ws.scales,
                                                 ws.amax_ws, stream);
  else
    moe::gpu::launch_quantize_fp8_tensor_static(hidden, p.hidden, all, x_scale, ws.hidden_codes,
                                                stream);
  // e4m3 rows move as pairs of bytes (H is a multiple of 16).
  moe::gpu::launch_gather_rows(ws.perm, p.hidden / 2,
                               reinterpret_cast<const uint16_t*>(ws.hidden_codes),
                               static_cast<uint16_t*>(ws.rows), stream);
  const int32_t shared_group = p.shared_intermediate > 0 ? int32_t(groups_ - 1) : -1;
  return {x_scale, nullptr, w13_scale_.as<float>(), shared_group};
}

Fp8Scales DeviceLayer::quantize_intermediate_fp8(const Workspace& ws, cudaStream_t stream,
                                                 const uint32_t* gemm1_amax) const {
  const moe_problem p = problem_.c();
  const int64_t* offsets = ws.perm.group_offsets;
  const auto* inter = static_cast<const float*>(ws.act);
  const int64_t rmax = ws.perm.max_rows;
  const bool shared = p.shared_intermediate > 0;
  const int32_t shared_group = shared ? int32_t(groups_ - 1) : -1;
  if (p.input_format == MOE_INPUT_FP8_TENSOR_DYNAMIC && gemm1_amax != nullptr) {
    const int64_t* routed_end = offsets + (shared ? groups_ - 1 : groups_);
    moe::gpu::launch_quantize_fp8_tensor_from_amax(inter, padded_i_, {rmax, nullptr, routed_end},
                                                   gemm1_amax, ws.act_codes, ws.scales + 1, stream);
    if (shared)
      moe::gpu::launch_quantize_fp8_tensor_from_amax(
          inter, padded_i_, {rmax, offsets + groups_ - 1, offsets + groups_}, gemm1_amax + 1,
          ws.act_codes, ws.scales + 2, stream);
    return {ws.scales + 1, shared ? ws.scales + 2 : nullptr, w2_scale_.as<float>(), shared_group};
  }
  if (p.input_format == MOE_INPUT_FP8_TENSOR_DYNAMIC) {
    const int64_t* routed_end = offsets + (shared ? groups_ - 1 : groups_);
    moe::gpu::launch_quantize_fp8_tensor_dynamic(inter, padded_i_, {rmax, nullptr, routed_end},
                                                 ws.act_codes, ws.scales + 1, ws.amax_ws, stream);
    if (shared)
      moe::gpu::launch_quantize_fp8_tensor_dynamic(inter, padded_i_,
                                                   {rmax, offsets + groups_ - 1, offsets + groups_},
                                                   ws.act_codes, ws.scales + 2, ws.amax_ws, stream);
    return {ws.scales + 1, shared ? ws.scales + 2 : nullptr, w2_scale_.as<float>(), shared_group};
  }
  moe::gpu::launch_quantize_fp8_tensor_static(inter, padded_i_, {rmax, nullptr, offsets + groups_},
                                              intermediate_static_scale(), ws.act_codes, stream);
  return {intermediate_static_scale(), nullptr, w2_scale_.as<float>(), shared_group};
}

void DeviceLayer::run(const moe_run_args& a) const {
  const moe_problem p = problem_.c();
  const int64_t tokens = a.hidden.shape[0];
  sdk::check_run_tensors(p, a, [&](int64_t t) { return workspace_size(t); });
  if (tokens == 0) return;
  auto stream = static_cast<cudaStream_t>(a.stream);
  const Workspace ws = carve(a.workspace, tokens);
  if (is_fp8_block(p)) return run_fp8_block(a, ws, stream);
  if (weight_only_path() || runs_in_place(tokens)) return run_weight_only(a, ws, stream);
  const int sm = device_info().sm_count;
  const GemmTiles tiles = this->tiles(tokens);
  const bool fuse = fuse_activation(tokens);
  const bool fp8 = is_fp8(p);
  const auto* hidden = static_cast<const uint16_t*>(a.hidden.data);
  const int64_t* offsets = nullptr;

  moe::gpu::launch_permute(p, tokens, static_cast<const int32_t*>(a.topk_ids.data), ws.perm,
                           stream);
  offsets = ws.perm.group_offsets;
  // fp8_tensor: the hidden states quantised, their e4m3 rows gathered.
  Fp8Scales s1, s2;
  if (fp8) {
    s1 = quantize_hidden_fp8(a, ws, stream);
  } else {
    moe::gpu::launch_gather_rows(ws.perm, p.hidden, hidden, static_cast<uint16_t*>(ws.rows),
                                 stream);
  }
  GroupedGemmArgs g1{int(groups_),
                     offsets,
                     int(n1_),
                     int(p.hidden),
                     ws.rows,
                     w13_ptrs_.as<const void*>(),
                     ws.act,
                     ws.gemm_ws,
                     ws.gemm_ws_bytes,
                     sm,
                     fp8 ? &s1 : nullptr};
  const int32_t bias_groups = has_bias_ ? int32_t(p.local_experts) : 0;
  const int32_t silu_begin = int32_t(p.local_experts);
  const int32_t silu_end = int32_t(p.local_experts + p.sink_experts);
  if (fuse) {
    ActivationEpilogueArgs e{has_bias_ ? b13_.as<float>() : nullptr, bias_groups, silu_begin,
                             silu_end};
    run_grouped_gemm_activation(tiles, p, g1, e, stream);
  } else {
    g1.out = ws.gemm1;
    run_grouped_gemm(tiles, g1, stream);
    moe::gpu::ActivationArgs act;
    act.gemm1 = static_cast<const uint16_t*>(ws.gemm1);
    act.out = static_cast<uint16_t*>(ws.act);
    act.intermediate = padded_i_;
    act.layout = moe::gpu::GateUpLayout::kInterleavedUpGate;
    act.bias = has_bias_ ? b13_.as<float>() : nullptr;
    act.bias_groups = bias_groups;
    act.row_group = ws.perm.row_group;
    act.silu_group_begin = silu_begin;
    act.silu_group_end = silu_end;
    act.rows = {ws.perm.max_rows, nullptr, offsets + groups_};
    moe::gpu::launch_activation(p, act, stream);
  }

  const void* gemm2_rows = ws.act;
  if (fp8) {
    s2 = quantize_intermediate_fp8(ws, stream);
    gemm2_rows = ws.act_codes;
  }

  const GroupedGemmArgs g2{int(groups_),       offsets,
                           int(p.hidden),      int(padded_i_),
                           gemm2_rows,         w2_ptrs_.as<const void*>(),
                           ws.gemm2,           ws.gemm_ws,
                           ws.gemm_ws_bytes,   sm,
                           fp8 ? &s2 : nullptr};
  run_grouped_gemm(tiles, g2, stream);

  moe::gpu::FinalizeArgs fin;
  fin.gemm2 = static_cast<const uint16_t*>(ws.gemm2);
  fin.topk_weights = static_cast<const float*>(a.topk_weights.data);
  fin.bias = has_bias_ ? b2_.as<float>() : nullptr;
  fin.out = static_cast<uint16_t*>(a.output.data);
  fin.accumulate = moe::sdk::run_accumulates(a);
  moe::gpu::launch_finalize(p, tokens, ws.perm, fin, stream);
}

}  // namespace moe::trtllm
