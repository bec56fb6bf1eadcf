// inkling: {prefix} is the MLP module. Router gate.weight [R+S, H] (the S sink rows last, so
// router_logits puts them after the padded routed columns), selection bias gate.bias [R] and
// gate.global_scale [1] (the problem's global_scale: sigmoid_bias_sink multiplies every weight by
// it, §4); routed experts experts.w13_weight [R, 2I, H] with interleaved gate/up rows
// [g0, u0, g1, u1, ...] and experts.w2_weight [R, H, I]; the sinks (weighted by their gammas,
// not a weight-1 shared expert) shared_experts.shared_w13_weight [S, 2Is, H], interleaved alike,
// and shared_experts.shared_w2_weight [S, H, Is], always bf16. Reader and writer.
#include <cmath>
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

class InklingSource final : public SourceBase {
 public:
  using SourceBase::SourceBase;

  int64_t count_experts() const override { return leading_dim(kW2); }

  std::pair<int64_t, int64_t> checkpoint_sizes() const override {
    const auto& s = shape_of(kW2, 3);  // [R, H, I]
    return {s[1], s[2]};
  }

  Expert expert(int64_t e) const override;

  std::pair<float, float> activation_scales(int64_t) const override {
    MOE_FAIL(MOE_STATUS_UNSUPPORTED, "inkling bf16 checkpoints carry no static activation scales");
  }

  void router(LayerCheckpoint& out, int64_t real_experts) const override;
  void sinks(LayerWeights& w) const override;

 protected:
  RouterNames router_names() const override { return {"gate.weight", true, nullptr, "gate.bias"}; }

 private:
  // Gate/up rows per matrix of interleaved stack `q` [count, rows, H], refused when odd.
  int64_t interleaved_rows(const std::string& q) const;
  // Matrix e of stack `q` [E, rows, cols]: bf16 as stored, or F32 / F16 converted at load.
  Matrix matrix(const std::string& q, int64_t e, int64_t experts, int64_t rows, int64_t cols) const;
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
  MOE_CHECK(format_ == MOE_FORMAT_BF16, MOE_STATUS_UNSUPPORTED,
            "checkpoint tensor '{}' is {}: inkling checkpoints store bf16 expert weights (or "
            "F32 / F16, converted at load to {})",
            name(q), dtype_name(stored), format_name(format_));
  return {MOE_FORMAT_BF16,
          rows,
          cols,
          slot(cached(name(q), MOE_DTYPE_BF16, {experts, rows, cols}), e, {rows, cols}),
          {},
          1.0f};
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

void write_inkling(const ExportedLayer& l, std::vector<NamedTensor>& out) {
  const LayerWeights& w = l.w;
  const Layout g = layout_of(l.p);
  MOE_CHECK(g.gated, MOE_STATUS_UNSUPPORTED, "inkling experts are gated, not activation {}",
            activation_name(static_cast<moe_activation>(l.p.activation)));
  MOE_CHECK(g.format == MOE_FORMAT_BF16, MOE_STATUS_UNSUPPORTED,
            "inkling checkpoints are written in bf16, not {}", format_name(g.format));
  MOE_CHECK(l.p.shared_intermediate == 0 && !l.p.expert_bias, MOE_STATUS_UNSUPPORTED,
            "inkling has no weight-1 shared expert (its shared_experts.* are the sinks) and no "
            "expert biases");
  std::vector<HostTensor> w13;
  for (int64_t e = 0; e < g.experts; ++e) w13.push_back(interleaved_w13(w, g, e).q);
  out.push_back({l.prefix + kW13, stack(w13)});
  out.push_back({l.prefix + kW2, w.w2});
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
