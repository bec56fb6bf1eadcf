// load_layer: experts at checkpoint size -> this TP rank's slab -> this EP rank's experts,
// stacked into canonical tensors; plus router, shared and sink experts.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "conventions.hpp"
#include "moe/sdk/block_scales.hpp"
#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/weights.hpp"

namespace moe {
namespace {

using detail::Expert;
using detail::Matrix;

// Rank r's slab of the intermediate dimension: gate/up rows, down columns, their biases.
Expert tp_slice(const Expert& x, const CheckpointSpec& spec, int64_t inter,
                const std::string& what) {
  if (spec.tp_size == 1) return x;
  const int64_t begin = spec.tp_rank * inter;
  Expert out;
  if (x.gate.rows) out.gate = detail::slice_rows(x.gate, begin, inter, what + " gate");
  out.up = detail::slice_rows(x.up, begin, inter, what + " up");
  out.down = detail::slice_cols(x.down, begin, inter, what + " down");
  auto slab = [&](const std::vector<float>& b) {
    return b.empty() ? b : std::vector<float>(b.begin() + begin, b.begin() + begin + inter);
  };
  out.b_gate = slab(x.b_gate);
  out.b_up = slab(x.b_up);
  // The down bias is added once after the TP reduction: rank 0 carries it.
  out.b_down = x.b_down;
  if (spec.tp_rank != 0) std::fill(out.b_down.begin(), out.b_down.end(), 0.0f);
  return out;
}

// A padding expert's down projection and biases; its [gate; up] is made whole by the caller.
Expert zero_expert(moe_format f, bool gated, bool biases, int64_t h, int64_t inter) {
  Expert x;
  x.down = detail::zero_matrix(f, h, inter);
  if (biases) {
    if (gated) x.b_gate.assign(inter, 0.0f);
    x.b_up.assign(inter, 0.0f);
    x.b_down.assign(h, 0.0f);
  }
  return x;
}

// What every convention's expert must hold before it is stored: finite values where weights are
// converted at load (the quantisers would carry a NaN into every scale of its block, or refuse it
// without naming the tensor), and scales a backend can take (a NaN, zero or negative f32 scale,
// the ue8m0 NaN code, a NaN or negative e4m3 block scale: a corrupt or misrouted tensor).
void check_expert(const Expert& x, const std::string& what) {
  for (const auto& [part, m] :
       {std::pair<const char*, const Matrix*>{"gate", &x.gate}, {"up", &x.up}, {"down", &x.down}}) {
    if (m->rows == 0) continue;
    if (detail::is_unquantised(*m)) {
      const float* v = m->q.data<float>();
      for (int64_t i = 0; i < m->q.numel(); ++i)
        MOE_CHECK(std::isfinite(v[i]), MOE_STATUS_INVALID_ARGUMENT,
                  "checkpoint {} {}: weight [{}, {}] is {}: weights converted at load must be "
                  "finite",
                  what, part, i / m->cols, i % m->cols, v[i]);
    } else if (!m->scale.empty()) {
      sdk::check_scale_values(m->scale.raw(), m->scale.dtype(), m->scale.numel(),
                              fmt::format("checkpoint {} {} scale", what, part));
    }
  }
}

// A bf16 matrix read as it is, as the unquantised f32 matrix its converted other half is.
Matrix as_unquantised(const Matrix& m) {
  return {MOE_FORMAT_BF16, m.rows, m.cols, detail::to_f32(m.q), {}, 1.0f};
}

// [gate; up] in the problem's format: halves converted at load are stacked first and quantised
// as the one canonical matrix (one fp8_tensor / nvfp4 global scale for both, as in §3.2).
Matrix w13_of(const Expert& x, moe_format format, const std::string& what) {
  if (!x.gate.rows) return detail::quantize_loaded(x.up, format);
  Matrix gate = x.gate, up = x.up;
  if (detail::is_unquantised(gate) != detail::is_unquantised(up)) {
    const Matrix& stored = detail::is_unquantised(gate) ? up : gate;
    MOE_CHECK(stored.format == MOE_FORMAT_BF16, MOE_STATUS_UNSUPPORTED,
              "{}: gate and up are stored differently, one in {}'s own dtype and the other as a "
              "dense float tensor converted at load; store both one way",
              what, format_name(format));
    (detail::is_unquantised(gate) ? up : gate) = as_unquantised(stored);
  }
  return detail::quantize_loaded(detail::stack_rows(gate, up, what), format);
}

std::vector<CheckpointConversion> summarize(const detail::Conversions& converted) {
  std::vector<CheckpointConversion> out;
  for (const auto& entry : converted) {
    const auto& change = entry.second;  // (from, to); a structured binding cannot be captured
                                        // by a lambda before C++20's clang 16
    auto it = std::find_if(out.begin(), out.end(), [&](const CheckpointConversion& c) {
      return c.from == change.first && c.to == change.second;
    });
    if (it == out.end()) it = out.insert(out.end(), {change.first, change.second, 0});
    ++it->tensors;
  }
  return out;
}

void store_bias(HostTensor& t, int64_t count, int64_t e, const std::vector<float>& a,
                const std::vector<float>& b) {
  const int64_t n = int64_t(a.size() + b.size());
  if (t.empty()) t = HostTensor(MOE_DTYPE_F32, {count, n});
  float* dst = t.data<float>() + e * n;
  std::copy(a.begin(), a.end(), dst);
  std::copy(b.begin(), b.end(), dst + a.size());
}

// Global id of local expert l under the problem's EP placement.
int64_t global_expert(const moe_problem& p, int64_t l) {
  if (!known_ep_placement(p.ep_placement))
    MOE_REFUSE(MOE_REASON_EP, "ep_placement={} is not one this build knows", p.ep_placement);
  switch (static_cast<moe_ep_placement>(p.ep_placement)) {
    case MOE_EP_NONE:
      return l;
    case MOE_EP_LINEAR:
      return p.local_expert_offset + l;
    case MOE_EP_ROUND_ROBIN:
      return l * p.ep_size + p.ep_rank;
  }
  return l;  // unreachable: every known placement returns above
}

void check_spec(const CheckpointSpec& spec) {
  MOE_CHECK(spec.tp_size >= 1 && spec.tp_rank >= 0 && spec.tp_rank < spec.tp_size,
            MOE_STATUS_CONFIG_ERROR, "tp_rank={} must be in [0, tp_size={})", spec.tp_rank,
            spec.tp_size);
}

}  // namespace

LayerCheckpoint load_layer(const Checkpoint& checkpoint, const CheckpointSpec& spec,
                           const moe_problem& p) {
  check_spec(spec);
  const auto source = detail::make_expert_source(checkpoint, spec, p);
  const auto format = static_cast<moe_format>(p.format);
  const bool gated = is_gated(static_cast<moe_activation>(p.activation));
  LayerCheckpoint out;
  out.real_experts = source->count_experts();
  const auto [hidden, inter] = source->checkpoint_sizes();
  MOE_CHECK(hidden == p.hidden, MOE_STATUS_SHAPE_MISMATCH,
            "the checkpoint's hidden size is {}, the problem's hidden: {}", hidden, p.hidden);
  MOE_CHECK(inter % spec.tp_size == 0, MOE_STATUS_SHAPE_MISMATCH,
            "tp_size={} does not divide the checkpoint's intermediate size {}", spec.tp_size,
            inter);
  MOE_CHECK(inter / spec.tp_size == p.intermediate, MOE_STATUS_SHAPE_MISMATCH,
            "the checkpoint's intermediate size {} / tp_size {} is {}, but the problem says "
            "intermediate: {}",
            inter, spec.tp_size, inter / spec.tp_size, p.intermediate);
  const int64_t ep = p.ep_placement == MOE_EP_NONE ? 1 : p.ep_size;
  const int64_t padded = ceil_div(out.real_experts, ep) * ep;
  // Groups are experts / num_groups wide: padding experts would widen every group and move its
  // bounds, so the layer would route otherwise than the model (docs/design.md §4).
  MOE_CHECK(p.routing != MOE_ROUTING_GROUPED_TOPK || padded == out.real_experts,
            MOE_STATUS_CONFIG_ERROR,
            "grouped_topk routing cannot take padding experts: the checkpoint's {} experts are not "
            "a multiple of ep_size={}, and padding them to {} would regroup them {} a group "
            "instead of {}; choose an ep_size that divides {}",
            out.real_experts, ep, padded, p.num_groups > 0 ? padded / p.num_groups : 0,
            p.num_groups > 0 ? out.real_experts / p.num_groups : 0, out.real_experts);
  MOE_CHECK(p.experts == padded, MOE_STATUS_SHAPE_MISMATCH,
            "the checkpoint has {} experts{}: the problem needs experts: {}", out.real_experts,
            ep > 1 ? fmt::format(", padded to a multiple of ep_size={}", ep) : "", padded);

  LayerWeights& w = out.weights;
  for (int64_t l = 0; l < p.local_experts; ++l) {
    const int64_t g = global_expert(p, l);
    const std::string what = fmt::format("expert {}", g);
    const Expert x = g < out.real_experts
                         ? tp_slice(source->expert(g), spec, p.intermediate, what)
                         : zero_expert(format, gated, p.expert_bias, p.hidden, p.intermediate);
    check_expert(x, what);
    // A padding expert's [gate; up] is made whole: stacking its halves would ask of fp8_block
    // what only a stored checkpoint must meet (whole 128-row blocks in the gate), and a dense
    // checkpoint quantised at load has no such limit (docs/design.md §3.4).
    const Matrix w13 =
        g < out.real_experts
            ? w13_of(x, format, what)
            : detail::zero_matrix(format, (gated ? 2 : 1) * p.intermediate, p.hidden);
    detail::store(w13, l, p.local_experts, w.w13, w.w13_scale, w.w13_scale_2);
    detail::store(detail::quantize_loaded(x.down, format), l, p.local_experts, w.w2, w.w2_scale,
                  w.w2_scale_2);
    if (p.expert_bias) {
      MOE_CHECK(!x.b_up.empty(), MOE_STATUS_NOT_FOUND,
                "problem has expert_bias: true, but the checkpoint has no expert biases ({})",
                spec.convention);
      store_bias(w.b13, p.local_experts, l, x.b_gate, x.b_up);
      store_bias(w.b2, p.local_experts, l, x.b_down, {});
    }
  }
  if (auto shared = source->shared(p.shared_intermediate * spec.tp_size)) {
    const Expert x = tp_slice(*shared, spec, p.shared_intermediate, "shared expert");
    check_expert(x, "shared expert");
    detail::store(w13_of(x, format, "shared expert"), -1, 0, w.shared_w13, w.shared_w13_scale,
                  w.shared_w13_scale_2);
    detail::store(detail::quantize_loaded(x.down, format), -1, 0, w.shared_w2, w.shared_w2_scale,
                  w.shared_w2_scale_2);
  }
  if (p.sink_experts > 0)
    source->sinks(w);
  else
    source->check_no_sinks();
  if (p.input_format == MOE_INPUT_FP8_TENSOR_STATIC) {
    const auto [a13, a2] = source->activation_scales(out.real_experts);
    MOE_CHECK(std::isfinite(a13) && a13 > 0 && std::isfinite(a2) && a2 > 0,
              MOE_STATUS_INVALID_ARGUMENT,
              "the checkpoint's static activation scales are a13={} and a2={}: each must be "
              "finite and > 0 ({})",
              a13, a2, spec.convention);
    w.a13_scale = HostTensor(MOE_DTYPE_F32, {1});
    w.a13_scale.data<float>()[0] = a13;
    w.a2_scale = HostTensor(MOE_DTYPE_F32, {1});
    w.a2_scale.data<float>()[0] = a2;
  }
  source->router(out, out.real_experts);
  check_weights(p, w.view());
  out.conversions = summarize(source->conversions());
  if (!out.conversions.empty())
    spdlog::info("checkpoint {}: converted at load: {}", checkpoint.path(),
                 describe_conversions(out.conversions));
  return out;
}

std::vector<CheckpointConversion> preview_conversions(const Checkpoint& checkpoint,
                                                      const CheckpointSpec& spec,
                                                      const moe_problem& p) {
  check_spec(spec);
  const auto source = detail::make_expert_source(checkpoint, spec, p);
  if (source->count_experts() > 0) source->expert(0);
  source->shared(p.shared_intermediate * spec.tp_size);
  LayerWeights sinks;
  if (p.sink_experts > 0) source->sinks(sinks);
  return summarize(source->conversions());
}

std::string describe_conversions(const std::vector<CheckpointConversion>& conversions,
                                 bool counts) {
  std::vector<std::string> parts;
  for (const auto& c : conversions)
    parts.push_back(fmt::format(
        "{} -> {} ({})",
        counts ? fmt::format("{} {} tensor{}", c.tensors, c.from, c.tensors == 1 ? "" : "s")
               : c.from + " expert weights",
        c.to, c.to == "bf16" ? "rounded to nearest even" : "quantised, docs/design.md §3.2"));
  return fmt::format("{}", fmt::join(parts, "; "));
}

float input_scale_from_amax(float amax, const std::string& tensor) {
  MOE_CHECK(std::isfinite(amax) && amax > 0, MOE_STATUS_INVALID_ARGUMENT,
            "checkpoint tensor '{}' is {}: an activation amax must be finite and > 0", tensor,
            amax);
  return static_cast<float>(double(amax) / (448.0 * 6.0));
}

void fold_nvfp4_up_scales(uint8_t* up_scales, int64_t count, float gate_s2, float up_s2,
                          const std::string& where) {
  MOE_CHECK(gate_s2 > 0 && up_s2 > 0 && std::isfinite(gate_s2) && std::isfinite(up_s2),
            MOE_STATUS_INVALID_ARGUMENT,
            "{}: NVFP4 weight_scale_2 of gate ({}) and up ({}) must be finite and > 0 (a missing "
            "or misrouted tensor?)",
            where, gate_s2, up_s2);
  std::vector<uint8_t> folded(up_scales, up_scales + count);
  for (int64_t i = 0; i < count; ++i) {
    const double value = e4m3_to_double(up_scales[i]) * double(up_s2);  // exact in double
    const uint8_t code = e4m3_from_double(value / double(gate_s2));
    MOE_CHECK(e4m3_to_double(code) * double(gate_s2) == value, MOE_STATUS_UNSUPPORTED,
              "{}: cannot fold the up half's NVFP4 weight_scale_2 ({}) into the gate's ({}) "
              "exactly: block scale {} x {} / {} is not an e4m3 value. Requantise the "
              "checkpoint with one weight_scale_2 for gate and up",
              where, up_s2, gate_s2, e4m3_to_double(up_scales[i]), up_s2, gate_s2);
    folded[i] = code;
  }
  std::copy(folded.begin(), folded.end(), up_scales);
}

}  // namespace moe
