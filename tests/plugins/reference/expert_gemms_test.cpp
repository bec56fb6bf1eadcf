// The seam between the reference layer and its GEMMs (expert_gemms.hpp): every MLP kind goes
// through ExpertGemms with the rows the routing gives it, and a layer whose GEMMs round to fp32
// (what the GPU oracle does with cuBLAS) stays within the oracle's bound of the fp64 reference
// on every small problem: the bounds of tests/support/oracle_bounds.hpp, which the real oracle is
// held to on a GPU, are met by its arithmetic.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "../../support/oracle_bounds.hpp"
#include "expert_gemms.hpp"
#include "moe/conformance.hpp"
#include "moe/inputs.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/problem.hpp"
#include "reference_layer.hpp"
#include "routing.hpp"

namespace {

using moe::reference::ExpertGemms;
using moe::reference::Fp64Gemms;
using moe::reference::Gemm;
using moe::reference::Layer;
using moe::reference::MlpId;
using moe::reference::MlpKind;
using moe::reference::MlpRef;

// Fresh per run; MOE_TEST_SEED=<n> repeats a failing run (the seed is printed).
uint64_t fresh_seed() {
  if (const char* s = std::getenv("MOE_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
}

// The GPU oracle's arithmetic on the CPU: weights and inputs rounded to fp32, fp32 FMA sums
// (in order; cuBLAS sums in another order with errors of the same size), + bias in double.
// `bf16_weights`: round the weights on to bf16, a bug the oracle's bounds must catch.
class Fp32Gemms final : public ExpertGemms {
 public:
  explicit Fp32Gemms(const std::vector<MlpRef>& mlps, bool bf16_weights = false) {
    for (const MlpRef& m : mlps) {
      Mlp& out = mlps_[key(m.id)] = {to_f32(m.w13), to_f32(m.w2), m};
      if (!bf16_weights) continue;
      for (auto* w : {&out.w13, &out.w2})
        for (float& v : *w) v = moe::bf16_to_float(moe::float_to_bf16(v));
    }
  }
  void gemm(MlpId id, Gemm g, const double* x, int64_t n, double* y) const override {
    const Mlp& m = mlps_.at(key(id));
    const auto& w = g == Gemm::kW13 ? m.w13 : m.w2;
    const auto& ref = g == Gemm::kW13 ? m.ref.w13 : m.ref.w2;
    const auto& bias = g == Gemm::kW13 ? m.ref.b13 : m.ref.b2;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t r = 0; r < ref.rows; ++r) {
        float acc = 0.0f;
        for (int64_t c = 0; c < ref.cols; ++c)
          acc = std::fma(w[r * ref.cols + c], float(x[i * ref.cols + c]), acc);
        y[i * ref.rows + r] = double(acc) + (bias.empty() ? 0.0 : bias[r]);
      }
    }
  }

 private:
  struct Mlp {
    std::vector<float> w13, w2;
    MlpRef ref;  // shapes and biases (its matrix pointers are not used after construction)
  };
  static std::pair<int, int64_t> key(MlpId id) { return {int(id.kind), id.index}; }
  static std::vector<float> to_f32(const moe::reference::MatrixRef& m) {
    std::vector<double> d(size_t(m.rows * m.cols));
    m.dequantize(d.data());
    return {d.begin(), d.end()};
  }
  std::map<std::pair<int, int64_t>, Mlp> mlps_;
};

// Fp64Gemms that records (kind, index, gemm, n) of every call.
class RecordingGemms final : public ExpertGemms {
 public:
  struct Call {
    MlpKind kind;
    int64_t index;
    Gemm gemm;
    int64_t n;
  };
  explicit RecordingGemms(const std::vector<MlpRef>& mlps, std::vector<Call>* calls)
      : inner_(mlps), calls_(calls) {}
  void gemm(MlpId id, Gemm g, const double* x, int64_t n, double* y) const override {
    {
      std::lock_guard lock(mutex_);
      calls_->push_back({id.kind, id.index, g, n});
    }
    inner_.gemm(id, g, x, n, y);
  }

 private:
  Fp64Gemms inner_;
  std::vector<Call>* calls_;
  mutable std::mutex mutex_;
};

struct Routed {
  moe::HostTensor ids, weights;
};

Routed route(const moe_problem& p, const moe::Batch& b) {
  const int64_t tokens = b.hidden.shape()[0], width = moe::topk_width(p);
  Routed r{moe::HostTensor(MOE_DTYPE_I32, {tokens, width}),
           moe::HostTensor(MOE_DTYPE_F32, {tokens, width})};
  moe::reference::route(p, tokens, b.logits.data<float>(),
                        p.routing_bias ? b.bias.data<float>() : nullptr,
                        b.is_padding.empty() ? nullptr : b.is_padding.data<uint8_t>(),
                        r.ids.data<int32_t>(), r.weights.data<float>());
  return r;
}

moe::HostTensor run(const Layer& layer, const moe_problem& p, const moe::Batch& b,
                    const Routed& r) {
  moe::HostTensor out(MOE_DTYPE_F64, {b.hidden.shape()[0], p.hidden});
  out.fill_bytes(0xFF);
  moe_run_args a{};
  a.struct_size = sizeof(a);
  a.hidden = b.hidden.view();
  a.topk_ids = r.ids.view();
  a.topk_weights = r.weights.view();
  a.output = out.view();
  layer.run(a);
  return out;
}

std::vector<moe::ProblemFile> small_problems() {
  std::vector<moe::ProblemFile> out;
  for (auto& pf : moe::load_problem_dir(MOE_SOURCE_DIR "/configs/problems"))
    if (!pf.gpu_sized) out.push_back(std::move(pf));
  return out;
}

TEST(ExpertGemms, EveryMlpKindGoesThroughTheGemmsWithItsRoutedRows) {
  const moe::ProblemFile pf =
      moe::load_problem_file(MOE_SOURCE_DIR "/configs/problems/bf16_sink_inkling.yaml");
  moe::Problem shared = pf.problem;  // sinks and a shared expert in one layer
  shared.raw().shared_intermediate = 48;
  const moe_problem p = shared.c();
  const moe::LayerWeights w = moe::random_weights(p, 3);
  std::vector<RecordingGemms::Call> calls;
  const Layer layer(
      p, w.view(),
      std::make_unique<RecordingGemms>(moe::reference::layer_mlps(p, w.view()), &calls));
  const int64_t tokens = 9;
  const moe::Batch b = moe::random_batch(p, tokens, 4, moe::Scenario::kRandom);
  const Routed r = route(p, b);
  const moe::HostTensor got = run(layer, p, b, r);

  // Rows per MLP from the routing: routed slots by expert, sink slots by sink, shared = tokens.
  std::map<std::pair<int, int64_t>, int64_t> want;
  const int64_t width = moe::topk_width(p);
  for (int64_t i = 0; i < tokens * width; ++i) {
    const int32_t id = r.ids.data<int32_t>()[i];
    if (id < 0) continue;
    if (i % width < p.top_k)
      ++want[{int(MlpKind::kRouted), id}];
    else
      ++want[{int(MlpKind::kSink), id - p.experts}];
  }
  want[{int(MlpKind::kShared), 0}] = tokens;
  std::map<std::pair<int, int64_t>, int64_t> w13_rows, w2_rows;
  for (const auto& c : calls)
    (c.gemm == Gemm::kW13 ? w13_rows : w2_rows)[{int(c.kind), c.index}] += c.n;
  EXPECT_EQ(w13_rows, want);
  EXPECT_EQ(w2_rows, want);
  EXPECT_GT(want.count({int(MlpKind::kSink), 0}) + want.count({int(MlpKind::kSink), 1}), 0u);

  const Layer plain(p, w.view());
  const moe::HostTensor ref = run(plain, p, b, r);
  EXPECT_EQ(moe::relative_l2(got, ref), 0.0) << "a recording wrapper changed the result";
}

// Relative L2 errors of a layer with Fp32Gemms against the reference, one per case of `pf` with
// tokens > 0, on inputs from `seed`.
std::vector<double> fp32_errors(const moe::ProblemFile& pf, uint64_t seed,
                                bool bf16_weights = false) {
  const moe_problem p = pf.problem.c();
  const moe::LayerWeights w = moe::random_weights(p, moe::mix_seed(seed, pf.name));
  const Layer fp64(p, w.view());
  const Layer fp32(
      p, w.view(),
      std::make_unique<Fp32Gemms>(moe::reference::layer_mlps(p, w.view()), bf16_weights));
  std::vector<double> errors;
  for (const int64_t tokens : pf.tokens) {
    if (tokens == 0 || tokens > p.max_tokens) continue;
    for (const moe::Scenario sc : pf.scenarios) {
      const moe::Batch b =
          moe::random_batch(p, tokens, moe::mix_seed(seed, pf.name + std::to_string(tokens)), sc);
      const Routed r = route(p, b);
      errors.push_back(moe::relative_l2(run(fp32, p, b, r), run(fp64, p, b, r)));
    }
  }
  return errors;
}

TEST(ExpertGemms, Fp32GemmsStayWithinTheOracleBoundsOnEverySmallProblem) {
  const uint64_t seed = fresh_seed();
  std::cout << "[   seed   ] MOE_TEST_SEED=" << seed << "\n";
  for (const bool bf16_activations : {false, true}) {
    for (moe::ProblemFile& pf : small_problems()) {
      if (bf16_activations) {  // nothing re-quantised: the tight bound for every case
        pf.problem.raw().input_format = MOE_INPUT_BF16;
        pf.problem.finalize();
      }
      moe::test::expect_within_oracle_bounds(
          pf.problem.c(), fp32_errors(pf, seed),
          pf.name + (bf16_activations ? " (bf16 activations)" : ""));
    }
  }
}

// fp8_block_grouped re-quantises its intermediates, so there only the median bound is tight.
TEST(ExpertGemms, OracleBoundsCatchWeightsRoundedToBf16EvenWhereFlipsAreAllowed) {
  const moe::ProblemFile pf =
      moe::load_problem_file(MOE_SOURCE_DIR "/configs/problems/fp8_block_grouped.yaml");
  const uint64_t seed = fresh_seed();
  EXPECT_EQ(moe::test::oracle_bound_violations(pf.problem.c(), fp32_errors(pf, seed)), "");
  EXPECT_THAT(moe::test::oracle_bound_violations(pf.problem.c(), fp32_errors(pf, seed, true)),
              testing::HasSubstr("median case"))
      << "seed " << seed;
}

}  // namespace
