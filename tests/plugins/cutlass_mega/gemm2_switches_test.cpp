// cutlass_mega's GEMM2 split and measurement switches on a GPU: GEMM2 split by the waves model
// (the default; MOE_MEGA_SPLIT2=waves / fit / fill) and GEMM2 started without the grid barrier
// after GEMM1 (MOE_MEGA_GEMM2=early): the barrier layer's bits batch after batch, on poisoned and
// on stale workspaces, replayed in a graph, on two streams at once, and the round robin the
// timeline shows. Skips without an sm_90 GPU.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../support/graph_replay.hpp"
#include "mega_layer_fixture.hpp"

namespace moe::test {
namespace {

// GEMM2's split past one wave (kernels/split.hpp k_split_waves; the default and
// MOE_MEGA_SPLIT2=waves): GEMM2's items split along K where the last wave would leave CTAs idle.
// 8 experts, H = 512 (4 slices), I = 4096 on 24 CTAs, 40 tokens: ~32 GEMM2 items, two waves,
// split into parts (bf16's 32 stages three, fp8_block's 16 two) that the timeline names, against
// the reference and bit for bit run after run; with MOE_MEGA_SPLIT2=fit no split (k_split: more
// items than CTAs).
TEST_F(MegaLayer, Gemm2SplitByWavesMatchesTheReference) {
  for (const moe_format f : {MOE_FORMAT_BF16, kFp8}) {
    Problem q = problem_;
    q.raw().experts = 8;
    q.raw().hidden = 512;
    q.raw().intermediate = 4096;
    q = in_format(q, f);
    const moe_problem p = q.c();
    const LayerWeights w = random_weights(p, 23);
    const Layer ref_layer = reference_->prepare(p, w.view(), {});
    const Options sms = {{"sms", "24"}};
    for (const char* value : {"", "waves", "fit"}) {
      const bool splits = std::string(value) != "fit";
      const std::string what = fmt::format("{}, {}", format_name(f), *value ? value : "default");
      EnvVars vars;
      if (*value != 0) vars.emplace_back("MOE_MEGA_SPLIT2", value);
      const nlohmann::json j = timeline_of(
          p, w, vars,
          [&](const Layer& layer) {
            expect_matches_and_repeats(layer, ref_layer, p, 40, 24, what);
          },
          sms);
      ASSERT_FALSE(j.is_null()) << what;
      ASSERT_FALSE(j["records"].empty()) << what;
      const int split2 = j["records"][0]["split2"].get<int>();
      if (splits)
        EXPECT_GE(split2, 2) << what;
      else
        EXPECT_EQ(split2, 1) << what;
    }
  }
}

// GEMM2's split within one wave (k_split_waves within_wave: the default, MOE_MEGA_SPLIT2=fill):
// 4 experts of top 4, H = 512 (4 slices), I = 4096 (32 bf16 stages) on 24 CTAs: 16 GEMM2 items
// fit one wave but two parts of each do not, so k_split leaves them whole and 8 CTAs idle; the
// default takes three parts (48 on two waves of a third). Against the reference, bit for bit run
// after run; MOE_MEGA_SPLIT2=waves and =fit: 1.
TEST_F(MegaLayer, Gemm2SplitWithinAWaveMatchesTheReference) {
  Problem q = problem_;
  q.raw().experts = 4;
  q.raw().top_k = 4;
  q.raw().hidden = 512;
  q.raw().intermediate = 4096;
  q.finalize();
  const moe_problem p = q.c();
  const LayerWeights w = random_weights(p, 29);
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  for (const auto& [value, split] :
       {std::pair<const char*, int>{"", 3}, {"fill", 3}, {"waves", 1}, {"fit", 1}}) {
    EnvVars vars;
    if (*value != 0) vars.emplace_back("MOE_MEGA_SPLIT2", value);
    const std::string what = *value != 0 ? value : "default";
    const nlohmann::json j = timeline_of(
        p, w, vars,
        [&](const Layer& layer) { expect_matches_and_repeats(layer, ref_layer, p, 40, 24, what); },
        {{"sms", "24"}});
    ASSERT_FALSE(j.is_null()) << what;
    ASSERT_FALSE(j["records"].empty()) << what;
    EXPECT_EQ(j["records"][0]["split2"].get<int>(), split) << what;
  }
}

// MOE_MEGA_GEMM2=early (a measurement, kernels/gemm2_ready.cuh): GEMM2's items wait on flags of
// their chunk's GEMM1 items instead of a grid barrier, and continue GEMM1's round robin. The same
// bits as the barrier's layer (the same sums in the same order), batch after batch on one layer,
// its workspace poisoned before each run (an intermediate row read before it is written is NaN),
// and then on the workspace the last run left: its flags and intermediate rows are a batch old,
// so a flag that still looked written (the run's tag unchanged) would let GEMM2 read the old rows;
// on every CTA and on 7
// (many GEMM1 waves: waits on chunks of other CTAs), with GEMM2 split along K
// (MOE_MEGA_SPLIT2=waves), padding tokens and every token on one expert (chunks of several
// slots' worth: 2 of 64 bf16 slots, 3 of 32 4-bit ones), a shared expert's virtual experts,
// relu2 (128 columns a GEMM1 item), bf16 by TMA tiles (MOE_MEGA_BF16_STAGE=64) and I = 1024, so
// GEMM2's items have more stages than the ring holds; then a CUDA graph replayed with new inputs.
// fp8_block and e4m3 activations keep their barriers (the switch does not apply there).
TEST_F(MegaLayer, EarlyGemm2GivesTheBarriersBitsBatchAfterBatchAndReplayed) {
  struct EarlyCase {
    moe_format format;
    int64_t shared = 0;
    moe_activation activation = MOE_ACTIVATION_SILU_MUL;
    const char* bf16_stage = nullptr;  // MOE_MEGA_BF16_STAGE
    moe_input_format input = MOE_INPUT_DEFAULT;
  };
  const EarlyCase cases[] = {{MOE_FORMAT_BF16},
                             {MOE_FORMAT_BF16, 384},
                             {MOE_FORMAT_BF16, 0, MOE_ACTIVATION_RELU2},
                             {MOE_FORMAT_BF16, 0, MOE_ACTIVATION_SILU_MUL, "64"},
                             {kMx},
                             {kNv},
                             {kFp8},
                             {kMx, 0, MOE_ACTIVATION_SILU_MUL, nullptr, kMx8}};
  for (const EarlyCase& c : cases) {
    Problem q = problem_;
    q.raw().intermediate = 1024;
    q.raw().shared_intermediate = c.shared;
    q.raw().activation = c.activation;
    const moe_problem p = in_format(q, c.format, c.input).c();
    const LayerWeights w = random_weights(p, 57);
    const Layer ref_layer = reference_->prepare(p, w.view(), {});
    for (const char* sms : {"auto", "7"}) {
      const Options o = {{"sms", sms}};
      const std::string what = fmt::format(
          "{}{}{}{}{}, sms {}", format_name(c.format), c.shared ? " with a shared expert" : "",
          c.activation == MOE_ACTIVATION_RELU2 ? " relu2" : "", c.bf16_stage ? " by TMA tiles" : "",
          c.input == kMx8 ? " on mxfp8" : "", sms);
      EnvVars base;
      if (c.bf16_stage != nullptr) base.emplace_back("MOE_MEGA_BF16_STAGE", c.bf16_stage);
      EnvVars early_vars = base, split_vars = base;
      early_vars.emplace_back("MOE_MEGA_GEMM2", "early");
      split_vars.emplace_back("MOE_MEGA_SPLIT2", "waves");
      EnvVars both_vars = split_vars;
      both_vars.emplace_back("MOE_MEGA_GEMM2", "early");
      const Layer barrier = prepared_with(p, w, base, o);
      const Layer early = prepared_with(p, w, early_vars, o);
      const Layer barrier_split = prepared_with(p, w, split_vars, o);
      const Layer early_split = prepared_with(p, w, both_vars, o);
      expect_same_bits_on_any_workspace(
          p, {{early, barrier, ""}, {early_split, barrier_split, ", split"}},
          {96, 1, 40, 1, 96, 65, 7}, 500, what);
      expect_matches_and_repeats(early, ref_layer, p, 96, 77, what);
      const GraphReplay graph(plugin_, early, p, 41);
      for (uint64_t seed : {61u, 62u, 63u}) {
        const Batch batch = random_batch(p, 41, seed, Scenario::kRandom);
        EXPECT_LT(graph.error_against(ref_layer, *reference_, p, batch), tolerance(p))
            << what << ", replayed, seed " << seed;
      }
    }
  }
}

// The switch is on where it applies: with MOE_MEGA_GEMM2=early each CTA's first GEMM2 item is the
// one GEMM1's round robin would have given it next (the timeline's items), not its own index.
TEST_F(MegaLayer, EarlyGemm2ContinuesGemm1sRoundRobin) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 59);
  const Batch batch = random_batch(p, 40, 3, Scenario::kRandom);
  const Routing routing = route_batch(*reference_, p, batch);
  for (const bool early : {true, false}) {
    EnvVars vars;
    if (early) vars.emplace_back("MOE_MEGA_GEMM2", "early");
    const nlohmann::json j = timeline_of(
        p, w, vars,
        [&](const Layer& layer) { run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16); },
        {{"sms", "7"}});
    ASSERT_FALSE(j.is_null());
    const int ctas = int(j["records"].size());
    ASSERT_EQ(ctas, 7);
    int items1 = 0;
    for (const auto& r : j["records"])
      for (const auto& it : r["items"]) items1 += it["phase"].get<int>() == 1 ? 1 : 0;
    ASSERT_NE(items1 % ctas, 0) << "the batch should leave GEMM1's last wave short";
    for (int c = 0; c < ctas; ++c) {
      for (const auto& it : j["records"][c]["items"]) {
        if (it["phase"].get<int>() != 2) continue;
        const int want = early ? (c + ctas - items1 % ctas) % ctas : c;
        EXPECT_EQ(it["u"].get<int>(), want) << (early ? "early" : "barrier") << ", CTA " << c;
        break;
      }
    }
  }
}

// MOE_MEGA_GEMM2=early with runs at once: one layer on two streams, 7 CTAs each (so both grids are
// resident together), each stream its own batch and workspace, 16 runs each queued before any
// sync. Every CTA of a launch must agree on the launch's tag while the other stream's launches
// start and end (a tag read from shared state that another run moves would split one launch's
// CTAs, and a GEMM2 wait would never end: a trap); each output keeps the barrier layer's bits.
TEST_F(MegaLayer, EarlyGemm2RunsAtOnceOnTwoStreamsGiveTheBarriersBits) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 71);
  const Options o = {{"sms", "7"}};
  const Layer early = prepared_with(p, w, {{"MOE_MEGA_GEMM2", "early"}}, o);
  const Layer barrier = prepared_with(p, w, {}, o);
  cudaStream_t streams[2] = {};
  for (cudaStream_t& st : streams)
    ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  std::vector<Batch> batches;
  std::vector<Routing> routings;
  std::vector<StagedRun> staged;
  for (int i = 0; i < 2; ++i) {
    batches.push_back(random_batch(p, 40 + 17 * i, 80 + uint64_t(i), Scenario::kRandom));
    routings.push_back(route_batch(*reference_, p, batches.back()));
  }
  for (int i = 0; i < 2; ++i) {
    staged.push_back(stage_run(early, p, batches[size_t(i)].hidden, routings[size_t(i)]));
    staged.back().args.stream = streams[i];
  }
  for (int round = 0; round < 16; ++round)
    for (const StagedRun& r : staged) early.run(r.args);
  for (cudaStream_t st : streams) EXPECT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  for (int i = 0; i < 2; ++i) {
    const HostTensor& hidden = batches[size_t(i)].hidden;
    HostTensor got(MOE_DTYPE_BF16, {hidden.shape()[0], p.hidden});
    staged[size_t(i)].output.download(got.raw(), got.bytes());
    const RunResult want = run_layer(barrier, p, hidden, routings[size_t(i)]);
    EXPECT_EQ(std::memcmp(got.raw(), want.output.raw(), got.bytes()), 0) << "stream " << i;
  }
  for (cudaStream_t st : streams) cudaStreamDestroy(st);
}

// A switch's value it does not know, or a MOE_MEGA_ name that is no switch, is refused at prepare
// through the ABI (src/switches.hpp), not run as the default.
TEST_F(MegaLayer, AnUnknownSwitchOrValueIsRefusedAtPrepare) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 73);
  expect_error(
      [&] {
        prepared_with(p, w, {{"MOE_MEGA_GEMM2", "Early"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"MOE_MEGA_GEMM2=\"Early\"", "it takes early"});
  expect_error(
      [&] {
        prepared_with(p, w, {{"MOE_MEGA_GEMM", "early"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"MOE_MEGA_GEMM=early", "not a cutlass_mega switch"});
  EXPECT_EQ(std::getenv("MOE_MEGA_GEMM2"),
            nullptr);  // prepared_with left the environment as it was
}

}  // namespace
}  // namespace moe::test
