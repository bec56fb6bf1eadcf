// Do the conformance tolerances of docs/design.md §7 leave room for a correct GPU plugin? A plugin
// that re-quantises the intermediate computes GEMM1 in another order and precision than the f64
// reference (Hopper's fp8 wgmma sums each 128-wide K block in reduced precision before it is
// promoted), so now and then a value lands on the other side of an e4m3 rounding boundary and its
// code moves one step: at one token that alone moves the output by up to a few percent.
//
// This test runs the reference layer twice on the suite's own kind of inputs (its weights,
// batches, scenarios and routing), once exactly and once as a correct plugin would answer: every
// GEMM1 output moved by relative noise, a bf16 output. Over many one-token draws of every small
// problem file that re-quantises, the noisy answer must stay within the file's tolerance, or the
// suite fails correct plugins at random (it did on the H200, session 31: fp8_block_bias_shared at
// T = 1, 2.3e-2 against 2e-2, deepgemm_style and trtllm_style bit for bit alike).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "../../support/test_env.hpp"
#include "expert_gemms.hpp"
#include "layer_mlps.hpp"
#include "moe/conformance.hpp"
#include "moe/inputs.hpp"
#include "moe/runner.hpp"
#include "moe/sdk/host_tensor.hpp"
#include "reference_layer.hpp"
#include "routing.hpp"

namespace {

using moe::HostTensor;
using moe::ProblemFile;
using moe::Scenario;
using namespace moe::reference;

// Relative noise on GEMM1's outputs. The H200 (session 31, fp8_block_bias_shared, T = 1, 49 fresh
// draws of the GPU plugins): median 2.65e-3, 3 draws over 1e-2, worst 2.3e-2. This model gives
// median 2.6e-3 and 7% over 1e-2 there at noise 3e-4, 1.7e-3 and 2.7% at 1e-4 (bench/NOTES.md,
// session 31). The test runs 1e-4: 3e-4 reaches 6-8e-2 on the smallest shapes, whose GPU runs
// have not been seen that far out.
constexpr double kSigma = 1e-4;
constexpr int kWeightDraws = 4;        // fresh weights per problem file
constexpr int kBatchesPerWeights = 8;  // one-token batches per scenario on each
constexpr uint64_t kSeed = 31;

// The reference's GEMMs, GEMM1's outputs then each moved by `sigma` relative noise, drawn from a
// stream per MLP (calls for different MLPs run concurrently; each MLP's GEMM1 runs once a run).
class NoisyGemms final : public ExpertGemms {
 public:
  NoisyGemms(const moe_problem& p, const std::vector<MlpRef>& mlps, double sigma)
      : exact_(mlps), problem_(p), sigma_(sigma) {}
  void reseed(uint64_t seed) { seed_ = seed; }  // between runs: each run draws fresh noise

  void gemm(MlpId id, Gemm g, const double* x, int64_t n, double* y) const override {
    exact_.gemm(id, g, x, n, y);
    if (g != Gemm::kW13) return;
    moe::Rng rng(
        moe::mix_seed(seed_, std::string(mlp_kind_name(id.kind)) + "/" + std::to_string(id.index)));
    const int64_t values = n * mlp_shape(problem_, id.kind).rows13;
    for (int64_t i = 0; i < values; ++i) y[i] *= 1.0 + sigma_ * rng.normal();
  }

 private:
  Fp64Gemms exact_;
  moe_problem problem_;
  double sigma_;
  uint64_t seed_ = 0;
};

moe::Routing reference_routing(const moe_problem& p, const moe::Batch& b, Scenario sc) {
  const int64_t tokens = b.hidden.shape()[0], width = p.top_k + p.sink_experts;
  moe::Routing r{HostTensor(MOE_DTYPE_I32, {tokens, width}),
                 HostTensor(MOE_DTYPE_F32, {tokens, width})};
  route(p, tokens, b.logits.data<float>(), b.bias.empty() ? nullptr : b.bias.data<float>(),
        b.is_padding.empty() ? nullptr : b.is_padding.data<uint8_t>(), r.ids.data<int32_t>(),
        r.weights.data<float>());
  return sc == Scenario::kOneExpert ? moe::one_expert_routing(p, r, moe::last_local_expert(p)) : r;
}

HostTensor run(const Layer& layer, const moe::Batch& b, const moe::Routing& r, moe_dtype out) {
  HostTensor output(out, {b.hidden.shape()[0], b.hidden.shape()[1]});
  moe_run_args a{};
  a.struct_size = sizeof(moe_run_args);
  a.hidden = b.hidden.view(), a.topk_ids = r.ids.view(), a.topk_weights = r.weights.view();
  a.output = output.view();
  layer.run(a);
  return output;
}

// Relative errors of the noisy layer against the exact one on batches of `tokens`, every scenario
// of the file. Fixed seeds: the model is a deterministic check, not a fresh draw each run.
std::vector<double> errors_at(const ProblemFile& pf, int64_t tokens, double sigma, int weight_draws,
                              int batches) {
  const moe_problem p = pf.problem.c();
  std::vector<double> errors;
  for (int w = 0; w < weight_draws; ++w) {
    const uint64_t seed = moe::mix_seed(kSeed, pf.name + "/weights/" + std::to_string(w));
    const moe::LayerWeights weights = moe::random_weights(p, seed);
    const moe_weights view = weights.view();
    const Layer exact(p, view);
    auto gemms = std::make_unique<NoisyGemms>(p, layer_mlps(p, view), sigma);
    NoisyGemms& noise = *gemms;
    const Layer noisy(p, view, std::move(gemms));
    for (int i = 0; i < batches; ++i) {
      const uint64_t batch_seed = moe::mix_seed(seed, "batch/" + std::to_string(i));
      for (const Scenario sc : pf.scenarios) {
        const uint64_t case_seed = moe::mix_seed(batch_seed, moe::scenario_name(sc));
        noise.reseed(case_seed);
        const moe::Batch b = moe::random_batch(p, tokens, case_seed, sc);
        const moe::Routing r = reference_routing(p, b, sc);
        errors.push_back(
            moe::relative_l2(run(noisy, b, r, MOE_DTYPE_BF16), run(exact, b, r, MOE_DTYPE_F64)));
      }
    }
  }
  return errors;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

// MOE_MARGIN_{SIGMA,TOKENS,WEIGHTS,BATCHES,ONLY} widen the study (bench/NOTES.md, session 31).
TEST(ToleranceMargin, FlippedCodesFitEveryRequantisingProblemsOneTokenBound) {
  const char* sigma_env = std::getenv("MOE_MARGIN_SIGMA");
  const double sigma = sigma_env ? std::atof(sigma_env) : kSigma;
  const int64_t tokens = env_int("MOE_MARGIN_TOKENS", 1);
  const int weight_draws = env_int("MOE_MARGIN_WEIGHTS", kWeightDraws);
  const int batches = env_int("MOE_MARGIN_BATCHES", kBatchesPerWeights);
  int checked = 0;
  for (const ProblemFile& pf : moe::load_problem_dir(moe::test::source_path("configs/problems"))) {
    if (pf.gpu_sized || pf.problem.c().input_format == MOE_INPUT_BF16) continue;
    if (const char* only = std::getenv("MOE_MARGIN_ONLY"); only && pf.name != only) continue;
    std::vector<double> e = errors_at(pf, tokens, sigma, weight_draws, batches);
    std::sort(e.begin(), e.end());
    const double bound = moe::case_tolerance(pf, tokens);
    const auto over = [&](double b) { return e.end() - std::upper_bound(e.begin(), e.end(), b); };
    ++checked;
    std::printf(
        "%-31s n=%zu median %.2e p99 %.2e worst %.2e over 1e-2: %td over 2e-2: %td bound %.0e\n",
        pf.name.c_str(), e.size(), e[e.size() / 2], e[e.size() * 99 / 100], e.back(), over(1e-2),
        over(2e-2), bound);
    EXPECT_LE(e.back(), bound) << pf.name << ": a correct plugin would fail it at T = " << tokens;
  }
  EXPECT_GE(checked, std::getenv("MOE_MARGIN_ONLY") ? 1 : 10)
      << "the problem set lost its re-quantising files";
}

}  // namespace
