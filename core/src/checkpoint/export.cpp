// export_layer: canonical weights -> a convention's tensors, the mirror image of the readers in
// conventions.cpp. Written so that load_layer(export_layer(w)) == w byte for byte.
#include <fmt/format.h>

#include <cstring>

#include "matrix.hpp"
#include "moe/checkpoint.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/format_table.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/weights.hpp"

namespace moe {
namespace {

using detail::Matrix;

std::string substitute_layer(std::string pattern, int64_t layer) {
  const std::string key = "{layer}";
  for (size_t at = pattern.find(key); at != std::string::npos; at = pattern.find(key, at))
    pattern.replace(at, key.size(), std::to_string(layer));
  return pattern;
}

HostTensor scalar_f32(float v) {
  HostTensor t(MOE_DTYPE_F32, {1});
  t.data<float>()[0] = v;
  return t;
}

// One projection as `.weight` and its scales, in the per-projection conventions' spelling.
void put_projection(std::vector<NamedTensor>& out, const std::string& base, const Matrix& m) {
  HostTensor q = m.q;
  if (q.dtype() == MOE_DTYPE_E2M1X2) q.reinterpret(MOE_DTYPE_U8);
  out.push_back({base + ".weight", q});
  const FormatSpec& f = format_spec(m.format);
  if (f.scale == MOE_DTYPE_INVALID) return;
  HostTensor scale = m.scale;
  if (f.checkpoint_scale_dtype != f.scale) scale.reinterpret(f.checkpoint_scale_dtype);
  out.push_back({base + "." + f.checkpoint_scale_names[0], scale});
  if (f.scale_2) out.push_back({base + "." + f.checkpoint_scale_2_name, scalar_f32(m.scale_2)});
}

HostTensor stack(const std::vector<HostTensor>& parts) {
  std::vector<int64_t> shape = parts[0].shape();
  shape.insert(shape.begin(), int64_t(parts.size()));
  HostTensor out(parts[0].dtype(), shape);
  for (size_t i = 0; i < parts.size(); ++i)
    std::memcpy(static_cast<uint8_t*>(out.raw()) + i * parts[i].bytes(), parts[i].raw(),
                parts[i].bytes());
  return out;
}

HostTensor transpose_bf16(const HostTensor& m) {
  const int64_t rows = m.shape()[0], cols = m.shape()[1];
  HostTensor out(MOE_DTYPE_BF16, {cols, rows});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out.data<uint16_t>()[c * rows + r] = m.data<uint16_t>()[r * cols + c];
  return out;
}

// Row e of a bias stack [E, n] (bf16 or f32) as floats.
std::vector<float> bias_row(const HostTensor& t, int64_t e, int64_t n) {
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = t.dtype() == MOE_DTYPE_F32 ? t.data<float>()[e * n + i]
                                        : bf16_to_float(t.data<uint16_t>()[e * n + i]);
  return out;
}

HostTensor interleave_vector(const float* a, const float* b, int64_t n) {
  HostTensor out(MOE_DTYPE_F32, {2 * n});
  for (int64_t i = 0; i < n; ++i) {
    out.data<float>()[2 * i] = a[i];
    out.data<float>()[2 * i + 1] = b[i];
  }
  return out;
}

struct Layout {
  moe_format format;
  int64_t experts, inter, hidden;
  bool gated;
};

void export_per_projection(std::vector<NamedTensor>& out, const LayerWeights& w, const Layout& g,
                           const std::string& p, const char* gate, const char* up,
                           const char* down) {
  const int64_t r13 = g.gated ? 2 * g.inter : g.inter;
  for (int64_t e = 0; e < g.experts; ++e) {
    const std::string base = fmt::format("{}experts.{}.", p, e);
    const Matrix w13 =
        detail::matrix_at(g.format, r13, g.hidden, w.w13, w.w13_scale, w.w13_scale_2, e);
    if (g.gated) {
      put_projection(out, base + gate, detail::slice_rows(w13, 0, g.inter, "w13"));
      put_projection(out, base + up, detail::slice_rows(w13, g.inter, g.inter, "w13"));
    } else {
      put_projection(out, base + up, w13);
    }
    put_projection(
        out, base + down,
        detail::matrix_at(g.format, g.hidden, g.inter, w.w2, w.w2_scale, w.w2_scale_2, e));
  }
}

void export_gpt_oss(std::vector<NamedTensor>& out, const LayerWeights& w, const Layout& g,
                    const std::string& p) {
  std::vector<HostTensor> gu, gs, dq, ds, gb, db;
  for (int64_t e = 0; e < g.experts; ++e) {
    const Matrix w13 =
        detail::matrix_at(g.format, 2 * g.inter, g.hidden, w.w13, w.w13_scale, w.w13_scale_2, e);
    const Matrix fused =
        detail::interleave_rows(detail::slice_rows(w13, 0, g.inter, "w13"),
                                detail::slice_rows(w13, g.inter, g.inter, "w13"), "w13");
    const Matrix w2 =
        detail::matrix_at(g.format, g.hidden, g.inter, w.w2, w.w2_scale, w.w2_scale_2, e);
    if (g.format == MOE_FORMAT_MXFP4) {
      HostTensor q = fused.q, d = w2.q, s = fused.scale, t = w2.scale;
      for (HostTensor* x : {&q, &d, &s, &t}) x->reinterpret(MOE_DTYPE_U8);
      gu.push_back(q), dq.push_back(d), gs.push_back(s), ds.push_back(t);
    } else {
      gu.push_back(transpose_bf16(fused.q));
      dq.push_back(transpose_bf16(w2.q));
    }
    if (!w.b13.empty()) {
      const auto b = bias_row(w.b13, e, 2 * g.inter), d = bias_row(w.b2, e, g.hidden);
      gb.push_back(interleave_vector(b.data(), b.data() + g.inter, g.inter));
      HostTensor d2(MOE_DTYPE_F32, {g.hidden});
      std::memcpy(d2.raw(), d.data(), d2.bytes());
      db.push_back(d2);
    }
  }
  if (g.format == MOE_FORMAT_MXFP4) {
    MOE_CHECK(g.hidden % kMxBlockSize == 0 && g.inter % kMxBlockSize == 0, MOE_STATUS_UNSUPPORTED,
              "gpt_oss MXFP4 stores whole 32-value blocks: hidden={} and intermediate={} must be "
              "multiples of 32",
              g.hidden, g.inter);
    HostTensor blocks = stack(gu), down = stack(dq);
    const int64_t kb = ceil_div(g.hidden, kMxBlockSize), ib = ceil_div(g.inter, kMxBlockSize);
    HostTensor b4(MOE_DTYPE_U8, {g.experts, 2 * g.inter, kb, 16}),
        d4(MOE_DTYPE_U8, {g.experts, g.hidden, ib, 16});
    std::memcpy(b4.raw(), blocks.raw(), b4.bytes());
    std::memcpy(d4.raw(), down.raw(), d4.bytes());
    out.push_back({p + "experts.gate_up_proj_blocks", b4});
    out.push_back({p + "experts.gate_up_proj_scales", stack(gs)});
    out.push_back({p + "experts.down_proj_blocks", d4});
    out.push_back({p + "experts.down_proj_scales", stack(ds)});
  } else {
    out.push_back({p + "experts.gate_up_proj", stack(gu)});
    out.push_back({p + "experts.down_proj", stack(dq)});
  }
  if (!gb.empty()) {
    out.push_back({p + "experts.gate_up_proj_bias", stack(gb)});
    out.push_back({p + "experts.down_proj_bias", stack(db)});
  }
}

void export_stacked(std::vector<NamedTensor>& out, const LayerWeights& w, const Layout& g,
                    const std::string& p, bool interleaved) {
  auto put = [&](const std::string& n, const HostTensor& t) {
    if (t.empty()) return;
    HostTensor c = t;
    if (c.dtype() == MOE_DTYPE_E2M1X2 || c.dtype() == MOE_DTYPE_UE8M0) c.reinterpret(MOE_DTYPE_U8);
    out.push_back({p + n, c});
  };
  HostTensor w13 = w.w13, w13_scale = w.w13_scale, b13 = w.b13;
  if (interleaved && g.gated) {
    std::vector<HostTensor> q, s;
    for (int64_t e = 0; e < g.experts; ++e) {
      const Matrix m =
          detail::matrix_at(g.format, 2 * g.inter, g.hidden, w.w13, w.w13_scale, w.w13_scale_2, e);
      const Matrix x =
          detail::interleave_rows(detail::slice_rows(m, 0, g.inter, "w13"),
                                  detail::slice_rows(m, g.inter, g.inter, "w13"), "w13");
      q.push_back(x.q);
      if (!x.scale.empty()) s.push_back(x.scale);
    }
    w13 = stack(q);
    if (!s.empty() && g.format != MOE_FORMAT_FP8_TENSOR) w13_scale = stack(s);
    if (!b13.empty()) {
      std::vector<HostTensor> b;
      for (int64_t e = 0; e < g.experts; ++e) {
        const auto row = bias_row(w.b13, e, 2 * g.inter);
        b.push_back(interleave_vector(row.data(), row.data() + g.inter, g.inter));
      }
      b13 = stack(b);
    }
  }
  put("w13", w13), put("w13_scale", w13_scale), put("w13_scale_2", w.w13_scale_2);
  put("w2", w.w2), put("w2_scale", w.w2_scale), put("w2_scale_2", w.w2_scale_2);
  put("b13", b13), put("b2", w.b2), put("a13_scale", w.a13_scale), put("a2_scale", w.a2_scale);
  put("shared_w13", w.shared_w13), put("shared_w13_scale", w.shared_w13_scale);
  put("shared_w13_scale_2", w.shared_w13_scale_2), put("shared_w2", w.shared_w2);
  put("shared_w2_scale", w.shared_w2_scale), put("shared_w2_scale_2", w.shared_w2_scale_2);
  put("sink_w13", w.sink_w13), put("sink_w2", w.sink_w2);
}

}  // namespace

std::vector<NamedTensor> export_layer(const LayerWeights& w, const moe_problem& p,
                                      const CheckpointSpec& spec, const HostTensor& router_weight,
                                      const HostTensor& routing_bias) {
  MOE_CHECK(p.ep_placement == MOE_EP_NONE && spec.tp_size == 1, MOE_STATUS_UNSUPPORTED,
            "export_layer writes whole layers: no EP placement, tp_size 1");
  const Layout g{static_cast<moe_format>(p.format), p.experts, p.intermediate, p.hidden,
                 is_gated(static_cast<moe_activation>(p.activation))};
  std::string prefix = substitute_layer(spec.prefix, spec.layer);
  if (!prefix.empty()) prefix += ".";
  MOE_CHECK(!(p.sink_experts > 0 && spec.convention != "stacked"), MOE_STATUS_UNSUPPORTED,
            "sink experts are written by the stacked convention only");
  MOE_CHECK(p.input_format != MOE_INPUT_FP8_TENSOR_STATIC || spec.convention == "stacked",
            MOE_STATUS_UNSUPPORTED, "static activation scales are written by stacked only");
  std::vector<NamedTensor> out;
  std::string router = "router.weight", selection = "routing_bias";
  if (spec.convention == "mixtral" || spec.convention == "deepseek" ||
      spec.convention == "qwen_moe") {
    MOE_CHECK(!p.expert_bias, MOE_STATUS_UNSUPPORTED, "{} has no expert biases", spec.convention);
    const bool mixtral = spec.convention == "mixtral";
    export_per_projection(out, w, g, prefix, mixtral ? "w1" : "gate_proj",
                          mixtral ? (g.gated ? "w3" : "w1") : "up_proj",
                          mixtral ? "w2" : "down_proj");
    if (p.shared_intermediate > 0) {
      MOE_CHECK(!mixtral, MOE_STATUS_UNSUPPORTED, "mixtral has no shared experts");
      Layout s = g;
      s.experts = 1, s.inter = p.shared_intermediate;
      LayerWeights one;
      one.w13 = w.shared_w13, one.w13_scale = w.shared_w13_scale,
      one.w13_scale_2 = w.shared_w13_scale_2;
      one.w2 = w.shared_w2, one.w2_scale = w.shared_w2_scale, one.w2_scale_2 = w.shared_w2_scale_2;
      std::vector<NamedTensor> shared;
      export_per_projection(shared, one, s, "", "gate_proj", "up_proj", "down_proj");
      const std::string to =
          prefix + (spec.convention == "deepseek" ? "shared_experts." : "shared_expert.");
      for (auto& t : shared)
        out.push_back({to + t.name.substr(std::string("experts.0.").size()), t.tensor});
    }
    router = "gate.weight";
    selection = "gate.e_score_correction_bias";
  } else if (spec.convention == "gpt_oss") {
    MOE_CHECK(p.shared_intermediate == 0, MOE_STATUS_UNSUPPORTED, "gpt_oss has no shared experts");
    export_gpt_oss(out, w, g, prefix);
  } else {
    export_stacked(out, w, g, prefix, spec.interleaved_gate_up);
  }
  if (!router_weight.empty()) out.push_back({prefix + router, router_weight});
  if (!routing_bias.empty()) out.push_back({prefix + selection, routing_bias});
  return out;
}

}  // namespace moe
