// cutlass_mega's MOE_MEGA_COMBINE=last on a GPU (Params::combine_counts): each output slice is
// combined by the CTA whose GEMM2 item finishes it last, with no grid barrier before the combine.
// The barrier layer's bits (the same sums in the same order), on poisoned and on stale workspaces
// (the counts are zeroed in the launch), with GEMM2 split along K, padding tokens, every token on
// one expert, every slot idle, a shared expert, sinks in a second launch and e4m3 activations; then
// replayed in a graph. Skips without an sm_90 GPU.
#include <cstring>
#include <string>
#include <vector>

#include "../../support/graph_replay.hpp"
#include "mega_layer_fixture.hpp"

namespace moe::test {
namespace {

struct CombineCase {
  moe_format format;
  int64_t hidden = 256;  // 2 output slices; 1024: 8
  int64_t shared = 0;
  int64_t sinks = 0;  // sink_intermediate of two sinks (their second launch combines too)
  moe_input_format input = MOE_INPUT_DEFAULT;
};

Problem with_case(const Problem& base, const CombineCase& c) {
  Problem q = base;
  q.raw().hidden = c.hidden;
  q.raw().intermediate = 1024;  // GEMM2 items of 4 to 8 stages: split along K at few tokens
  q.raw().shared_intermediate = c.shared;
  if (c.sinks > 0) add_sinks(q, c.sinks);
  q.finalize();
  return in_format(q, c.format, c.input);
}

// `routing` with every routed id -1 (weight 0): no slot runs, GEMM2 has no item.
Routing all_idle(Routing r, const moe_problem& p) {
  const int64_t width = p.top_k + p.sink_experts;
  for (int64_t t = 0; t < r.ids.shape()[0]; ++t)
    for (int64_t j = 0; j < p.top_k; ++j) {
      r.ids.data<int32_t>()[t * width + j] = -1;
      r.weights.data<float>()[t * width + j] = 0.0f;
    }
  return r;
}

TEST_F(MegaLayer, CombineByEachSlicesLastItemGivesTheBarriersBits) {
  const CombineCase cases[] = {{MOE_FORMAT_BF16},
                               {MOE_FORMAT_BF16, 1024},
                               {MOE_FORMAT_BF16, 256, 384},
                               {kFp8},
                               {kFp8, 1024, 0, 384},
                               {kMx},
                               {kNv, 1024},
                               {kMx, 256, 0, 0, kMx8},
                               {kNv, 256, 0, 0, kDynamic}};
  for (const CombineCase& c : cases) {
    const moe_problem p = with_case(problem_, c).c();
    const LayerWeights w = random_weights(p, 31);
    const Layer ref_layer = reference_->prepare(p, w.view(), {});
    for (const char* sms : {"auto", "7"}) {
      const Options o = {{"sms", sms}};
      const std::string what =
          fmt::format("{}{}, H {}{}{}, sms {}", format_name(c.format),
                      c.input != MOE_INPUT_DEFAULT ? " on e4m3" : "", c.hidden,
                      c.shared ? ", a shared expert" : "", c.sinks ? ", sinks" : "", sms);
      const Layer barrier = prepared_with(p, w, {}, o);
      const Layer last = prepared_with(p, w, {{"MOE_MEGA_COMBINE", "last"}}, o);
      const Layer barrier_split = prepared_with(p, w, {{"MOE_MEGA_SPLIT2", "waves"}}, o);
      const Layer last_split =
          prepared_with(p, w, {{"MOE_MEGA_COMBINE", "last"}, {"MOE_MEGA_SPLIT2", "waves"}}, o);
      expect_same_bits_on_any_workspace(
          p, {{last, barrier, ""}, {last_split, barrier_split, ", split"}}, {1, 40, 7, 96}, 300,
          what);
      // No routed slot runs: no GEMM2 item ends a slice, so the combine runs without one.
      const Batch idle = random_batch(p, 5, 41, Scenario::kRandom);
      const Routing idle_routing = all_idle(route_batch(*reference_, p, idle), p);
      const HostTensor got = run_on_poisoned_workspace(last, p, idle, idle_routing);
      const RunResult want = run_layer(barrier, p, idle.hidden, idle_routing);
      EXPECT_EQ(std::memcmp(got.raw(), want.output.raw(), got.bytes()), 0)
          << what << ": every slot idle";
      expect_matches_and_repeats(last, ref_layer, p, 96, 77, what);
      const GraphReplay graph(plugin_, last, p, 41);
      for (uint64_t seed : {61u, 62u}) {
        const Batch batch = random_batch(p, 41, seed, Scenario::kRandom);
        EXPECT_LT(graph.error_against(ref_layer, *reference_, p, batch), tolerance(p))
            << what << ", replayed, seed " << seed;
      }
    }
  }
}

// The split the test above relies on: at one token GEMM2's few items are split along K, and the
// slice's last part combines every part (the timeline's split2), the barrier's bits.
TEST_F(MegaLayer, CombineByTheLastItemAddsEveryKPart) {
  const moe_problem p = with_case(problem_, {MOE_FORMAT_BF16}).c();
  const LayerWeights w = random_weights(p, 35);
  const Batch batch = random_batch(p, 1, 37, Scenario::kRandom);
  const Routing routing = route_batch(*reference_, p, batch);
  const Layer barrier = prepared_with(p, w, {});
  const nlohmann::json j = timeline_of(
      p, w, {{"MOE_MEGA_COMBINE", "last"}},
      [&](const Layer& last) { expect_same_bits(barrier, last, p, batch, routing, "one token"); });
  ASSERT_FALSE(j.is_null());
  ASSERT_FALSE(j["records"].empty());
  EXPECT_GE(j["records"][0]["split2"].get<int>(), 2);
}

// What the switch cannot do is refused at prepare, naming why: with MOE_MEGA_GEMM2=early there is
// no grid barrier before GEMM2 to zero the counts behind; above H = 16384 a CTA's pending bits
// (128 slices of 128 columns) do not cover the output.
TEST_F(MegaLayer, CombineByTheLastItemRefusesWhatItCannotCover) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 33);
  expect_error(
      [&] {
        prepared_with(p, w, {{"MOE_MEGA_COMBINE", "last"}, {"MOE_MEGA_GEMM2", "early"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"MOE_MEGA_COMBINE=last", "MOE_MEGA_GEMM2=early"});
  Problem wide = problem_;
  wide.raw().experts = 4;
  wide.raw().hidden = 16384 + 128;
  wide.raw().max_tokens = 8;
  wide.finalize();
  const moe_problem q = wide.c();
  const LayerWeights ww = random_weights(q, 34);
  expect_error(
      [&] {
        prepared_with(q, ww, {{"MOE_MEGA_COMBINE", "last"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"hidden sizes up to 16384", "this layer's is 16512"});
  prepared_with(q, ww, {});  // the same layer without the switch prepares
}

}  // namespace
}  // namespace moe::test
