// cutlass_mega's GPU test fixture: the plugin and the reference loaded, a small problem (16
// experts, top-4, H = I = 256, 96 tokens), layers prepared under measurement switches, their
// timelines, and the comparisons the fused layer's tests share (layer_test.cpp,
// gemm2_switches_test.cpp).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "../../support/plugin_fixture.hpp"
#include "../../support/scoped_env.hpp"
#include "moe/conformance.hpp"

namespace moe::test {

class MegaLayer : public PluginAndReference<> {
 protected:
  void SetUp() override {
    load("cutlass_mega", "no CUDA");
    if (IsSkipped() || HasFatalFailure()) return;
    problem_.raw().experts = 16;
    problem_.raw().top_k = 4;
    problem_.raw().hidden = 256;
    problem_.raw().intermediate = 256;
    problem_.raw().max_tokens = 96;
    problem_.finalize();
    const Support s = plugin_->supports(problem_.c());
    if (!s.supported) GTEST_SKIP() << "cutlass_mega: " << s.message;
  }

  Problem problem_;

  using EnvVars = std::vector<std::pair<const char*, const char*>>;

  // A layer of `p` prepared with each variable of `vars` set to its value (the measurement
  // switches are read at prepare) and `options`, the environment as it was afterwards (a refused
  // prepare included).
  Layer prepared_with(const moe_problem& p, const LayerWeights& w, const EnvVars& vars,
                      const Options& options = {}) {
    std::vector<std::unique_ptr<ScopedEnv>> set;  // undone when prepare returns or throws
    for (const auto& [name, value] : vars) set.push_back(std::make_unique<ScopedEnv>(name, value));
    return plugin_->prepare(p, w.view(), options);
  }

  // The timeline (MOE_MEGA_TIMELINE) a layer of `p` prepared with `vars` writes when destroyed,
  // after `use(layer)`: null, with a failure, if it was not written.
  template <class Use>
  nlohmann::json timeline_of(const moe_problem& p, const LayerWeights& w, EnvVars vars, Use use,
                             const Options& options = {}) {
    const std::string path = testing::TempDir() + "mega_timeline.json";
    std::remove(path.c_str());
    vars.emplace_back("MOE_MEGA_TIMELINE", path.c_str());
    use(prepared_with(p, w, vars, options));
    std::ifstream in(path);
    if (!in.good()) {
      ADD_FAILURE() << path << " was not written";
      return nullptr;
    }
    const nlohmann::json j = nlohmann::json::parse(in);
    std::remove(path.c_str());
    return j;
  }

  // `layer` gives the very same output bits as `base` on one batch and routing.
  void expect_same_bits(const Layer& base, const Layer& layer, const moe_problem& p,
                        const Batch& batch, const Routing& routing, const std::string& what) {
    const RunResult a = run_layer(base, p, batch.hidden, routing, MOE_DTYPE_BF16);
    const RunResult b = run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16);
    EXPECT_EQ(std::memcmp(a.output.raw(), b.output.raw(), a.output.bytes()), 0) << what;
  }

  // `layer`'s bf16 output of one batch on a workspace whose every byte is 0xFF (the runner
  // poisons only the output): what the layer reads before it writes is garbage.
  HostTensor run_on_poisoned_workspace(const Layer& layer, const moe_problem& p, const Batch& batch,
                                       const Routing& routing) {
    const StagedRun staged = stage_run(layer, p, batch.hidden, routing, MOE_DTYPE_BF16);
    const std::vector<uint8_t> poison(staged.workspace.size(), 0xFF);
    staged.workspace.upload(poison.data(), poison.size());
    HostTensor out(MOE_DTYPE_BF16, {batch.hidden.shape()[0], p.hidden});
    layer.run(staged.args);
    layer.plugin().sync();
    staged.output.download(out.raw(), out.bytes());
    return out;
  }

  // `layer`'s bf16 output of `second` on the workspace a run of `first` (same token count) left,
  // poisoned before `first` only: what a run leaves behind must not pass for the next run's.
  HostTensor run_on_stale_workspace(const Layer& layer, const moe_problem& p, const Batch& first,
                                    const Routing& first_routing, const Batch& second,
                                    const Routing& second_routing) {
    const StagedRun a = stage_run(layer, p, first.hidden, first_routing, MOE_DTYPE_BF16);
    const std::vector<uint8_t> poison(a.workspace.size(), 0xFF);
    a.workspace.upload(poison.data(), poison.size());
    layer.run(a.args);
    StagedRun b = stage_run(layer, p, second.hidden, second_routing, MOE_DTYPE_BF16);
    b.args.workspace = a.args.workspace;
    b.args.workspace_size = a.args.workspace_size;
    HostTensor out(MOE_DTYPE_BF16, {second.hidden.shape()[0], p.hidden});
    layer.run(b.args);
    layer.plugin().sync();
    b.output.download(out.raw(), out.bytes());
    return out;
  }

  // A layer under test and the layer whose bits it must give.
  struct LayerPair {
    const Layer& got;
    const Layer& want;
    const char* name;  // appended to the failure's description
  };

  // Each pair's `got` gives its `want`'s very bits, batch after batch of each token count in every
  // scenario (random, padding, one expert): on a poisoned workspace, and on the workspace its own
  // run of the last batch left. Batch seeds from `seed`, the next batch's from seed + 400.
  void expect_same_bits_on_any_workspace(const moe_problem& p,
                                         std::initializer_list<LayerPair> pairs,
                                         std::initializer_list<int64_t> token_counts, uint64_t seed,
                                         const std::string& what);

  // A random batch of `tokens` run twice on `layer`: within the format's tolerance of the
  // reference and the same bits both times.
  void expect_matches_and_repeats(const Layer& layer, const Layer& ref_layer, const moe_problem& p,
                                  int64_t tokens, uint64_t seed, const std::string& what);
};

// fp8_block weights with the activations quantised per token per 128 channels (the format's own
// input); bf16, mxfp4 and nvfp4 weights with bf16 activations, or `input` where given (4-bit
// weights on e4m3 activations).
inline Problem in_format(Problem q, moe_format f, moe_input_format input = MOE_INPUT_DEFAULT) {
  q.raw().format = f;
  q.raw().input_format = input != MOE_INPUT_DEFAULT  ? input
                         : f == MOE_FORMAT_FP8_BLOCK ? MOE_INPUT_FP8_1X128
                                                     : MOE_INPUT_BF16;
  q.finalize();
  return q;
}

// Two sink experts of `intermediate` each, routed as Inkling routes them (sigmoid with bias,
// log-sigmoid renormalised with the sinks); finalize() is the caller's.
inline void add_sinks(Problem& q, int64_t intermediate) {
  q.raw().sink_experts = 2;
  q.raw().sink_intermediate = intermediate;
  q.raw().routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  q.raw().routing_bias = 1;
}

// docs/design.md §7: one e4m3 code of an activation is several percent.
inline double tolerance(const moe_problem& p) {
  return p.format == MOE_FORMAT_BF16 ? 1e-2 : 2e-2;
}

// A batch of `tokens` as the conformance judges it (moe::case_tolerance): at one token of a
// problem that re-quantises its intermediate, one code moved across a rounding boundary by the
// GEMM's own rounding is the whole comparison, so kOneTokenFlipFactor times the bound.
inline double tolerance(const moe_problem& p, int64_t tokens) {
  const bool requantises = p.input_format != MOE_INPUT_BF16;
  return tolerance(p) * (requantises && tokens == 1 ? kOneTokenFlipFactor : 1.0);
}

inline void MegaLayer::expect_matches_and_repeats(const Layer& layer, const Layer& ref_layer,
                                                  const moe_problem& p, int64_t tokens,
                                                  uint64_t seed, const std::string& what) {
  const Batch batch = random_batch(p, tokens, seed, Scenario::kRandom);
  const Routing routing = route_batch(*reference_, p, batch);
  const RunResult a = run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16);
  const RunResult b = run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16);
  const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
  EXPECT_LT(relative_l2(a.output, ref.output), tolerance(p, tokens))
      << what << ", " << tokens << " tokens";
  EXPECT_EQ(std::memcmp(a.output.raw(), b.output.raw(), a.output.bytes()), 0)
      << what << ": two runs differ at " << tokens << " tokens";
}

inline void MegaLayer::expect_same_bits_on_any_workspace(
    const moe_problem& p, std::initializer_list<LayerPair> pairs,
    std::initializer_list<int64_t> token_counts, uint64_t seed, const std::string& what) {
  int round = 0;
  for (const int64_t tokens : token_counts) {
    for (const Scenario sc : {Scenario::kRandom, Scenario::kPadding, Scenario::kOneExpert}) {
      const Batch batch = random_batch(p, tokens, seed + uint64_t(round++), sc);
      const Routing routing = scenario_routing(*reference_, p, batch, sc);
      const Batch next = random_batch(p, tokens, seed + 400 + uint64_t(round), sc);
      const Routing next_routing = scenario_routing(*reference_, p, next, sc);
      const std::string at = fmt::format("{}: {} tokens, {}", what, tokens, scenario_name(sc));
      for (const LayerPair& pair : pairs) {
        const HostTensor got = run_on_poisoned_workspace(pair.got, p, batch, routing);
        const RunResult want = run_layer(pair.want, p, batch.hidden, routing);
        EXPECT_EQ(std::memcmp(got.raw(), want.output.raw(), got.bytes()), 0) << at << pair.name;
        const HostTensor again =
            run_on_stale_workspace(pair.got, p, batch, routing, next, next_routing);
        const RunResult want_next = run_layer(pair.want, p, next.hidden, next_routing);
        EXPECT_EQ(std::memcmp(again.raw(), want_next.output.raw(), again.bytes()), 0)
            << at << pair.name << ", on the last run's workspace";
      }
    }
  }
}

constexpr moe_input_format kMx8 = MOE_INPUT_MXFP8;
constexpr moe_input_format kStatic = MOE_INPUT_FP8_TENSOR_STATIC;
constexpr moe_input_format kDynamic = MOE_INPUT_FP8_TENSOR_DYNAMIC;

constexpr moe_format kFp8 = MOE_FORMAT_FP8_BLOCK;
constexpr moe_format kMx = MOE_FORMAT_MXFP4;
constexpr moe_format kNv = MOE_FORMAT_NVFP4;

}  // namespace moe::test
