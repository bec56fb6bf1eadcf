// trtllm_style's fp8_block layer on a GPU, through the C ABI: the TensorRT-LLM layout (padded I,
// w31 halves, floored scales) read by common_cuda's blockwise GEMMs, against the fp64 reference
// within the fp8 tolerance (docs/design.md §7): both tile shapes, every activation form, biases,
// a shared expert, padding tokens and one expert taking every token; captured in a CUDA graph
// and replayed with new inputs; options that do not apply are config errors. Skips without an
// sm_90 GPU.
#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>
#include <string>

#include "../../support/graph_replay.hpp"
#include "../../support/scoped_env.hpp"
#include "moe/sdk/formats.hpp"
#include "trtllm_gpu_fixture.hpp"

namespace moe::test {
namespace {

struct BlockCase {
  const char* tiles;
  bool shared, bias;
  moe_activation activation;
};

class TrtllmFp8Block : public TrtllmGpuTest<testing::TestWithParam<BlockCase>> {
 protected:
  // E=16 k=4 H=384 I=256 (H not a power of two: three K blocks), fp8_1x128 activations.
  Problem problem(const BlockCase& c) const {
    return trtllm_problem({MOE_FORMAT_FP8_BLOCK, MOE_INPUT_FP8_1X128, c.activation,
                           c.shared ? 256 : 0, c.bias, 384, 256, 64});
  }
};

TEST_P(TrtllmFp8Block, MatchesTheReference) {
  const BlockCase c = GetParam();
  const Problem q = problem(c);
  const moe_problem p = q.c();
  const Support s = plugin_->supports(p);
  if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
  const LayerWeights w = random_weights(p, 41);
  const Layer layer = plugin_->prepare(p, w.view(), {{"gemm_tiles", c.tiles}});
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  expect_matches_reference(layer, ref_layer, *reference_, p, {1, 5, 37, 64}, 90, 2e-2);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TrtllmFp8Block,
    testing::Values(BlockCase{"tokens", false, false, MOE_ACTIVATION_SILU_MUL},
                    BlockCase{"weights", false, false, MOE_ACTIVATION_SILU_MUL},
                    BlockCase{"auto", true, true, MOE_ACTIVATION_SILU_MUL},
                    BlockCase{"tokens", true, true, MOE_ACTIVATION_SWIGLU_OAI},
                    BlockCase{"weights", false, true, MOE_ACTIVATION_SILU_MUL_CLAMP},
                    BlockCase{"tokens", false, false, MOE_ACTIVATION_GELU_MUL},
                    BlockCase{"weights", true, false, MOE_ACTIVATION_RELU2}),
    [](const testing::TestParamInfo<BlockCase>& info) {
      const BlockCase& c = info.param;
      return fmt::format("{}{}{}_{}", activation_name(c.activation), c.shared ? "_shared" : "",
                         c.bias ? "_bias" : "", c.tiles);
    });

// One run captured in a CUDA graph, replayed with new batches and routing over the same buffers:
// the 1x128 scales are computed on the device each time, so a second batch 128x larger than the
// first still matches.
TEST_F(TrtllmFp8Block, ReplaysInACudaGraph) {
  const Problem q = problem({"auto", true, false, MOE_ACTIVATION_SILU_MUL});
  const moe_problem p = q.c();
  const Support s = plugin_->supports(p);
  if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
  const LayerWeights w = random_weights(p, 43);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  const Layer ref_layer = reference_->prepare(p, w.view(), {});
  const GraphReplay graph(plugin_, layer, p, 37);
  for (uint64_t seed : {31u, 32u}) {
    Batch batch = random_batch(p, 37, seed, Scenario::kRandom);
    if (seed == 32u) {
      auto* x = batch.hidden.data<uint16_t>();
      for (int64_t i = 0; i < 37 * p.hidden; ++i)
        x[i] = float_to_bf16(bf16_to_float(x[i]) * 128.0f);
    }
    EXPECT_LT(graph.error_against(ref_layer, *reference_, p, batch), 2e-2) << "seed " << seed;
  }
}

// Sink experts next to fp8_block run apart: bf16 by cuBLAS, their
// results into the sink slots' GEMM2 rows, the gather, the e4m3 GEMMs and the activation skipping
// their groups. Sinks as wide as the routed experts and narrower, with a shared expert after them,
// biases, gelu_mul routed experts; padding tokens and one expert taking every token; then a graph
// replayed with new inputs.
TEST_F(TrtllmFp8Block, SinksApartMatchTheReference) {
  struct SinkCase {
    bool shared, bias;
    moe_activation activation;
    int64_t sink_intermediate;
  };
  for (const SinkCase& c : {SinkCase{false, false, MOE_ACTIVATION_SILU_MUL, 256},
                            SinkCase{true, true, MOE_ACTIVATION_GELU_MUL, 96}}) {
    expect_sinks_apart_match(problem({"auto", c.shared, c.bias, c.activation}), c.sink_intermediate,
                             47);
    if (HasFatalFailure() || IsSkipped()) return;
  }
}

// 128x256 tiles and the fused activation do not apply to fp8_block: config errors naming why.
TEST_F(TrtllmFp8Block, WideTilesAndAFusedActivationAreConfigErrors) {
  const Problem q = problem({"auto", false, false, MOE_ACTIVATION_SILU_MUL});
  const moe_problem p = q.c();
  const Support s = plugin_->supports(p);
  if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
  const LayerWeights w = random_weights(p, 45);
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"gemm_tiles", "wide"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"'wide' is for bf16 layers", "fp8_block"});
  expect_error(
      [&] {
        plugin_->prepare(p, w.view(), {{"activation_epilogue", "fused"}});
      },
      MOE_STATUS_CONFIG_ERROR, {"'fused' is not for fp8_block", "row-interleaved"});
}

// A corrupt block scale (negative, -inf, NaN) is refused at prepare naming the tensor, in the
// caller's order, before the layout's 1e-10 floor could turn it into a valid-looking one.
TEST_F(TrtllmFp8Block, CorruptBlockScalesAreRefusedByName) {
  const Problem q = problem({"auto", true, false, MOE_ACTIVATION_SILU_MUL});
  const moe_problem p = q.c();
  const Support s = plugin_->supports(p);
  if (!s.supported) GTEST_SKIP() << "trtllm_style: " << s.message;
  for (const char* which : {"w13_scale", "w2_scale", "shared_w13_scale"}) {
    LayerWeights w = random_weights(p, 47);
    const std::string name = which;
    HostTensor& t = name == "w13_scale"  ? w.w13_scale
                    : name == "w2_scale" ? w.w2_scale
                                         : w.shared_w13_scale;
    t.data<float>()[1] = name == "w13_scale"  ? -0.5f
                         : name == "w2_scale" ? -std::numeric_limits<float>::infinity()
                                              : std::nanf("");
    expect_error([&] { plugin_->prepare(p, w.view(), {}); }, MOE_STATUS_INVALID_ARGUMENT,
                 {name + "[0][0][1]", "not a finite positive block scale"});
  }
}

}  // namespace
}  // namespace moe::test
