// The conventions' tensor names (see checkpoint.hpp) read into experts at checkpoint size.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "conventions.hpp"
#include "moe/checkpoint.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/weights.hpp"

namespace moe::detail {
namespace {

enum class Convention { kMixtral, kDeepseek, kQwenMoe, kGptOss, kStacked };

Convention parse_convention(const std::string& s) {
  if (s == "mixtral") return Convention::kMixtral;
  if (s == "deepseek") return Convention::kDeepseek;
  if (s == "qwen_moe") return Convention::kQwenMoe;
  if (s == "gpt_oss") return Convention::kGptOss;
  if (s == "stacked") return Convention::kStacked;
  MOE_FAIL(MOE_STATUS_CONFIG_ERROR,
           "checkpoint convention '{}' is not one of mixtral, deepseek, "
           "qwen_moe, gpt_oss, stacked",
           s);
}

std::string substitute(std::string pattern, const std::string& key, const std::string& value) {
  for (size_t at = pattern.find(key); at != std::string::npos; at = pattern.find(key, at))
    pattern.replace(at, key.size(), value);
  return pattern;
}

std::vector<float> to_floats(const HostTensor& t) {
  std::vector<float> out(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i)
    out[i] = t.dtype() == MOE_DTYPE_F32 ? t.data<float>()[i] : bf16_to_float(t.data<uint16_t>()[i]);
  return out;
}

class Loader final : public ExpertSource {
 public:
  Loader(const Checkpoint& ck, const CheckpointSpec& spec, const moe_problem& p)
      : conv_(parse_convention(spec.convention)),
        prefix_(substitute(spec.prefix, "{layer}", std::to_string(spec.layer))),
        ctx_{ck, fmt::format("convention {}, prefix '{}', layer {}", spec.convention, spec.prefix,
                             spec.layer)},
        spec_(spec),
        p_(p),
        format_(static_cast<moe_format>(p.format)),
        gated_(is_gated(static_cast<moe_activation>(p.activation))),
        full_i_(p.intermediate * spec.tp_size) {}

  const NameContext& ctx() const { return ctx_; }
  std::string name(const std::string& suffix) const {
    return prefix_.empty() ? suffix : prefix_ + "." + suffix;
  }
  int64_t full_intermediate() const { return full_i_; }

  int64_t count_experts() const override {
    if (conv_ == Convention::kGptOss)
      return leading_dim(format_ == MOE_FORMAT_MXFP4 ? "experts.down_proj_blocks"
                                                     : "experts.down_proj");
    if (conv_ == Convention::kStacked) return leading_dim("w2");
    int64_t e = 0;
    while (has_tensor(ctx_, name(fmt::format("experts.{}.{}.weight", e, down_name())))) ++e;
    MOE_CHECK(e > 0, MOE_STATUS_NOT_FOUND, "checkpoint has no tensor '{}' ({})",
              name(fmt::format("experts.0.{}.weight", down_name())), ctx_.describe);
    return e;
  }

  std::pair<int64_t, int64_t> checkpoint_sizes() const override {
    const bool fp4 = is_fp4(format_);
    std::string n;
    if (conv_ == Convention::kGptOss)
      n = fp4 ? "experts.down_proj_blocks" : "experts.down_proj";
    else if (conv_ == Convention::kStacked)
      n = "w2";
    else
      n = fmt::format("experts.0.{}.weight", down_name());
    const auto* e = ctx_.checkpoint.find(name(n));
    MOE_CHECK(e != nullptr, MOE_STATUS_NOT_FOUND, "checkpoint tensor '{}' is missing ({})", name(n),
              ctx_.describe);
    const auto& s = e->shape;
    const size_t want = conv_ == Convention::kGptOss    ? (fp4 ? 4 : 3)
                        : conv_ == Convention::kStacked ? 3
                                                        : 2;
    MOE_CHECK(s.size() == want, MOE_STATUS_SHAPE_MISMATCH,
              "checkpoint tensor '{}' has {} dimensions, expected {} ({})", name(n), s.size(), want,
              ctx_.describe);
    if (conv_ == Convention::kGptOss)
      return fp4 ? std::pair(s[1], s[2] * kMxBlockSize) : std::pair(s[2], s[1]);
    return {s[want - 2], fp4 ? 2 * s[want - 1] : s[want - 1]};
  }

  Expert expert(int64_t e) const override {
    switch (conv_) {
      case Convention::kGptOss:
        return gpt_oss_expert(e);
      case Convention::kStacked:
        return stacked_expert(e);
      default:
        break;
    }
    const std::string base = name(fmt::format("experts.{}.", e));
    return per_projection(base, gate_name(), up_name(), down_name(), full_i_);
  }

  std::optional<Expert> shared(int64_t full) const override {
    if (full == 0) return std::nullopt;
    switch (conv_) {
      case Convention::kDeepseek:
        return per_projection(name("shared_experts."), "gate_proj", "up_proj", "down_proj", full);
      case Convention::kQwenMoe:
        MOE_CHECK(!has_tensor(ctx_, name("shared_expert_gate.weight")), MOE_STATUS_UNSUPPORTED,
                  "'{}' gates the shared expert per token with a sigmoid, which the ABI's weight-1 "
                  "shared expert does not express",
                  name("shared_expert_gate.weight"));
        return per_projection(name("shared_expert."), "gate_proj", "up_proj", "down_proj", full);
      case Convention::kStacked:
        return stacked_shared(full);
      default:
        MOE_FAIL(MOE_STATUS_UNSUPPORTED, "convention {} has no shared experts", spec_.convention);
    }
  }

  // Static activation scales (fp8_tensor_static): max over experts, as serving engines do.
  std::pair<float, float> activation_scales(int64_t experts) const override {
    if (conv_ == Convention::kStacked)
      return {read_scalar_f32(ctx_, name("a13_scale")), read_scalar_f32(ctx_, name("a2_scale"))};
    MOE_CHECK(conv_ != Convention::kGptOss, MOE_STATUS_UNSUPPORTED,
              "gpt_oss checkpoints carry no static activation scales");
    float a13 = 0, a2 = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const std::string base = name(fmt::format("experts.{}.", e));
      if (gated_) a13 = std::max(a13, input_scale(base + gate_name()));
      a13 = std::max(a13, input_scale(base + up_name()));
      a2 = std::max(a2, input_scale(base + down_name()));
    }
    return {a13, a2};
  }

  void router(LayerCheckpoint& out, int64_t real_experts) const override {
    const bool gpt = conv_ == Convention::kGptOss;
    const std::string weight =
        name(conv_ == Convention::kMixtral || conv_ == Convention::kDeepseek ||
                     conv_ == Convention::kQwenMoe
                 ? "gate.weight"
                 : "router.weight");
    const int64_t rows = real_experts + p_.sink_experts;
    if (has_tensor(ctx_, weight)) {
      const auto* e = ctx_.checkpoint.find(weight);
      out.router_weight =
          read_tensor(ctx_, weight, e->dtype == MOE_DTYPE_F32 ? MOE_DTYPE_F32 : MOE_DTYPE_BF16,
                      {rows, p_.hidden});
    } else {
      MOE_CHECK(!gpt, MOE_STATUS_NOT_FOUND, "checkpoint tensor '{}' is missing ({})", weight,
                ctx_.describe);
    }
    const std::string bias = name("router.bias");
    if ((gpt || conv_ == Convention::kStacked) && has_tensor(ctx_, bias))
      out.router_bias = f32_vector(bias, rows);
    const std::string sel =
        name(conv_ == Convention::kStacked ? "routing_bias" : "gate.e_score_correction_bias");
    const bool has_sel = has_tensor(ctx_, sel);
    MOE_CHECK(!has_sel || p_.routing_bias, MOE_STATUS_INVALID_ARGUMENT,
              "checkpoint has a selection bias '{}': set routing_bias: true", sel);
    MOE_CHECK(has_sel || !p_.routing_bias, MOE_STATUS_NOT_FOUND,
              "problem has routing_bias: true, but checkpoint tensor '{}' is missing ({})", sel,
              ctx_.describe);
    if (has_sel) {
      const HostTensor b = f32_vector(sel, real_experts);
      out.routing_bias = HostTensor(MOE_DTYPE_F32, {p_.experts});
      for (int64_t i = 0; i < p_.experts; ++i)
        out.routing_bias.data<float>()[i] =
            i < real_experts ? b.data<float>()[i] : -std::numeric_limits<float>::infinity();
    }
  }

  void sinks(LayerWeights& w) const override {
    MOE_CHECK(conv_ == Convention::kStacked, MOE_STATUS_UNSUPPORTED,
              "sink experts are read from the stacked convention only ({})", ctx_.describe);
    const int64_t s = p_.sink_experts, is = p_.sink_intermediate;
    w.sink_w13 = read_tensor(ctx_, name("sink_w13"), MOE_DTYPE_BF16, {s, 2 * is, p_.hidden});
    w.sink_w2 = read_tensor(ctx_, name("sink_w2"), MOE_DTYPE_BF16, {s, p_.hidden, is});
  }

 private:
  const char* gate_name() const { return conv_ == Convention::kMixtral ? "w1" : "gate_proj"; }
  const char* up_name() const {
    if (conv_ == Convention::kMixtral) return gated_ ? "w3" : "w1";
    return "up_proj";
  }
  const char* down_name() const { return conv_ == Convention::kMixtral ? "w2" : "down_proj"; }

  int64_t leading_dim(const std::string& suffix) const {
    const auto* e = ctx_.checkpoint.find(name(suffix));
    MOE_CHECK(e != nullptr, MOE_STATUS_NOT_FOUND, "checkpoint tensor '{}' is missing ({})",
              name(suffix), ctx_.describe);
    MOE_CHECK(!e->shape.empty(), MOE_STATUS_SHAPE_MISMATCH, "'{}' has no expert dimension",
              name(suffix));
    return e->shape[0];
  }

  HostTensor f32_vector(const std::string& n, int64_t count) const {
    const auto* e = ctx_.checkpoint.find(n);
    HostTensor t = read_tensor(
        ctx_, n, e && e->dtype == MOE_DTYPE_BF16 ? MOE_DTYPE_BF16 : MOE_DTYPE_F32, {count});
    HostTensor f(MOE_DTYPE_F32, {count});
    const auto v = to_floats(t);
    std::memcpy(f.raw(), v.data(), f.bytes());
    return f;
  }

  float input_scale(const std::string& base) const {
    const std::string s = base + ".input_scale", a = base + ".input_amax";
    // input_scale is amax / 448 in fp8 checkpoints and amax / (448 * 6) in nvfp4 ones; the
    // activations here are e4m3, whose static scale is amax / 448.
    const float fp4_to_e4m3 = format_ == MOE_FORMAT_NVFP4 ? 6.0f : 1.0f;
    if (has_tensor(ctx_, s)) return read_scalar_f32(ctx_, s) * fp4_to_e4m3;
    return input_scale_from_amax(read_scalar_f32(ctx_, a), a) * 6.0f;
  }

  Expert per_projection(const std::string& base, const char* gate, const char* up, const char* down,
                        int64_t inter) const {
    Expert x;
    if (gated_) x.gate = read_projection(ctx_, base + gate, format_, inter, p_.hidden);
    x.up = read_projection(ctx_, base + up, format_, inter, p_.hidden);
    x.down = read_projection(ctx_, base + down, format_, p_.hidden, inter);
    return x;
  }

  const HostTensor& cached(const std::string& n, moe_dtype dtype, std::vector<int64_t> shape,
                           moe_dtype alt = MOE_DTYPE_INVALID) const {
    auto it = cache_.find(n);
    if (it == cache_.end()) it = cache_.emplace(n, read_tensor(ctx_, n, dtype, shape, alt)).first;
    return it->second;
  }

  // Matrix `e` of a stacked [E, rows, cols] tensor as a [rows, cols] HostTensor.
  static HostTensor slot(const HostTensor& stack, int64_t e, std::vector<int64_t> shape) {
    HostTensor out(stack.dtype(), shape);
    std::memcpy(out.raw(), static_cast<const uint8_t*>(stack.raw()) + e * out.bytes(), out.bytes());
    return out;
  }

  Expert gpt_oss_expert(int64_t e) const {
    MOE_CHECK(gated_, MOE_STATUS_UNSUPPORTED, "gpt_oss experts are gated");
    const int64_t E = count_experts(), h = p_.hidden, i = full_i_;
    Matrix fused, down;
    if (format_ == MOE_FORMAT_MXFP4) {
      MOE_CHECK(h % kMxBlockSize == 0 && i % kMxBlockSize == 0, MOE_STATUS_SHAPE_MISMATCH,
                "gpt_oss MXFP4 stores whole 32-value blocks: hidden={} and intermediate={} must "
                "be multiples of 32",
                h, i);
      const int64_t kb = h / kMxBlockSize, ib = i / kMxBlockSize;
      const auto& gu =
          cached(name("experts.gate_up_proj_blocks"), MOE_DTYPE_U8, {E, 2 * i, kb, 16});
      const auto& gs = cached(name("experts.gate_up_proj_scales"), MOE_DTYPE_U8, {E, 2 * i, kb});
      const auto& dq = cached(name("experts.down_proj_blocks"), MOE_DTYPE_U8, {E, h, ib, 16});
      const auto& ds = cached(name("experts.down_proj_scales"), MOE_DTYPE_U8, {E, h, ib});
      fused = {MOE_FORMAT_MXFP4,         2 * i, h, slot(gu, e, {2 * i, h / 2}),
               slot(gs, e, {2 * i, kb}), 1.0f};
      down = {MOE_FORMAT_MXFP4, h, i, slot(dq, e, {h, i / 2}), slot(ds, e, {h, ib}), 1.0f};
      for (Matrix* m : {&fused, &down}) {
        m->q.reinterpret(MOE_DTYPE_E2M1X2);
        m->scale.reinterpret(MOE_DTYPE_UE8M0);
      }
    } else {
      MOE_CHECK(format_ == MOE_FORMAT_BF16, MOE_STATUS_UNSUPPORTED,
                "gpt_oss checkpoints are bf16 or mxfp4, not {}", format_name(format_));
      // Stored [in, out]: transpose to the canonical [out, in] (K contiguous).
      const auto& gu = cached(name("experts.gate_up_proj"), MOE_DTYPE_BF16, {E, h, 2 * i});
      const auto& dn = cached(name("experts.down_proj"), MOE_DTYPE_BF16, {E, i, h});
      fused = {MOE_FORMAT_BF16, 2 * i, h, transpose_bf16(gu, e, h, 2 * i), {}, 1.0f};
      down = {MOE_FORMAT_BF16, h, i, transpose_bf16(dn, e, i, h), {}, 1.0f};
    }
    Expert x;
    std::tie(x.gate, x.up) = deinterleave_rows(fused, name("experts.gate_up_proj"));
    x.down = std::move(down);
    const std::string gb = name("experts.gate_up_proj_bias"), db = name("experts.down_proj_bias");
    if (p_.expert_bias) {
      const auto b =
          to_floats(slot(cached(gb, MOE_DTYPE_BF16, {E, 2 * i}, MOE_DTYPE_F32), e, {2 * i}));
      for (int64_t r = 0; r < i; ++r) {
        x.b_gate.push_back(b[2 * r]);
        x.b_up.push_back(b[2 * r + 1]);
      }
      x.b_down = to_floats(slot(cached(db, MOE_DTYPE_BF16, {E, h}, MOE_DTYPE_F32), e, {h}));
    } else {
      MOE_CHECK(!has_tensor(ctx_, gb), MOE_STATUS_INVALID_ARGUMENT,
                "checkpoint has expert biases ('{}'): set expert_bias: true", gb);
    }
    return x;
  }

  static HostTensor transpose_bf16(const HostTensor& stack, int64_t e, int64_t rows, int64_t cols) {
    HostTensor out(MOE_DTYPE_BF16, {cols, rows});
    const uint16_t* src = stack.data<uint16_t>() + e * rows * cols;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) out.data<uint16_t>()[c * rows + r] = src[r * cols + c];
    return out;
  }

  // A stacked matrix: names `q` / `q`_scale / `q`_scale_2, slot e (-1: not stacked).
  Matrix stacked_matrix(const std::string& q, int64_t e, int64_t experts, int64_t rows,
                        int64_t cols) const {
    const MatrixLayout l = matrix_layout(format_, rows, cols);
    const bool packed = l.dtype == MOE_DTYPE_E2M1X2;
    auto dims = [&](std::vector<int64_t> d) {
      if (e >= 0) d.insert(d.begin(), experts);
      return d;
    };
    const int64_t at = e >= 0 ? e : 0;
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
    if (l.has_scale_2)
      m.scale_2 =
          cached(name(q + "_scale_2"), MOE_DTYPE_F32, {e >= 0 ? experts : 1}).data<float>()[at];
    return m;
  }

  // Scales of a stack; Quark MXFP4 stores them flat as [E * rows, cols]: restore E.
  const HostTensor& scale_stack(const std::string& n, moe_dtype raw, moe_dtype alt, int64_t experts,
                                const MatrixLayout& l) const {
    const auto* entry = ctx_.checkpoint.find(n);
    if (experts > 0 && entry && entry->shape.size() == 2) {
      const int64_t flat = entry->shape[0];
      MOE_CHECK(flat % experts == 0, MOE_STATUS_SHAPE_MISMATCH,
                "checkpoint tensor '{}' stores scales flat as [{}, {}]: {} rows are not divisible "
                "by the {} experts",
                n, flat, entry->shape[1], flat, experts);
      const HostTensor& t = cached(n, raw, {flat, l.scale_cols}, alt);
      MOE_CHECK(flat / experts == l.scale_rows, MOE_STATUS_SHAPE_MISMATCH,
                "checkpoint tensor '{}' [{}, {}] holds {} rows per expert, expected {}", n, flat,
                entry->shape[1], flat / experts, l.scale_rows);
      return t;
    }
    std::vector<int64_t> d = {l.scale_rows, l.scale_cols};
    if (experts > 0) d.insert(d.begin(), experts);
    return cached(n, raw, d, alt);
  }

  Expert split_w13(Matrix w13, Matrix down) const {
    Expert x;
    if (!gated_) {
      x.up = std::move(w13);
    } else if (spec_.interleaved_gate_up) {
      std::tie(x.gate, x.up) = deinterleave_rows(w13, name("w13"));
    } else {
      x.gate = slice_rows(w13, 0, w13.rows / 2, name("w13"));
      x.up = slice_rows(w13, w13.rows / 2, w13.rows / 2, name("w13"));
    }
    x.down = std::move(down);
    return x;
  }

  Expert stacked_expert(int64_t e) const {
    const int64_t E = count_experts(), r13 = gated_ ? 2 * full_i_ : full_i_;
    Expert x = split_w13(stacked_matrix("w13", e, E, r13, p_.hidden),
                         stacked_matrix("w2", e, E, p_.hidden, full_i_));
    if (p_.expert_bias) {
      const auto b13 =
          to_floats(slot(cached(name("b13"), MOE_DTYPE_F32, {E, r13}, MOE_DTYPE_BF16), e, {r13}));
      const int64_t half = gated_ ? full_i_ : 0;
      for (int64_t r = 0; r < full_i_; ++r) {
        const int64_t g = spec_.interleaved_gate_up ? 2 * r : r;
        const int64_t u = spec_.interleaved_gate_up ? 2 * r + 1 : half + r;
        if (gated_) x.b_gate.push_back(b13[g]);
        x.b_up.push_back(b13[gated_ ? u : r]);
      }
      x.b_down = to_floats(
          slot(cached(name("b2"), MOE_DTYPE_F32, {E, p_.hidden}, MOE_DTYPE_BF16), e, {p_.hidden}));
    }
    return x;
  }

  Expert stacked_shared(int64_t full) const {
    const int64_t rows = gated_ ? 2 * full : full;
    return split_w13(stacked_matrix("shared_w13", -1, 0, rows, p_.hidden),
                     stacked_matrix("shared_w2", -1, 0, p_.hidden, full));
  }

  Convention conv_;
  std::string prefix_;
  NameContext ctx_;
  const CheckpointSpec& spec_;
  const moe_problem& p_;
  moe_format format_;
  bool gated_;
  int64_t full_i_;
  mutable std::map<std::string, HostTensor> cache_;
};

}  // namespace

std::unique_ptr<ExpertSource> make_expert_source(const Checkpoint& checkpoint,
                                                 const CheckpointSpec& spec,
                                                 const moe_problem& problem) {
  return std::make_unique<Loader>(checkpoint, spec, problem);
}

}  // namespace moe::detail
