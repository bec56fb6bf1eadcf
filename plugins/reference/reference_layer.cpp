#include "reference_layer.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "activations.hpp"
#include "moe/formats.hpp"
#include "moe/plugin_sdk.hpp"
#include "moe/weights.hpp"

namespace moe::reference {
namespace {

// Copies matrix `index` of a stack (index < 0: the tensor is a single matrix).
QuantMatrix copy_matrix(moe_format format, int64_t rows, int64_t cols, const moe_tensor& q,
                        const moe_tensor& scale, const moe_tensor& scale_2, int64_t index) {
  const MatrixLayout m = matrix_layout(format, rows, cols);
  QuantMatrix out{format, rows, cols, {}, {}, 1.0f};
  const size_t q_bytes = size_t(rows * m.stored_cols) * dtype_size(m.dtype);
  const size_t i = index < 0 ? 0 : size_t(index);
  const auto* qp = static_cast<const uint8_t*>(q.data) + i * q_bytes;
  out.q.assign(qp, qp + q_bytes);
  if (m.scale_dtype != MOE_DTYPE_INVALID) {
    const size_t s_bytes = size_t(scale_count(m)) * dtype_size(m.scale_dtype);
    const auto* sp = static_cast<const uint8_t*>(scale.data) + i * s_bytes;
    out.scales.assign(sp, sp + s_bytes);
  }
  if (m.has_scale_2) {
    out.scale_2 = static_cast<const float*>(scale_2.data)[i];
    MOE_CHECK(out.scale_2 > 0 && std::isfinite(out.scale_2), MOE_STATUS_INVALID_ARGUMENT,
              "scale_2[{}]={} must be finite and > 0 (a missing or misrouted tensor?)", i,
              out.scale_2);
  }
  return out;
}

std::vector<double> copy_bias(const moe_tensor& t, int64_t expert, int64_t n) {
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = expert * n + i;
    out[i] = t.dtype == MOE_DTYPE_F32 ? static_cast<const float*>(t.data)[at]
                                      : bf16_to_float(static_cast<const uint16_t*>(t.data)[at]);
  }
  return out;
}

// Runs fn(i) for i in [0, n) on up to hardware_concurrency threads. Each i writes its own rows,
// so the result does not depend on the schedule.
template <class Fn>
void parallel_for(int64_t n, Fn&& fn) {
  const int64_t threads = std::min<int64_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int64_t i = next++; i < n; i = next++) {
        try {
          fn(i);
        } catch (...) {
          std::lock_guard lock(error_mutex);
          if (!error) error = std::current_exception();
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

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
    default:
      MOE_FAIL(MOE_STATUS_INVALID_ARGUMENT, "input_format={} is not resolved", int(f));
  }
}

// y[rows] = W[rows, cols] x[cols] (+ bias)
void gemv(const std::vector<double>& w, int64_t rows, int64_t cols, const double* x,
          const std::vector<double>& bias, double* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const double* wr = w.data() + r * cols;
    double acc = 0;
    for (int64_t c = 0; c < cols; ++c) acc += wr[c] * x[c];
    y[r] = acc + (bias.empty() ? 0.0 : bias[r]);
  }
}

// inter[i] = activation(W13 x[token_i] + b13) for each listed token.
void mlp_up(const moe_problem& p, const Mlp& m, const double* x, const std::vector<int64_t>& tokens,
            const std::vector<int64_t>& rows, double* inter) {
  const std::vector<double> w13 = m.w13.dequantize();
  const int64_t inter_n = m.w2.cols;
  std::vector<double> g(m.w13.rows);
  for (size_t i = 0; i < tokens.size(); ++i) {
    gemv(w13, m.w13.rows, m.w13.cols, x + tokens[i] * m.w13.cols, m.b13, g.data());
    apply_activation(p, g.data(), inter_n, inter + rows[i] * inter_n);
  }
}

// out[row] = W2 inter[row] (+ b2) for each listed row.
void mlp_down(const Mlp& m, const double* inter, const std::vector<int64_t>& rows, double* out) {
  const std::vector<double> w2 = m.w2.dequantize();
  for (int64_t r : rows)
    gemv(w2, m.w2.rows, m.w2.cols, inter + r * m.w2.cols, m.b2, out + r * m.w2.rows);
}

void write_output(const moe_tensor& out, int64_t index, double v) {
  switch (out.dtype) {
    case MOE_DTYPE_F64:
      static_cast<double*>(out.data)[index] = v;
      break;
    case MOE_DTYPE_F32:
      static_cast<float*>(out.data)[index] = static_cast<float>(v);
      break;
    default:
      static_cast<uint16_t*>(out.data)[index] = double_to_bf16(v);
  }
}

}  // namespace

std::vector<double> QuantMatrix::dequantize() const {
  std::vector<double> out(size_t(rows * cols));
  dequantize_matrix(format, q.data(), scales.data(), scale_2, rows, cols, out.data());
  return out;
}

Layer::Layer(const moe_problem& problem, const moe_weights& w) : problem_(problem) {
  const moe_problem p = problem_.c();
  check_weights(p, w);
  const auto format = static_cast<moe_format>(p.format);
  const int64_t r13 = w13_rows(p), h = p.hidden, in = p.intermediate;
  for (int64_t e = 0; e < p.local_experts; ++e) {
    Mlp m{copy_matrix(format, r13, h, w.w13, w.w13_scale, w.w13_scale_2, e),
          copy_matrix(format, h, in, w.w2, w.w2_scale, w.w2_scale_2, e),
          {},
          {}};
    if (p.expert_bias) {
      m.b13 = copy_bias(w.b13, e, r13);
      m.b2 = copy_bias(w.b2, e, h);
    }
    experts_.push_back(std::move(m));
  }
  if (p.shared_intermediate > 0) {
    const int64_t is = p.shared_intermediate;
    const int64_t rs = is_gated(static_cast<moe_activation>(p.activation)) ? 2 * is : is;
    shared_ =
        Mlp{copy_matrix(format, rs, h, w.shared_w13, w.shared_w13_scale, w.shared_w13_scale_2, -1),
            copy_matrix(format, h, is, w.shared_w2, w.shared_w2_scale, w.shared_w2_scale_2, -1),
            {},
            {}};
  }
  const moe_tensor none{};
  for (int64_t s = 0; s < p.sink_experts; ++s) {
    const int64_t is = p.sink_intermediate;
    sinks_.push_back({copy_matrix(MOE_FORMAT_BF16, 2 * is, h, w.sink_w13, none, none, s),
                      copy_matrix(MOE_FORMAT_BF16, h, is, w.sink_w2, none, none, s),
                      {},
                      {}});
  }
  if (p.input_format == MOE_INPUT_FP8_TENSOR_STATIC) {
    a13_scale_ = *static_cast<const float*>(w.a13_scale.data);
    a2_scale_ = *static_cast<const float*>(w.a2_scale.data);
    MOE_CHECK(
        a13_scale_ > 0 && a2_scale_ > 0 && std::isfinite(a13_scale_) && std::isfinite(a2_scale_),
        MOE_STATUS_INVALID_ARGUMENT, "a13_scale={} and a2_scale={} must be finite and > 0",
        a13_scale_, a2_scale_);
  }
}

void Layer::run(const moe_run_args& a) const {
  const moe_problem p = problem_.c();
  const int64_t tokens = sdk::check_run_tensors(p, a, 0, /*wide_output_ok=*/true);
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
  std::vector<std::vector<int64_t>> expert_tokens(experts_.size()), expert_rows(experts_.size());
  std::vector<std::vector<int64_t>> sink_tokens(sinks_.size()), sink_rows(sinks_.size());
  int64_t routed_rows = 0, sink_row_count = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < width; ++j) {
      const int32_t id = ids[t * width + j];
      if (id == -1) continue;
      if (j < p.top_k) {
        MOE_CHECK(id >= 0 && id < p.experts, MOE_STATUS_INVALID_ARGUMENT,
                  "topk_ids[{}][{}]={} is outside [-1, experts={})", t, j, id, p.experts);
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
  parallel_for(int64_t(experts_.size()), [&](int64_t e) {
    mlp_up(p, experts_[e], x.data(), expert_tokens[e], expert_rows[e], inter.data());
  });
  quantize_rows(input_format, inter.data(), routed_rows, in, a2_scale_);
  parallel_for(int64_t(experts_.size()), [&](int64_t e) {
    mlp_down(experts_[e], inter.data(), expert_rows[e], routed_out.data());
  });

  // Sink experts: bf16 weights on bf16 hidden states, silu_mul, never quantised.
  const int64_t sink_in = p.sink_intermediate;
  std::vector<double> sink_inter(size_t(sink_row_count * sink_in)),
      sink_out(size_t(sink_row_count * h));
  moe_problem sink_problem = p;
  sink_problem.activation = MOE_ACTIVATION_SILU_MUL;
  parallel_for(int64_t(sinks_.size()), [&](int64_t s) {
    mlp_up(sink_problem, sinks_[s], x_bf16.data(), sink_tokens[s], sink_rows[s], sink_inter.data());
    mlp_down(sinks_[s], sink_inter.data(), sink_rows[s], sink_out.data());
  });

  // Shared expert: every token, weight 1, its intermediate quantised on its own.
  std::vector<double> shared_out;
  if (shared_) {
    std::vector<int64_t> all(tokens);
    for (int64_t t = 0; t < tokens; ++t) all[t] = t;
    std::vector<double> shared_inter(size_t(tokens * shared_->w2.cols));
    shared_out.resize(size_t(tokens * h));
    mlp_up(p, *shared_, x.data(), all, all, shared_inter.data());
    quantize_rows(input_format, shared_inter.data(), tokens, shared_->w2.cols, a2_scale_);
    mlp_down(*shared_, shared_inter.data(), all, shared_out.data());
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
    if (shared_)
      for (int64_t c = 0; c < h; ++c) acc[c] += shared_out[t * h + c];
    for (int64_t c = 0; c < h; ++c) write_output(a.output, t * h + c, acc[c]);
  }
}

}  // namespace moe::reference
