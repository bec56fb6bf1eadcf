// inkling: {prefix} is the MLP module. Router gate.weight [R+S, H] (the S sink rows last, so
// router_logits puts them after the padded routed columns), selection bias gate.bias [R] and
// gate.global_scale [1] (the problem's global_scale: sigmoid_bias_sink multiplies every weight by
// it, §4); routed experts experts.w13_weight [R, 2I, H] with interleaved gate/up rows
// [g0, u0, g1, u1, ...] and experts.w2_weight [R, H, I]; the sinks (weighted by their gammas,
// not a weight-1 shared expert) shared_experts.shared_w13_weight [S, 2Is, H], interleaved alike,
// and shared_experts.shared_w2_weight [S, H, Is], always bf16. The Quark MXFP4 release stores
// the routed weights as packed e2m1 bytes (w13 [R, 2I, H/2], w2 [R, H, I/2]) with ue8m0 scales
// kept flat, experts.w13_weight_scale [R*2I, H/32] and experts.w2_weight_scale [R*H, I/32] (rows
// interleaved like the weights'), and activation amaxes experts.w13_weight.input_amax /
// experts.w2_weight.input_amax for static activation scales (docs/design.md §3.4 says which of
// these names public code confirms). Reader and writer.
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <tuple>

#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/weights.hpp"
#include "source_base.hpp"
#include "writer_util.hpp"

namespace moe::detail {
namespace {

constexpr const char* kW13 = "experts.w13_weight";
constexpr const char* kW2 = "experts.w2_weight";
constexpr const char* kSinkW13 = "shared_experts.shared_w13_weight";
constexpr const char* kSinkW2 = "shared_experts.shared_w2_weight";
constexpr const char* kGlobalScale = "gate.global_scale";
// The activation amax of the inputs of w13 / w2, one for all experts (or one per expert).
constexpr const char* kW13Amax = "experts.w13_weight.input_amax";
constexpr const char* kW2Amax = "experts.w2_weight.input_amax";

class InklingSource final : public SourceBase {
 public:
  using SourceBase::SourceBase;

  int64_t count_experts() const override { return leading_dim(kW2); }

  std::pair<int64_t, int64_t> checkpoint_sizes() const override {
    // A dtype the format cannot take is named first: packed bytes read as bf16 would otherwise
    // show as a halved intermediate size.
    check_weight_dtype(ctx_, name(kW2), format_);
    const auto& s = shape_of(kW2, 3);  // [R, H, I], or [R, H, I/2] packed
    const bool packed = is_fp4(format_) && !converted_at_load(dtype_of(kW2), format_);
    return {s[1], packed ? 2 * s[2] : s[2]};
  }

  Expert expert(int64_t e) const override;

  std::pair<float, float> activation_scales(int64_t experts) const override {
    return {static_scale(kW13Amax, experts), static_scale(kW2Amax, experts)};
  }

  void router(LayerCheckpoint& out, int64_t real_experts) const override;
  void sinks(LayerWeights& w) const override;

 protected:
  RouterNames router_names() const override { return {"gate.weight", true, nullptr, "gate.bias"}; }
  const char* sink_names() const override { return "shared_experts."; }  // its sinks

 private:
  // Gate/up rows per matrix of interleaved stack `q` [count, rows, H], refused when odd.
  int64_t interleaved_rows(const std::string& q) const;
  // Matrix e of stack `q` [E, rows, cols]: bf16 or Quark MXFP4 as stored, or F32 / F16 / BF16
  // converted at load.
  Matrix matrix(const std::string& q, int64_t e, int64_t experts, int64_t rows, int64_t cols) const;
  // The e4m3 static scale of the activations amax tensor `q` describes ([] / [1] for the layer,
  // or [experts]: their max).
  float static_scale(const std::string& q, int64_t experts) const;
};

int64_t InklingSource::interleaved_rows(const std::string& q) const {
  const int64_t rows = shape_of(q, 3)[1];
  MOE_CHECK(rows % 2 == 0, MOE_STATUS_SHAPE_MISMATCH,
            "checkpoint tensor '{}' has {} rows per matrix: its gate/up rows are interleaved "
            "[g0, u0, g1, u1, ...], so the count must be even ({})",
            name(q), rows, ctx_.describe);
  return rows;
}

Expert InklingSource::expert(int64_t e) const {
  MOE_CHECK(gated_, MOE_STATUS_UNSUPPORTED, "inkling experts are gated, not activation {}",
            activation_name(static_cast<moe_activation>(p_.activation)));
  MOE_CHECK(!p_.expert_bias, MOE_STATUS_UNSUPPORTED,
            "inkling experts have no biases: set "
            "expert_bias: false");
  const int64_t E = count_experts();
  interleaved_rows(kW13);
  Expert x;
  std::tie(x.gate, x.up) =
      deinterleave_rows(matrix(kW13, e, E, 2 * full_i_, p_.hidden), name(kW13));
  x.down = matrix(kW2, e, E, p_.hidden, full_i_);
  return x;
}

Matrix InklingSource::matrix(const std::string& q, int64_t e, int64_t experts, int64_t rows,
                             int64_t cols) const {
  const moe_dtype stored = dtype_of(q);
  if (converted_at_load(stored, format_)) {
    record_conversion(ctx_, name(q), format_name(format_));
    return {MOE_FORMAT_BF16,
            rows,
            cols,
            to_f32(slot(cached(name(q), stored, {experts, rows, cols}), e, {rows, cols})),
            {},
            1.0f};
  }
  check_weight_dtype(ctx_, name(q), format_);
  MOE_CHECK(format_ == MOE_FORMAT_BF16 || format_ == MOE_FORMAT_MXFP4, MOE_STATUS_UNSUPPORTED,
            "checkpoint tensor '{}' is {}: inkling checkpoints store bf16 or Quark MXFP4 expert "
            "weights (or F32 / F16 / BF16, converted at load to {})",
            name(q), dtype_name(stored), format_name(format_));
  if (format_ == MOE_FORMAT_BF16)
    return {MOE_FORMAT_BF16,
            rows,
            cols,
            slot(cached(name(q), MOE_DTYPE_BF16, {experts, rows, cols}), e, {rows, cols}),
            {},
            1.0f};
  // Quark MXFP4: e2m1 pairs as bytes (U8, or I8), ue8m0 scale codes as bytes, kept flat.
  const MatrixLayout l = matrix_layout(format_, rows, cols);
  Matrix m{format_, rows, cols, {}, {}, 1.0f};
  m.q = slot(cached(name(q), MOE_DTYPE_U8, {experts, rows, l.stored_cols}, MOE_DTYPE_I8), e,
             {rows, l.stored_cols});
  m.q.reinterpret(MOE_DTYPE_E2M1X2);
  m.scale = slot(scale_stack(name(q + "_scale"), MOE_DTYPE_U8, MOE_DTYPE_UE8M0, experts, l), e,
                 {l.scale_rows, l.scale_cols});
  m.scale.reinterpret(MOE_DTYPE_UE8M0);
  return m;
}

// input_amax is the calibrated max |activation|; the checkpoint's input scale is
// amax / (448 * 6) (input_scale_from_amax), and the activations here are e4m3 per tensor, whose
// static scale is amax / 448: six times that.
float InklingSource::static_scale(const std::string& q, int64_t experts) const {
  MOE_CHECK(has_tensor(ctx_, name(q)), MOE_STATUS_NOT_FOUND,
            "input_format fp8_tensor_static takes its scales from the activation amax '{}', which "
            "the checkpoint does not have ({})",
            name(q), ctx_.describe);
  const auto* entry = ctx_.checkpoint.find(name(q));
  const int64_t count = entry->shape.empty() ? 1 : entry->shape[0];
  MOE_CHECK(entry->shape.size() <= 1 && (count == 1 || count == experts), MOE_STATUS_SHAPE_MISMATCH,
            "checkpoint tensor '{}' has shape [{}]: an activation amax is one value for the layer "
            "or one per expert ({})",
            name(q), fmt::join(entry->shape, ", "), experts);
  const std::vector<float> amax = to_floats(cached_values(name(q), entry->shape));
  float scale = 0.0f;
  for (const float a : amax) scale = std::max(scale, input_scale_from_amax(a, name(q)) * 6.0f);
  return scale;
}

// The router as every convention reads it, plus gate.global_scale: the problem's global_scale
// must be the one the model was trained with, or every routed and sink weight is off by their
// ratio.
void InklingSource::router(LayerCheckpoint& out, int64_t real_experts) const {
  SourceBase::router(out, real_experts);
  const float scale = f32_vector(name(kGlobalScale), 1).data<float>()[0];
  MOE_CHECK(std::isfinite(scale) && scale > 0, MOE_STATUS_INVALID_ARGUMENT,
            "checkpoint tensor '{}' is {}: a routing global scale must be finite and > 0 ({})",
            name(kGlobalScale), scale, ctx_.describe);
  MOE_CHECK(scale == p_.global_scale, MOE_STATUS_INVALID_ARGUMENT,
            "checkpoint tensor '{}' is {}, but the problem has global_scale: {}; set "
            "global_scale: {}",
            name(kGlobalScale), scale, p_.global_scale, scale);
}

// Sinks are always gated (silu_mul) and bf16, their rows interleaved like the routed ones.
void InklingSource::sinks(LayerWeights& w) const {
  const int64_t s = p_.sink_experts, is = p_.sink_intermediate;
  interleaved_rows(kSinkW13);
  w.sink_w13 = bf16_weights(kSinkW13, {s, 2 * is, p_.hidden});
  w.sink_w2 = bf16_weights(kSinkW2, {s, p_.hidden, is});
  deinterleave_sinks(w.sink_w13, s, is, p_.hidden, kSinkW13);
}

// Routed tensor `q` of the whole layer as stored: bf16 as is; MXFP4 as bytes, its scales flat
// [E * rows, cols] as Quark writes them.
void put_routed(std::vector<NamedTensor>& out, const std::string& q, HostTensor t,
                const HostTensor& scale) {
  if (t.dtype() == MOE_DTYPE_E2M1X2) t.reinterpret(MOE_DTYPE_U8);
  out.push_back({q, t});
  if (scale.empty()) return;
  const auto& s = scale.shape();  // [E, rows, cols] -> [E * rows, cols], the same bytes
  HostTensor flat(MOE_DTYPE_U8, {s[0] * s[1], s[2]});
  std::memcpy(flat.raw(), scale.raw(), scale.bytes());
  out.push_back({q + "_scale", flat});
}

void write_inkling(const ExportedLayer& l, std::vector<NamedTensor>& out) {
  const LayerWeights& w = l.w;
  const Layout g = layout_of(l.p);
  MOE_CHECK(g.gated, MOE_STATUS_UNSUPPORTED, "inkling experts are gated, not activation {}",
            activation_name(static_cast<moe_activation>(l.p.activation)));
  MOE_CHECK(g.format == MOE_FORMAT_BF16 || g.format == MOE_FORMAT_MXFP4, MOE_STATUS_UNSUPPORTED,
            "inkling checkpoints are written in bf16 or Quark MXFP4, not {}",
            format_name(g.format));
  MOE_CHECK(l.p.shared_intermediate == 0 && !l.p.expert_bias, MOE_STATUS_UNSUPPORTED,
            "inkling has no weight-1 shared expert (its shared_experts.* are the sinks) and no "
            "expert biases");
  std::vector<HostTensor> w13, w13_scale;
  for (int64_t e = 0; e < g.experts; ++e) {
    const Matrix x = interleaved_w13(w, g, e);  // scale rows move with their weight rows
    w13.push_back(x.q);
    if (!x.scale.empty()) w13_scale.push_back(x.scale);
  }
  put_routed(out, l.prefix + kW13, stack(w13), w13_scale.empty() ? HostTensor{} : stack(w13_scale));
  put_routed(out, l.prefix + kW2, w.w2, w.w2_scale);
  if (!w.sink_w13.empty()) {
    std::vector<HostTensor> sink;
    for (int64_t s = 0; s < l.p.sink_experts; ++s)
      sink.push_back(interleaved_halves(MOE_FORMAT_BF16, l.p.sink_intermediate, g.hidden,
                                        w.sink_w13, {}, {}, s, kSinkW13)
                         .q);
    out.push_back({l.prefix + kSinkW13, stack(sink)});
    out.push_back({l.prefix + kSinkW2, w.sink_w2});
  }
  HostTensor scale(MOE_DTYPE_F32, {1});
  scale.data<float>()[0] = l.p.global_scale;
  out.push_back({l.prefix + kGlobalScale, scale});
}

}  // namespace

std::unique_ptr<ExpertSource> make_inkling_source(const Checkpoint& ck, const CheckpointSpec& spec,
                                                  const moe_problem& p) {
  return std::make_unique<InklingSource>(ck, spec, p);
}

extern const LayerWriter kInklingWriter = {.write = write_inkling,
                                           .router_weight = "gate.weight",
                                           .selection_bias = "gate.bias",
                                           .sinks = true};

}  // namespace moe::detail
