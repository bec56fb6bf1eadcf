// cutlass_mega's GEMM1 tail split (MOE_MEGA_SPLIT1=tail, a measurement, kernels/split.hpp
// tail_split): the items of GEMM1's short last wave run as K parts over the CTAs, each part's rows
// to the workspace, added in part order after a grid barrier by the item's CTA, which then applies
// the bias and activation. 16 experts, top-4, H = 1024, I = 256 on 14 CTAs: at one token 16 items
// (4 experts x 4 slices), a wave of 14 and a tail of 2 in parts; on 64 CTAs all 16 in parts. Every
// format, 4-bit weights on quantised activations too (mxfp8, e4m3 per tensor from the batch's
// amax), expert biases: against the reference, the same bits run after run, replayed in a graph;
// the timeline shows items computed in parts. Skips without an sm_90 GPU.
#include <set>
#include <string>
#include <utility>

#include "../../support/graph_replay.hpp"
#include "mega_layer_fixture.hpp"
#include "moe/sdk/enum_names.hpp"
#include "moe/sdk/formats.hpp"

namespace moe::test {
namespace {

TEST_F(MegaLayer, Gemm1TailSplitMatchesTheReference) {
  const Options sms = {{"sms", "14"}};
  const EnvVars tail = {{"MOE_MEGA_SPLIT1", "tail"}};
  for (const auto& [f, input] :
       {std::pair{MOE_FORMAT_BF16, MOE_INPUT_DEFAULT}, std::pair{kFp8, MOE_INPUT_DEFAULT},
        std::pair{kMx, MOE_INPUT_DEFAULT}, std::pair{kNv, MOE_INPUT_FP8_TENSOR_DYNAMIC},
        std::pair{kMx, MOE_INPUT_MXFP8}}) {
    Problem q = problem_;
    q.raw().hidden = 1024;
    q.raw().expert_bias = f == MOE_FORMAT_BF16 ? 1 : 0;
    q = in_format(q, f, input);
    const moe_problem p = q.c();
    const std::string what =
        fmt::format("{} on {} activations", format_name(f),
                    input_format_name(static_cast<moe_input_format>(p.input_format)));
    const LayerWeights w = random_weights(p, 29);
    const Layer ref_layer = reference_->prepare(p, w.view(), {});
    // One token, 16 items: on 14 CTAs a whole wave and a tail of 2 in parts; on 64 CTAs no whole
    // wave, every CTA's first unit a part (its stages prefetched where the format prefetches
    // before GEMM1). The timeline shows the parts (kTimelineGemm1Part stamps, u = item << 8 |
    // stages) beside the whole items; without the switch, whole items only.
    for (const auto& [ctas, split] :
         {std::pair{"14", true}, std::pair{"64", true}, std::pair{"14", false}}) {
      const Options on = {{"sms", ctas}};
      const std::string at = fmt::format("{}, {} CTAs{}", what, ctas, split ? "" : ", no split");
      const nlohmann::json j = timeline_of(
          p, w, split ? tail : EnvVars{},
          [&](const Layer& layer) {
            expect_matches_and_repeats(layer, ref_layer, p, 1, 31, at + ", 1 token");
          },
          on);
      ASSERT_FALSE(j.is_null()) << at;
      std::set<int> whole, in_parts;
      int parts = 0;
      for (const auto& r : j["records"])
        for (const auto& item : r["items"]) {
          const int u = item["u"].get<int>();
          if (item["phase"] == 1) whole.insert(u);
          if (item["phase"] == 3) in_parts.insert(u >> 8), ++parts;
        }
      EXPECT_EQ(whole.size() + in_parts.size(), 16u) << at;
      if (split)
        EXPECT_GT(parts, int(in_parts.size())) << at << ": no item was computed in parts";
      else
        EXPECT_EQ(parts, 0) << at;
    }
    const Layer layer = prepared_with(p, w, tail, sms);
    for (int64_t tokens : {2, 5, 40, 96})
      expect_matches_and_repeats(layer, ref_layer, p, tokens, 32 + uint64_t(tokens),
                                 fmt::format("{}, {} tokens", what, tokens));
    const GraphReplay graph(plugin_, layer, p, 1);
    for (uint64_t seed : {33u, 34u}) {
      const Batch batch = random_batch(p, 1, seed, Scenario::kRandom);
      EXPECT_LT(graph.error_against(ref_layer, *reference_, p, batch), tolerance(p))
          << what << ", replayed, seed " << seed;
    }
  }
}

}  // namespace
}  // namespace moe::test
