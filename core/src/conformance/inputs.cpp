#include "moe/inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "moe/sdk/error.hpp"
#include "moe/sdk/format_table.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/parallel_for.hpp"
#include "moe/sdk/problem.hpp"
#include "moe/sdk/weights.hpp"

namespace moe {

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::uniform() {
  return double(next() >> 11) * 0x1.0p-53;
}

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = 1.0 - uniform(), u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1)), th = 2.0 * M_PI * u2;
  spare_ = r * std::sin(th);
  has_spare_ = true;
  return r * std::cos(th);
}

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* b = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

uint64_t mix_seed(uint64_t seed, std::string_view salt) {
  Rng r(fnv1a(salt.data(), salt.size(), kFnvOffset ^ seed));
  return r.next();
}

namespace {

// N(0, std) values times exp(0.5 z) per 16x32 block: neighbouring scale blocks differ.
std::vector<float> master_matrix(Rng& rng, int64_t rows, int64_t cols, double std) {
  const int64_t br = ceil_div(rows, 16), bc = ceil_div(cols, 32);
  std::vector<double> factor(size_t(br * bc));
  for (auto& f : factor) f = std::exp(0.5 * rng.normal());
  std::vector<float> w(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      w[r * cols + c] = float(std * rng.normal() * factor[(r / 16) * bc + c / 32]);
  return w;
}

// Quantises matrix `index` of a stack into q / scale / scale_2 (index -1: not a stack).
void quantize_into(moe_format f, const std::vector<float>& w, int64_t rows, int64_t cols,
                   int64_t index, HostTensor& q, HostTensor& scale, HostTensor& scale_2) {
  const MatrixLayout m = matrix_layout(f, rows, cols);
  const size_t i = index < 0 ? 0 : size_t(index);
  uint8_t* qp =
      static_cast<uint8_t*>(q.raw()) + i * size_t(rows * m.stored_cols) * dtype_size(m.dtype);
  const int64_t sc = scale_count(m);
  void* scales = scale.empty() ? nullptr
                               : static_cast<uint8_t*>(scale.raw()) +
                                     i * size_t(sc) * dtype_size(scale.dtype());
  float* s2 = scale_2.empty() ? nullptr : scale_2.data<float>() + i;
  quantize_matrix(f, w.data(), rows, cols, qp, scales, s2);
}

// Where the matrices' random values come from: one stream in order (random_weights), or a
// stream per matrix, mix_seed(seed, "<salt>/<index>"), so they are drawn on every core.
struct MatrixDraws {
  Rng* in_order = nullptr;
  uint64_t seed = 0;  // when in_order is null
};

// Allocates q / scale / scale_2 for `experts` matrices (0: a single matrix) and fills them.
void make_matrices(const MatrixDraws& draws, std::string_view salt, moe_format f, int64_t experts,
                   int64_t rows, int64_t cols, double std, HostTensor& q, HostTensor& scale,
                   HostTensor& scale_2) {
  const MatrixLayout m = matrix_layout(f, rows, cols);
  auto with_experts = [&](std::vector<int64_t> dims) {
    if (experts > 0) dims.insert(dims.begin(), experts);
    return dims;
  };
  q = HostTensor(m.dtype, with_experts({rows, m.stored_cols}));
  if (m.scale_dtype != MOE_DTYPE_INVALID) {
    scale = m.scale_rows == 0
                ? HostTensor(m.scale_dtype, {experts > 0 ? experts : 1})
                : HostTensor(m.scale_dtype, with_experts({m.scale_rows, m.scale_cols}));
  }
  if (m.has_scale_2) scale_2 = HostTensor(MOE_DTYPE_F32, {experts > 0 ? experts : 1});
  auto one = [&](int64_t e, Rng& rng) {  // each matrix writes only its own slices
    const auto w = master_matrix(rng, rows, cols, std);
    quantize_into(f, w, rows, cols, experts > 0 ? e : -1, q, scale, scale_2);
  };
  const int64_t n = std::max<int64_t>(experts, 1);
  if (draws.in_order != nullptr) {
    for (int64_t e = 0; e < n; ++e) one(e, *draws.in_order);
    return;
  }
  parallel_for(n, [&](int64_t e) {
    Rng rng(mix_seed(draws.seed, std::string(salt) + "/" + std::to_string(e)));
    one(e, rng);
  });
}

HostTensor random_bias(Rng& rng, moe_dtype dtype, std::vector<int64_t> shape, double std) {
  HostTensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = float(std * rng.normal());
    if (dtype == MOE_DTYPE_F32)
      t.data<float>()[i] = v;
    else
      t.data<uint16_t>()[i] = float_to_bf16(v);
  }
  return t;
}

}  // namespace

moe_weights LayerWeights::view() const {
  moe_weights w{};
  w.struct_size = sizeof(w);
  w.w13 = w13.view();
  w.w13_scale = w13_scale.view();
  w.w13_scale_2 = w13_scale_2.view();
  w.w2 = w2.view();
  w.w2_scale = w2_scale.view();
  w.w2_scale_2 = w2_scale_2.view();
  w.b13 = b13.view();
  w.b2 = b2.view();
  w.a13_scale = a13_scale.view();
  w.a2_scale = a2_scale.view();
  w.shared_w13 = shared_w13.view();
  w.shared_w13_scale = shared_w13_scale.view();
  w.shared_w13_scale_2 = shared_w13_scale_2.view();
  w.shared_w2 = shared_w2.view();
  w.shared_w2_scale = shared_w2_scale.view();
  w.shared_w2_scale_2 = shared_w2_scale_2.view();
  w.sink_w13 = sink_w13.view();
  w.sink_w2 = sink_w2.view();
  return w;
}

namespace {

// The weights of random_weights (in_order) or random_weights_fast (a stream per matrix, drawn on
// every core). Biases come from the one stream either way: they are small.
LayerWeights draw_weights(const moe_problem& p, uint64_t seed, bool in_order) {
  Rng rng(mix_seed(seed, "weights"));
  const MatrixDraws draws{in_order ? &rng : nullptr, seed};
  const auto f = static_cast<moe_format>(p.format);
  const auto act = static_cast<moe_activation>(p.activation);
  // Clamped activations get larger GEMM1 outputs so the clamp at L is exercised.
  const bool clamped = act == MOE_ACTIVATION_SILU_MUL_CLAMP || act == MOE_ACTIVATION_SWIGLU_OAI;
  const double std13 = (clamped ? 3.0 : 1.0) / std::sqrt(double(p.hidden));
  LayerWeights lw;
  const int64_t r13 = w13_rows(p);
  make_matrices(draws, "w13", f, p.local_experts, r13, p.hidden, std13, lw.w13, lw.w13_scale,
                lw.w13_scale_2);
  make_matrices(draws, "w2", f, p.local_experts, p.hidden, p.intermediate,
                1.0 / std::sqrt(double(p.intermediate)), lw.w2, lw.w2_scale, lw.w2_scale_2);
  if (p.expert_bias) {
    lw.b13 = random_bias(rng, MOE_DTYPE_BF16, {p.local_experts, r13}, 0.1);
    lw.b2 = random_bias(rng, MOE_DTYPE_F32, {p.local_experts, p.hidden}, 0.1);
  }
  if (p.input_format == MOE_INPUT_FP8_TENSOR_STATIC) {
    lw.a13_scale = HostTensor(MOE_DTYPE_F32, {1});
    lw.a13_scale.data<float>()[0] = 4.0f / 448.0f;  // hidden states are N(0, 1)
    lw.a2_scale = HostTensor(MOE_DTYPE_F32, {1});
    lw.a2_scale.data<float>()[0] = 8.0f / 448.0f;
  }
  if (p.shared_intermediate > 0) {
    const int64_t is = p.shared_intermediate, rs = is_gated(act) ? 2 * is : is;
    make_matrices(draws, "shared_w13", f, 0, rs, p.hidden, std13, lw.shared_w13,
                  lw.shared_w13_scale, lw.shared_w13_scale_2);
    make_matrices(draws, "shared_w2", f, 0, p.hidden, is, 1.0 / std::sqrt(double(is)), lw.shared_w2,
                  lw.shared_w2_scale, lw.shared_w2_scale_2);
  }
  if (p.sink_experts > 0) {
    HostTensor none, none2;
    const int64_t is = p.sink_intermediate;
    make_matrices(draws, "sink_w13", MOE_FORMAT_BF16, p.sink_experts, 2 * is, p.hidden,
                  1.0 / std::sqrt(double(p.hidden)), lw.sink_w13, none, none2);
    make_matrices(draws, "sink_w2", MOE_FORMAT_BF16, p.sink_experts, p.hidden, is,
                  1.0 / std::sqrt(double(is)), lw.sink_w2, none, none2);
  }
  return lw;
}

// bf16 values uniform in [-a, a], a = sqrt(3) * std (so the spread is N(0, std)'s), from a hash
// of the element index: any element is computed on its own, so threads split the work freely.
void fill_uniform_bf16(HostTensor& t, uint64_t seed, double std) {
  const int64_t n = t.numel();
  auto* out = t.data<uint16_t>();
  const double a = std::sqrt(3.0) * std;
  constexpr int64_t kChunk = int64_t(1) << 20;
  parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c) {
    for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
      uint64_t z = (seed ^ 0x9E3779B97F4A7C15ull) + uint64_t(i) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 31)) * 0x94D049BB133111EBull;
      z ^= z >> 29;
      out[i] = float_to_bf16(float(a * (double(z >> 11) * 0x1.0p-52 - 1.0)));
    }
  });
}

}  // namespace

LayerWeights random_weights(const moe_problem& p, uint64_t seed) {
  return draw_weights(p, seed, /*in_order=*/true);
}

LayerWeights random_weights_fast(const moe_problem& p, uint64_t seed) {
  if (p.format != MOE_FORMAT_BF16 || p.expert_bias || p.sink_experts || p.shared_intermediate ||
      p.input_format == MOE_INPUT_FP8_TENSOR_STATIC)
    return draw_weights(p, seed, /*in_order=*/false);
  LayerWeights lw;
  lw.w13 = HostTensor(MOE_DTYPE_BF16, {p.local_experts, w13_rows(p), p.hidden});
  lw.w2 = HostTensor(MOE_DTYPE_BF16, {p.local_experts, p.hidden, p.intermediate});
  fill_uniform_bf16(lw.w13, mix_seed(seed, "w13"), 1.0 / std::sqrt(double(p.hidden)));
  fill_uniform_bf16(lw.w2, mix_seed(seed, "w2"), 1.0 / std::sqrt(double(p.intermediate)));
  return lw;
}

LayerWeights slice_local_experts(const LayerWeights& global, const moe_problem& ep) {
  auto slice = [&](const HostTensor& t) {
    if (t.empty()) return t;
    MOE_CHECK(!t.shape().empty() && t.shape()[0] == ep.experts, MOE_STATUS_SHAPE_MISMATCH,
              "a stacked tensor has {} experts, the problem {}",
              t.shape().empty() ? 0 : t.shape()[0], ep.experts);
    std::vector<int64_t> shape = t.shape();
    shape[0] = ep.local_experts;
    HostTensor out(t.dtype(), shape);
    const size_t per = t.bytes() / size_t(ep.experts);
    for (int64_t g = 0; g < ep.experts; ++g) {
      const int32_t l = local_expert_id(ep, g);
      if (l >= 0)
        std::memcpy(static_cast<uint8_t*>(out.raw()) + size_t(l) * per,
                    static_cast<const uint8_t*>(t.raw()) + size_t(g) * per, per);
    }
    return out;
  };
  LayerWeights w = global;
  for (auto [dst, src] : {std::pair{&w.w13, &global.w13},
                          {&w.w13_scale, &global.w13_scale},
                          {&w.w13_scale_2, &global.w13_scale_2},
                          {&w.w2, &global.w2},
                          {&w.w2_scale, &global.w2_scale},
                          {&w.w2_scale_2, &global.w2_scale_2},
                          {&w.b13, &global.b13},
                          {&w.b2, &global.b2}})
    *dst = slice(*src);
  return w;
}

const char* scenario_name(Scenario s) {
  switch (s) {
    case Scenario::kRandom:
      return "random";
    case Scenario::kTies:
      return "ties";
    case Scenario::kPadding:
      return "padding";
    case Scenario::kOneExpert:
      return "one_expert";
  }
  return "invalid";
}

bool parse_scenario(std::string_view name, Scenario* out) {
  for (Scenario s :
       {Scenario::kRandom, Scenario::kTies, Scenario::kPadding, Scenario::kOneExpert}) {
    if (name == scenario_name(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

Batch random_batch(const moe_problem& p, int64_t tokens, uint64_t seed, Scenario scenario,
                   double bias_std) {
  Rng rng(mix_seed(seed, scenario_name(scenario)));
  Batch b;
  b.hidden = HostTensor(MOE_DTYPE_BF16, {tokens, p.hidden});
  for (int64_t i = 0; i < tokens * p.hidden; ++i)
    b.hidden.data<uint16_t>()[i] = float_to_bf16(float(rng.normal()));
  const int64_t g = p.experts + p.sink_experts;
  const bool ties = scenario == Scenario::kTies;
  b.logits = HostTensor(MOE_DTYPE_F32, {tokens, g});
  for (int64_t i = 0; i < tokens * g; ++i) {
    const double v = 2.0 * rng.normal();
    b.logits.data<float>()[i] = float(ties ? std::round(v * 2.0) / 2.0 : v);
  }
  if (p.routing_bias) {
    b.bias = HostTensor(MOE_DTYPE_F32, {p.experts});
    for (int64_t e = 0; e < p.experts; ++e) {
      const double v = bias_std * rng.normal();
      b.bias.data<float>()[e] = float(ties ? std::round(v * 4.0) / 4.0 : v);
    }
  }
  if (scenario == Scenario::kPadding) {
    b.is_padding = HostTensor(MOE_DTYPE_U8, {tokens});
    for (int64_t t = 0; t < tokens; ++t) b.is_padding.data<uint8_t>()[t] = (t % 3 == 1);
  }
  return b;
}

}  // namespace moe
