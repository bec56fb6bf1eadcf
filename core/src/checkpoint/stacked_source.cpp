// stacked: our canonical names under the prefix, {prefix}.w13 [E, 2I, H], w2 [E, H, I] with
// their _scale / _scale_2, b13 / b2, shared_w13 / shared_w2, sink_w13 / sink_w2, a13_scale /
// a2_scale, router.weight + router.bias and the selection bias routing_bias. Reader and writer.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <tuple>

#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/format_table.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/weights.hpp"
#include "source_base.hpp"
#include "writer_util.hpp"

namespace moe::detail {
namespace {

class StackedSource final : public SourceBase {
 public:
  using SourceBase::SourceBase;

  int64_t count_experts() const override { return leading_dim("w2"); }

  std::pair<int64_t, int64_t> checkpoint_sizes() const override {
    const auto& s = shape_of("w2", 3);
    // The dtype first: a checkpoint of another format has sizes that read as the wrong ones.
    check_weight_dtype(ctx_, name("w2"), format_);
    const bool packed = is_fp4(format_) && !converted_at_load(dtype_of("w2"), format_);
    return {s[1], packed ? 2 * s[2] : s[2]};
  }

  Expert expert(int64_t e) const override;

  std::pair<float, float> activation_scales(int64_t) const override {
    return {read_scalar_f32(ctx_, name("a13_scale")), read_scalar_f32(ctx_, name("a2_scale"))};
  }

  void sinks(LayerWeights& w) const override;

 protected:
  RouterNames router_names() const override {
    return {"router.weight", false, "router.bias", "routing_bias"};
  }

  Expert shared_expert(int64_t full) const override {
    const int64_t rows = gated_ ? 2 * full : full;
    return split_w13(matrix("shared_w13", -1, 0, rows, p_.hidden),
                     matrix("shared_w2", -1, 0, p_.hidden, full), name("shared_w13"));
  }
  const char* shared_names() const override { return "shared_w"; }
  const char* sink_names() const override { return "sink_w"; }

 private:
  Matrix matrix(const std::string& q, int64_t e, int64_t experts, int64_t rows, int64_t cols) const;
  Expert split_w13(Matrix w13, Matrix down, const std::string& what) const;
};

Expert StackedSource::expert(int64_t e) const {
  const int64_t E = count_experts(), r13 = gated_ ? 2 * full_i_ : full_i_;
  Expert x = split_w13(matrix("w13", e, E, r13, p_.hidden), matrix("w2", e, E, p_.hidden, full_i_),
                       name("w13"));
  if (p_.expert_bias) {
    const auto b13 = to_floats(slot(cached_values(name("b13"), {E, r13}), e, {r13}));
    const int64_t half = gated_ ? full_i_ : 0;
    for (int64_t r = 0; r < full_i_; ++r) {
      const int64_t g = spec_.interleaved_gate_up ? 2 * r : r;
      const int64_t u = spec_.interleaved_gate_up ? 2 * r + 1 : half + r;
      if (gated_) x.b_gate.push_back(b13[g]);
      x.b_up.push_back(b13[gated_ ? u : r]);
    }
    x.b_down = to_floats(slot(cached_values(name("b2"), {E, p_.hidden}), e, {p_.hidden}));
  }
  return x;
}

// A stacked matrix: names `q` / `q`_scale / `q`_scale_2, slot e (-1: not stacked).
Matrix StackedSource::matrix(const std::string& q, int64_t e, int64_t experts, int64_t rows,
                             int64_t cols) const {
  const MatrixLayout l = matrix_layout(format_, rows, cols);
  const bool packed = l.dtype == MOE_DTYPE_E2M1X2;
  auto dims = [&](std::vector<int64_t> d) {
    if (e >= 0) d.insert(d.begin(), experts);
    return d;
  };
  const int64_t at = e >= 0 ? e : 0;
  if (const moe_dtype stored = dtype_of(q); converted_at_load(stored, format_)) {
    record_conversion(ctx_, name(q), format_name(format_));
    return {MOE_FORMAT_BF16,
            rows,
            cols,
            to_f32(slot(cached(name(q), stored, dims({rows, cols})), at, {rows, cols})),
            {},
            1.0f};
  }
  check_weight_dtype(ctx_, name(q), format_);
  Matrix m{format_, rows, cols, {}, {}, 1.0f};
  m.q = slot(cached(name(q), packed ? MOE_DTYPE_U8 : l.dtype, dims({rows, l.stored_cols}),
                    packed ? MOE_DTYPE_I8 : MOE_DTYPE_INVALID),
             at, {rows, l.stored_cols});
  if (packed) m.q.reinterpret(MOE_DTYPE_E2M1X2);
  if (l.scale_dtype != MOE_DTYPE_INVALID) {
    const std::string sn = name(q + "_scale");
    const moe_dtype raw = l.scale_dtype == MOE_DTYPE_F32 ? MOE_DTYPE_F32 : MOE_DTYPE_U8;
    const moe_dtype alt = l.scale_dtype == MOE_DTYPE_F32 ? MOE_DTYPE_INVALID : l.scale_dtype;
    if (l.scale_rows == 0) {
      m.scale = slot(cached(sn, raw, {e >= 0 ? experts : 1}), at, {1});
    } else {
      m.scale = slot(scale_stack(sn, raw, alt, e >= 0 ? experts : 0, l), at,
                     {l.scale_rows, l.scale_cols});
      m.scale.reinterpret(l.scale_dtype);
    }
  }
  if (l.has_scale_2) {
    m.scale_2 =
        cached(name(q + "_scale_2"), MOE_DTYPE_F32, {e >= 0 ? experts : 1}).data<float>()[at];
    MOE_CHECK(m.scale_2 > 0 && std::isfinite(m.scale_2), MOE_STATUS_INVALID_ARGUMENT,
              "checkpoint tensor '{}'{} is {}: a global scale must be finite and > 0",
              name(q + "_scale_2"), e >= 0 ? fmt::format("[{}]", e) : "", m.scale_2);
  }
  return m;
}

// w13 as gate and up: stacked halves [gate; up], or rows interleaved when the spec says so.
Expert StackedSource::split_w13(Matrix w13, Matrix down, const std::string& what) const {
  Expert x;
  if (!gated_) {
    x.up = std::move(w13);
  } else if (spec_.interleaved_gate_up) {
    std::tie(x.gate, x.up) = deinterleave_rows(w13, what);
  } else {
    x.gate = slice_rows(w13, 0, w13.rows / 2, what);
    x.up = slice_rows(w13, w13.rows / 2, w13.rows / 2, what);
  }
  x.down = std::move(down);
  return x;
}

// Sinks are always gated (silu_mul): interleaved_gate_up applies to sink_w13 [S, 2Is, H] as to
// w13 and shared_w13, whatever the routed activation.
void StackedSource::sinks(LayerWeights& w) const {
  const int64_t s = p_.sink_experts, is = p_.sink_intermediate;
  w.sink_w13 = bf16_weights("sink_w13", {s, 2 * is, p_.hidden});
  w.sink_w2 = bf16_weights("sink_w2", {s, p_.hidden, is});
  if (spec_.interleaved_gate_up) deinterleave_sinks(w.sink_w13, s, is, p_.hidden, "sink_w13");
}

void write_stacked(const ExportedLayer& l, std::vector<NamedTensor>& out) {
  const LayerWeights& w = l.w;
  const Layout g = layout_of(l.p);
  auto put = [&](const std::string& n, const HostTensor& t) {
    if (t.empty()) return;
    HostTensor c = t;
    // Checkpoints have no fp4 or ue8m0 dtype: both are stored as bytes.
    if (c.dtype() == MOE_DTYPE_E2M1X2 || c.dtype() == MOE_DTYPE_UE8M0) c.reinterpret(MOE_DTYPE_U8);
    out.push_back({l.prefix + n, c});
  };
  HostTensor w13 = w.w13, w13_scale = w.w13_scale, b13 = w.b13;
  if (l.spec.interleaved_gate_up && g.gated) {
    std::vector<HostTensor> q, s, b;
    for (int64_t e = 0; e < g.experts; ++e) {
      const Matrix x = interleaved_w13(w, g, e);
      q.push_back(x.q);
      if (!x.scale.empty()) s.push_back(x.scale);
      if (!w.b13.empty()) b.push_back(interleaved_b13(w, g, e));
    }
    w13 = stack(q);
    // One scale per matrix does not move with the rows: w13_scale stays [E], not [E, 1].
    if (!s.empty() && !per_matrix_scale(format_spec(g.format))) w13_scale = stack(s);
    if (!b.empty()) b13 = stack(b);
  }
  // The reader de-interleaves every fused gate/up tensor: the shared expert's and the sinks' too.
  HostTensor shared_w13 = w.shared_w13, shared_w13_scale = w.shared_w13_scale;
  HostTensor sink_w13 = w.sink_w13;
  if (l.spec.interleaved_gate_up && g.gated && !w.shared_w13.empty()) {
    const Matrix x = interleaved_halves(g.format, l.p.shared_intermediate, g.hidden, w.shared_w13,
                                        w.shared_w13_scale, w.shared_w13_scale_2, -1, "shared_w13");
    shared_w13 = x.q;
    if (!x.scale.empty() && !per_matrix_scale(format_spec(g.format))) shared_w13_scale = x.scale;
  }
  if (l.spec.interleaved_gate_up && !w.sink_w13.empty()) {  // sinks are gated (silu_mul)
    std::vector<HostTensor> q;
    for (int64_t e = 0; e < l.p.sink_experts; ++e)
      q.push_back(interleaved_halves(MOE_FORMAT_BF16, l.p.sink_intermediate, g.hidden, w.sink_w13,
                                     {}, {}, e, "sink_w13")
                      .q);
    sink_w13 = stack(q);
  }
  put("w13", w13), put("w13_scale", w13_scale), put("w13_scale_2", w.w13_scale_2);
  put("w2", w.w2), put("w2_scale", w.w2_scale), put("w2_scale_2", w.w2_scale_2);
  put("b13", b13), put("b2", w.b2), put("a13_scale", w.a13_scale), put("a2_scale", w.a2_scale);
  put("shared_w13", shared_w13), put("shared_w13_scale", shared_w13_scale);
  put("shared_w13_scale_2", w.shared_w13_scale_2), put("shared_w2", w.shared_w2);
  put("shared_w2_scale", w.shared_w2_scale), put("shared_w2_scale_2", w.shared_w2_scale_2);
  put("sink_w13", sink_w13), put("sink_w2", w.sink_w2);
}

}  // namespace

std::unique_ptr<ExpertSource> make_stacked_source(const Checkpoint& ck, const CheckpointSpec& spec,
                                                  const moe_problem& p) {
  return std::make_unique<StackedSource>(ck, spec, p);
}

extern const LayerWriter kStackedWriter = {.write = write_stacked,
                                           .router_weight = "router.weight",
                                           .selection_bias = "routing_bias",
                                           .sinks = true,
                                           .static_scales = true};

}  // namespace moe::detail
