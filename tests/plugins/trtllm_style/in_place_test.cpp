// trtllm_style bf16 layers prepared for CUTLASS's GEMMs (a max_tokens batch of many rows an
// expert, bf16_gemm: auto) that run their small batches on the weight-only GEMM reading
// TensorRT-LLM's interleaved rows in place (docs/design.md §6), on a GPU through the C ABI:
// against the fp64 reference at batches on both sides of the switch, bit for bit the same as a
// layer prepared as the weight-only GEMM's own tiles (bf16_gemm: own) on the same batch, every
// activation form, biases, a shared expert; captured in a CUDA graph and replayed. Skips without
// an sm_90 GPU.
#include <cuda_runtime_api.h>

#include <cstring>
#include <ostream>

#include "../../support/graph_replay.hpp"
#include "trtllm_gpu_fixture.hpp"

namespace moe::test {
namespace {

struct InPlaceCase {
  moe_activation activation;
  int64_t shared;  // shared_intermediate, 0: none
  bool bias;
  int64_t hidden, intermediate;
};

void PrintTo(const InPlaceCase& c, std::ostream* os) {
  *os << activation_name(c.activation) << " shared=" << c.shared << " bias=" << c.bias
      << " H=" << c.hidden << " I=" << c.intermediate;
}

// E = 16, k = 4 with max_tokens 1024 (256 rows an expert: CUTLASS's layout): batches of at most
// 128 rows a group on average run in place (512 tokens, 435 with a shared expert, which takes
// every token), larger ones on CUTLASS's GEMMs.
constexpr int64_t kMaxTokens = 1024;

class TrtllmInPlace : public TrtllmGpuTest<testing::TestWithParam<InPlaceCase>> {
 protected:
  static Problem problem(const InPlaceCase& c, int64_t max_tokens) {
    return trtllm_problem({MOE_FORMAT_BF16, MOE_INPUT_BF16, c.activation, c.shared, c.bias,
                           c.hidden, c.intermediate, max_tokens});
  }
};

TEST_P(TrtllmInPlace, MatchesTheReferenceOnBothSidesOfTheSwitch) {
  const InPlaceCase c = GetParam();
  const Problem q = problem(c, kMaxTokens);
  const moe_problem p = q.c();
  const Support s = plugin_->supports(p);
  if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
  const std::string layout = plugin_->describe_layout(p).value_or("");
  ASSERT_THAT(layout, testing::HasSubstr("in place")) << layout;
  const LayerWeights w = random_weights(p, 61);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  // 1, 37 and 400 tokens in place, 600 and 1000 on CUTLASS's GEMMs.
  expect_matches_reference(layer, ref_layer, *reference_, p, {1, 37, 400, 600, 1000}, 71, 1e-2);
}

// In place, the weight-only GEMM reads TensorRT-LLM's rows as the tiles bf16_gemm: own prepares:
// the same products in the same order, so the same bits.
TEST_P(TrtllmInPlace, GivesTheBitsOfTheWeightOnlyGemmsOwnTiles) {
  const InPlaceCase c = GetParam();
  const Problem q = problem(c, kMaxTokens);
  const moe_problem p = q.c();
  const Support s = plugin_->supports(p);
  if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
  const LayerWeights w = random_weights(p, 62);
  const Layer in_place = plugin_->prepare(p, w.view(), {});
  const Layer tiles = plugin_->prepare(p, w.view(), {{"bf16_gemm", "own"}});
  for (int64_t tokens : {1, 8, 100, 400})
    for (Scenario scenario : {Scenario::kRandom, Scenario::kPadding, Scenario::kOneExpert}) {
      const Batch batch = random_batch(p, tokens, 72 + uint64_t(tokens), scenario);
      const Routing routing = route_batch(*reference_, p, batch);
      const RunResult a = run_layer(in_place, p, batch.hidden, routing, MOE_DTYPE_BF16);
      const RunResult b = run_layer(tiles, p, batch.hidden, routing, MOE_DTYPE_BF16);
      ASSERT_EQ(a.output.bytes(), b.output.bytes());
      EXPECT_EQ(std::memcmp(a.output.raw(), b.output.raw(), a.output.bytes()), 0)
          << tokens << " tokens, scenario " << int(scenario);
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, TrtllmInPlace,
                         testing::Values(InPlaceCase{MOE_ACTIVATION_SILU_MUL, 0, false, 256, 256},
                                         InPlaceCase{MOE_ACTIVATION_SWIGLU_OAI, 0, true, 384, 192},
                                         InPlaceCase{MOE_ACTIVATION_GELU_MUL, 128, false, 256, 128},
                                         InPlaceCase{MOE_ACTIVATION_SILU_MUL_CLAMP, 0, true, 128,
                                                     64},
                                         InPlaceCase{MOE_ACTIVATION_RELU2, 0, true, 256, 256},
                                         InPlaceCase{MOE_ACTIVATION_SILU_MUL, 256, true, 512, 256}),
                         [](const testing::TestParamInfo<InPlaceCase>& info) {
                           const InPlaceCase& c = info.param;
                           return fmt::format(
                               "{}{}{}_h{}_i{}", activation_name(c.activation),
                               c.shared > 0 ? fmt::format("_shared{}", c.shared) : std::string(),
                               c.bias ? "_bias" : "", c.hidden, c.intermediate);
                         });

// A capture at an in-place batch size (a graph holds one), replayed with new batches and routing.
TEST_F(TrtllmInPlace, ReplaysInACudaGraph) {
  const Problem q = problem({MOE_ACTIVATION_SILU_MUL, 128, true, 256, 128}, kMaxTokens);
  const moe_problem p = q.c();
  const Support s = plugin_->supports(p);
  if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
  const LayerWeights w = random_weights(p, 63);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  const GraphReplay graph(plugin_, layer, p, 37);
  for (uint64_t seed : {35u, 36u}) {
    const Batch batch = random_batch(p, 37, seed, Scenario::kRandom);
    EXPECT_LT(graph.error_against(ref_layer, *reference_, p, batch), 1e-2) << "seed " << seed;
  }
}

}  // namespace
}  // namespace moe::test
