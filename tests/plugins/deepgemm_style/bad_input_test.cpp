// deepgemm_style's refusals through the C ABI on a GPU: block scales that are zero, negative or
// not finite, and scale tensors of the wrong shape, refused at prepare naming the tensor and the
// block; a batch above the layer's capacity refused at run naming both numbers, in either row
// layout. Shapes the kernels cannot take are refused by supports (support_test.cpp, on any
// machine). Skips without an sm_90 GPU.
#include <cuda_runtime_api.h>

#include <limits>

#include "../../support/plugin_fixture.hpp"

namespace moe::test {
namespace {

class DeepGemmRefusals : public PluginAndReference<> {
 protected:
  void SetUp() override {
    load("deepgemm_style", "no CUDA or CUTLASS");
    if (IsSkipped() || HasFatalFailure()) return;
    moe_problem& r = problem_.raw();
    r.experts = 16;
    r.top_k = 4;
    r.hidden = 256;        // 2 K blocks
    r.intermediate = 256;  // w13: 4 row blocks, w2: 2
    r.format = MOE_FORMAT_FP8_BLOCK;
    r.input_format = MOE_INPUT_FP8_1X128;
    r.max_tokens = 48;
    problem_.finalize();
    const Support s = plugin_->supports(problem_.c());
    if (!s.supported) GTEST_SKIP() << "deepgemm_style: " << s.message;
  }

  Problem problem_;
};

TEST_F(DeepGemmRefusals, CorruptBlockScalesAreRefusedAtPrepareNamingTheBlock) {
  const moe_problem p = problem_.c();
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    LayerWeights w = random_weights(p, 5);
    static_cast<float*>(w.w13_scale.raw())[2 * 2 + 1] = bad;  // expert 0, row block 2, K block 1
    expect_error([&] { plugin_->prepare(p, w.view(), {}); }, MOE_STATUS_INVALID_ARGUMENT,
                 {"w13_scale[0][2][1]", "not a finite positive block scale"});
    w = random_weights(p, 5);
    static_cast<float*>(w.w2_scale.raw())[4 + 2] = bad;  // expert 1, row block 1, K block 0
    expect_error([&] { plugin_->prepare(p, w.view(), {}); }, MOE_STATUS_INVALID_ARGUMENT,
                 {"w2_scale[1][1][0]", "not a finite positive block scale"});
  }
}

TEST_F(DeepGemmRefusals, ScaleTensorsOfTheWrongShapeAreRefusedAtPrepareNamingThem) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 5);
  moe_weights v = w.view();
  v.w13_scale.shape[2] = 1;  // one K block where the hidden size has two
  expect_error([&] { plugin_->prepare(p, v, {}); }, MOE_STATUS_SHAPE_MISMATCH, {"w13_scale"});
  v = w.view();
  v.w2_scale.shape[0] = 8;  // half the experts
  expect_error([&] { plugin_->prepare(p, v, {}); }, MOE_STATUS_SHAPE_MISMATCH, {"w2_scale"});
}

TEST_F(DeepGemmRefusals, ABatchAboveCapacityIsRefusedInEitherLayoutNamingBothNumbers) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 5);
  Problem roomy = problem_;  // routes 49 tokens (routing does not depend on the capacity)
  roomy.raw().max_tokens = 64;
  roomy.finalize();
  const Batch batch = random_batch(roomy.c(), 49, 1, Scenario::kRandom);
  const Routing routing = route_batch(*reference_, roomy.c(), batch);
  for (const char* layout : {"masked", "contiguous"}) {
    const Layer layer = plugin_->prepare(p, w.view(), {{"layout", layout}});
    expect_error([&] { run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16); },
                 MOE_STATUS_CAPACITY_EXCEEDED, {"49 tokens", "max_tokens=48"});
  }
}

}  // namespace
}  // namespace moe::test
