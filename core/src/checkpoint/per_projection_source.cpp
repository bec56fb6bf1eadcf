#include "per_projection_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/weights.hpp"
#include "writer_util.hpp"

namespace moe::detail {

int64_t PerProjectionSource::count_experts() const {
  int64_t e = 0;
  while (has_tensor(ctx_, name(fmt::format("experts.{}.{}.weight", e, names_.down)))) ++e;
  MOE_CHECK(e > 0, MOE_STATUS_NOT_FOUND, "checkpoint has no tensor '{}' ({})",
            name(fmt::format("experts.0.{}.weight", names_.down)), ctx_.describe);
  // Experts 0 .. e-1 have their down projection; a tensor of a later expert means a gap (a
  // shard left out of the index, say), which would load as fewer experts and lose the rest.
  const std::string start = name("experts.");
  for (const std::string& n : ctx_.checkpoint.names(start)) {
    int64_t index = -1;
    const char* digits = n.c_str() + start.size();
    const auto [end, ec] = std::from_chars(digits, n.c_str() + n.size(), index);
    if (ec != std::errc() || *end != '.' || index < e) continue;
    MOE_FAIL(MOE_STATUS_NOT_FOUND,
             "checkpoint tensor '{}' is missing: experts 0-{} have one, and '{}' belongs to "
             "expert {} after the gap ({})",
             name(fmt::format("experts.{}.{}.weight", e, names_.down)), e - 1, n, index,
             ctx_.describe);
  }
  return e;
}

std::pair<int64_t, int64_t> PerProjectionSource::checkpoint_sizes() const {
  const std::string down = fmt::format("experts.0.{}.weight", names_.down);
  const auto& s = shape_of(down, 2);
  // The dtype first: a checkpoint of another format has sizes that read as the wrong ones.
  check_weight_dtype(ctx_, name(down), format_);
  const bool packed =
      is_fp4(format_) && !converted_at_load(ctx_.checkpoint.find(name(down))->dtype, format_);
  return {s[0], packed ? 2 * s[1] : s[1]};
}

Expert PerProjectionSource::expert(int64_t e) const {
  return read_expert(name(fmt::format("experts.{}.", e)), names_, full_i_);
}

std::pair<float, float> PerProjectionSource::activation_scales(int64_t experts) const {
  float a13 = 0, a2 = 0;
  for (int64_t e = 0; e < experts; ++e) {
    const std::string base = name(fmt::format("experts.{}.", e));
    if (gated_) a13 = std::max(a13, input_scale(base + names_.gate));
    a13 = std::max(a13, input_scale(base + names_.up));
    a2 = std::max(a2, input_scale(base + names_.down));
  }
  return {a13, a2};
}

SourceBase::RouterNames PerProjectionSource::router_names() const {
  return {kRouterWeight, false, nullptr, kSelectionBias};
}

Expert PerProjectionSource::read_expert(const std::string& base, const Projections& names,
                                        int64_t inter) const {
  Expert x;
  if (gated_) x.gate = read_projection(ctx_, base + names.gate, format_, inter, p_.hidden);
  x.up = read_projection(ctx_, base + names.up, format_, inter, p_.hidden);
  x.down = read_projection(ctx_, base + names.down, format_, p_.hidden, inter);
  return x;
}

float PerProjectionSource::input_scale(const std::string& base) const {
  const std::string s = base + ".input_scale", a = base + ".input_amax";
  // input_scale is amax / 448 in fp8 checkpoints and amax / (448 * 6) in nvfp4 ones; the
  // activations here are e4m3, whose static scale is amax / 448.
  const float fp4_to_e4m3 = format_ == MOE_FORMAT_NVFP4 ? 6.0f : 1.0f;
  if (has_tensor(ctx_, s)) {
    const float v = read_scalar_f32(ctx_, s);
    // Checked one by one: the layer's scale is the experts' largest, which would hide a NaN or a
    // negative one (a corrupt tensor). Zero is an expert calibration never reached (some exports
    // leave it so); the largest must still be > 0 (load_layer).
    MOE_CHECK(std::isfinite(v) && v >= 0, MOE_STATUS_INVALID_ARGUMENT,
              "checkpoint tensor '{}' is {}: a static input scale must be finite and >= 0", s, v);
    return v * fp4_to_e4m3;
  }
  MOE_CHECK(has_tensor(ctx_, a), MOE_STATUS_NOT_FOUND,
            "checkpoint tensors '{}' and '{}' are both missing: fp8_tensor_static activations "
            "need one of them ({})",
            s, a, ctx_.describe);
  return input_scale_from_amax(read_scalar_f32(ctx_, a), a) * 6.0f;
}

namespace {

int64_t w13_rows(const Layout& g) {
  return g.gated ? 2 * g.inter : g.inter;
}

// One expert's w13 [rows, H] and down [H, I] as `base`{gate, up, down}; without a gate, w13 is
// the one up projection.
void put_expert(std::vector<NamedTensor>& out, const std::string& base,
                const PerProjectionSource::Projections& names, const Layout& g, const Matrix& w13,
                const Matrix& down) {
  if (g.gated) {
    put_projection(out, base + names.gate, slice_rows(w13, 0, g.inter, "w13"));
    put_projection(out, base + names.up, slice_rows(w13, g.inter, g.inter, "w13"));
  } else {
    put_projection(out, base + names.up, w13);
  }
  put_projection(out, base + names.down, down);
}

}  // namespace

void write_per_projection(const ExportedLayer& l, std::vector<NamedTensor>& out,
                          const PerProjectionSource::Projections& names, const char* shared) {
  const LayerWeights& w = l.w;
  MOE_CHECK(!l.p.expert_bias, MOE_STATUS_UNSUPPORTED, "{} has no expert biases", l.spec.convention);
  Layout g = layout_of(l.p);
  for (int64_t e = 0; e < g.experts; ++e)
    put_expert(out, fmt::format("{}experts.{}.", l.prefix, e), names, g,
               matrix_at(g.format, w13_rows(g), g.hidden, w.w13, w.w13_scale, w.w13_scale_2, e),
               matrix_at(g.format, g.hidden, g.inter, w.w2, w.w2_scale, w.w2_scale_2, e));
  if (l.p.shared_intermediate == 0) return;
  MOE_CHECK(shared != nullptr, MOE_STATUS_UNSUPPORTED, "{} has no shared experts",
            l.spec.convention);
  g.inter = l.p.shared_intermediate;  // the shared expert: unstacked tensors (index -1)
  put_expert(out, l.prefix + shared, names, g,
             matrix_at(g.format, w13_rows(g), g.hidden, w.shared_w13, w.shared_w13_scale,
                       w.shared_w13_scale_2, -1),
             matrix_at(g.format, g.hidden, g.inter, w.shared_w2, w.shared_w2_scale,
                       w.shared_w2_scale_2, -1));
}

}  // namespace moe::detail
