#include "reference_layer.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "activations.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/parallel_for.hpp"
#include "moe/sdk/struct_io.hpp"
#include "moe/sdk/tensor_checks.hpp"
#include "moe/sdk/weights.hpp"

namespace moe::reference {
namespace {

// Replaces rows [n, cols] by their quantised value, as the problem's input_format says.
void quantize_rows(moe_input_format f, double* rows, int64_t n, int64_t cols, float static_scale) {
  switch (f) {
    case MOE_INPUT_BF16:
      return;
    case MOE_INPUT_FP8_TENSOR_DYNAMIC: {
      double amax = 0;
      for (int64_t i = 0; i < n * cols; ++i) amax = std::max(amax, std::abs(rows[i]));
      fake_quant_fp8(rows, n * cols, fp8_scale_from_amax(amax));
      return;
    }
    case MOE_INPUT_FP8_TENSOR_STATIC:
      fake_quant_fp8(rows, n * cols, static_scale);
      return;
    case MOE_INPUT_FP8_1X128:
      for (int64_t r = 0; r < n; ++r) fake_quant_fp8_1x128(rows + r * cols, cols);
      return;
    case MOE_INPUT_MXFP8:
      for (int64_t r = 0; r < n; ++r) fake_quant_mxfp8(rows + r * cols, cols);
      return;
    case MOE_INPUT_DEFAULT:
      MOE_FAIL(MOE_STATUS_INVALID_ARGUMENT, "input_format={} is not resolved", int(f));
  }
  MOE_REFUSE(MOE_REASON_INPUT_FORMAT, "input_format={} is not one this build knows", int(f));
}

// inter[rows[i]] = activation(W13 x[tokens[i]] + b13) for each listed token.
void mlp_up(const ExpertGemms& gemms, MlpId id, const moe_problem& p, const double* x,
            const std::vector<int64_t>& tokens, const std::vector<int64_t>& rows, double* inter) {
  if (tokens.empty()) return;
  const MlpShape s = mlp_shape(p, id.kind);
  const int64_t n = int64_t(tokens.size());
  std::vector<double> xs(size_t(n * s.hidden)), g(size_t(n * s.rows13));  // (n,H), (n,rows13)
  for (int64_t i = 0; i < n; ++i)
    std::copy_n(x + tokens[i] * s.hidden, s.hidden, xs.data() + i * s.hidden);
  gemms.gemm(id, Gemm::kW13, xs.data(), n, g.data());
  for (int64_t i = 0; i < n; ++i)
    apply_activation(p, g.data() + i * s.rows13, s.inter, inter + rows[i] * s.inter);
}

// out[row] = W2 inter[row] (+ b2) for each listed row.
void mlp_down(const ExpertGemms& gemms, MlpId id, const moe_problem& p, const double* inter,
              const std::vector<int64_t>& rows, double* out) {
  if (rows.empty()) return;
  const MlpShape s = mlp_shape(p, id.kind);
  const int64_t n = int64_t(rows.size());
  std::vector<double> xs(size_t(n * s.inter)), ys(size_t(n * s.hidden));  // (n,I), (n,H)
  for (int64_t i = 0; i < n; ++i)
    std::copy_n(inter + rows[i] * s.inter, s.inter, xs.data() + i * s.inter);
  gemms.gemm(id, Gemm::kW2, xs.data(), n, ys.data());
  for (int64_t i = 0; i < n; ++i)
    std::copy_n(ys.data() + i * s.hidden, s.hidden, out + rows[i] * s.hidden);
}

void write_output(const moe_tensor& out, int64_t index, double v) {
  // check_run_tensors admitted bf16, f32 or f64 only.
  switch (static_cast<moe_dtype>(out.dtype)) {
    case MOE_DTYPE_F64:
      static_cast<double*>(out.data)[index] = v;
      return;
    case MOE_DTYPE_F32:
      static_cast<float*>(out.data)[index] = static_cast<float>(v);
      return;
    case MOE_DTYPE_BF16:
      static_cast<uint16_t*>(out.data)[index] = double_to_bf16(v);
      return;
    case MOE_DTYPE_INVALID:
    case MOE_DTYPE_F16:
    case MOE_DTYPE_E4M3:
    case MOE_DTYPE_E2M1X2:
    case MOE_DTYPE_UE8M0:
    case MOE_DTYPE_I32:
    case MOE_DTYPE_I64:
    case MOE_DTYPE_U8:
    case MOE_DTYPE_I8:
      break;
  }
  MOE_FAIL(MOE_STATUS_DTYPE_MISMATCH, "output dtype {} is not bf16, f32 or f64",
           dtype_name(static_cast<moe_dtype>(out.dtype)));
}

// The output's value at `index` (bf16, f32 or f64, as write_output takes), for accumulate.
double read_output(const moe_tensor& out, int64_t index) {
  const auto dtype = static_cast<moe_dtype>(out.dtype);
  if (dtype == MOE_DTYPE_F64) return static_cast<const double*>(out.data)[index];
  if (dtype == MOE_DTYPE_F32) return static_cast<const float*>(out.data)[index];
  return bf16_to_float(static_cast<const uint16_t*>(out.data)[index]);  // write_output checks
}

}  // namespace

Layer::Layer(const moe_problem& problem, const moe_weights& w) : problem_(problem) {
  gemms_ = std::make_unique<Fp64Gemms>(layer_mlps(problem_.c(), w));
  read_activation_scales(w);
}

Layer::Layer(const moe_problem& problem, const moe_weights& w,
             std::unique_ptr<const ExpertGemms> gemms)
    : problem_(problem), gemms_(std::move(gemms)) {
  MOE_CHECK(gemms_ != nullptr, MOE_STATUS_INVALID_ARGUMENT, "the layer needs its GEMMs");
  check_weights(problem_.c(), w);
  read_activation_scales(w);
}

void Layer::read_activation_scales(const moe_weights& w) {
  if (problem_.raw().input_format != MOE_INPUT_FP8_TENSOR_STATIC) return;
  a13_scale_ = *static_cast<const float*>(w.a13_scale.data);
  a2_scale_ = *static_cast<const float*>(w.a2_scale.data);
  MOE_CHECK(
      a13_scale_ > 0 && a2_scale_ > 0 && std::isfinite(a13_scale_) && std::isfinite(a2_scale_),
      MOE_STATUS_INVALID_ARGUMENT, "a13_scale={} and a2_scale={} must be finite and > 0",
      a13_scale_, a2_scale_);
}

void Layer::run(const moe_run_args& a) const {
  const moe_problem p = problem_.c();
  const int64_t tokens = sdk::check_run_tensors(p, a, 0, /*wide_output_ok=*/true);
  const bool accumulate = sdk::run_accumulates(a);  // output += the result, rounded once
  const int64_t width = topk_width(p), h = p.hidden, in = p.intermediate;
  const auto* ids = static_cast<const int32_t*>(a.topk_ids.data);
  const auto* weights = static_cast<const float*>(a.topk_weights.data);
  const auto input_format = static_cast<moe_input_format>(p.input_format);

  // Hidden states as the routed and shared experts see them (quantised), and as sinks do (bf16).
  std::vector<double> x_bf16(size_t(tokens * h));
  const auto* hidden = static_cast<const uint16_t*>(a.hidden.data);
  for (int64_t i = 0; i < tokens * h; ++i) x_bf16[i] = bf16_to_float(hidden[i]);
  std::vector<double> x = x_bf16;
  quantize_rows(input_format, x.data(), tokens, h, a13_scale_);

  // Every (token, slot) that does work gets a row; `slot_row` finds it again for the sum.
  std::vector<int64_t> slot_row(size_t(tokens * width), -1);
  const size_t experts = size_t(p.local_experts), sinks = size_t(p.sink_experts);
  std::vector<std::vector<int64_t>> expert_tokens(experts), expert_rows(experts);
  std::vector<std::vector<int64_t>> sink_tokens(sinks), sink_rows(sinks);
  int64_t routed_rows = 0, sink_row_count = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < width; ++j) {
      const int32_t id = ids[t * width + j];
      if (id == -1) continue;
      if (j < p.top_k) {
        MOE_CHECK(id >= 0 && id < p.experts, MOE_STATUS_INVALID_ARGUMENT,
                  "topk_ids[{}][{}]={} is outside [-1, experts={})", t, j, id, p.experts);
        // A token meets an expert once (routing's top-k never repeats one; a backend that gives
        // each expert a token's row once, deepgemm_style's masked layout, could not run it twice).
        for (int64_t i = 0; i < j; ++i)
          MOE_CHECK(ids[t * width + i] != id, MOE_STATUS_INVALID_ARGUMENT,
                    "topk_ids[{}][{}]={} repeats topk_ids[{}][{}]: a token's routed experts must "
                    "differ (-1 may repeat)",
                    t, j, id, t, i);
        const int32_t local = local_expert_id(p, id);
        if (local < 0) continue;  // lives on another EP rank
        expert_tokens[local].push_back(t);
        expert_rows[local].push_back(routed_rows);
        slot_row[t * width + j] = routed_rows++;
      } else {
        const int64_t s = j - p.top_k;
        MOE_CHECK(id == p.experts + s, MOE_STATUS_INVALID_ARGUMENT,
                  "topk_ids[{}][{}]={}: sink column {} holds sink expert {} or -1", t, j, id, s,
                  p.experts + s);
        sink_tokens[s].push_back(t);
        sink_rows[s].push_back(sink_row_count);
        slot_row[t * width + j] = sink_row_count++;
      }
    }
  }

  // Routed experts: GEMM1 + activation, intermediate quantisation over the batch, GEMM2.
  std::vector<double> inter(size_t(routed_rows * in)), routed_out(size_t(routed_rows * h));
  const ExpertGemms& gemms = *gemms_;
  parallel_for(p.local_experts, [&](int64_t e) {
    mlp_up(gemms, {MlpKind::kRouted, e}, p, x.data(), expert_tokens[e], expert_rows[e],
           inter.data());
  });
  quantize_rows(input_format, inter.data(), routed_rows, in, a2_scale_);
  parallel_for(p.local_experts, [&](int64_t e) {
    mlp_down(gemms, {MlpKind::kRouted, e}, p, inter.data(), expert_rows[e], routed_out.data());
  });

  // Sink experts: bf16 weights on bf16 hidden states, silu_mul, never quantised.
  const int64_t sink_in = p.sink_intermediate;
  std::vector<double> sink_inter(size_t(sink_row_count * sink_in)),
      sink_out(size_t(sink_row_count * h));
  moe_problem sink_problem = p;
  sink_problem.activation = MOE_ACTIVATION_SILU_MUL;
  parallel_for(p.sink_experts, [&](int64_t s) {
    const MlpId id{MlpKind::kSink, s};
    mlp_up(gemms, id, sink_problem, x_bf16.data(), sink_tokens[s], sink_rows[s], sink_inter.data());
    mlp_down(gemms, id, sink_problem, sink_inter.data(), sink_rows[s], sink_out.data());
  });

  // Shared expert: every token, weight 1, its intermediate quantised on its own.
  std::vector<double> shared_out;
  const bool shared = p.shared_intermediate > 0;
  if (shared) {
    const MlpId id{MlpKind::kShared, 0};
    const int64_t shared_in = p.shared_intermediate;
    std::vector<int64_t> all(tokens);
    for (int64_t t = 0; t < tokens; ++t) all[t] = t;
    std::vector<double> shared_inter(size_t(tokens * shared_in));
    shared_out.resize(size_t(tokens * h));
    mlp_up(gemms, id, p, x.data(), all, all, shared_inter.data());
    quantize_rows(input_format, shared_inter.data(), tokens, shared_in, a2_scale_);
    mlp_down(gemms, id, p, shared_inter.data(), all, shared_out.data());
  }

  // Weighted combine in slot order; a token with no expert gets a zero row.
  std::vector<double> acc(static_cast<size_t>(h));
  for (int64_t t = 0; t < tokens; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t j = 0; j < width; ++j) {
      const int64_t row = slot_row[t * width + j];
      if (row < 0) continue;
      const double w = weights[t * width + j];
      const double* y = (j < p.top_k ? routed_out.data() : sink_out.data()) + row * h;
      for (int64_t c = 0; c < h; ++c) acc[c] += w * y[c];
    }
    if (shared)
      for (int64_t c = 0; c < h; ++c) acc[c] += shared_out[t * h + c];
    for (int64_t c = 0; c < h; ++c)
      write_output(a.output, t * h + c,
                   accumulate ? read_output(a.output, t * h + c) + acc[c] : acc[c]);
  }
}

}  // namespace moe::reference
