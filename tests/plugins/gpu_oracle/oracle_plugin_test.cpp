// The gpu_oracle plugin as the registry sees it, on any machine: a host-memory plugin just above
// the reference, routing bit for bit as the reference does, and refusing with the reason when it
// cannot run (no GPU, EPLB, weights larger than the device).
#include "oracle_test_env.hpp"

namespace moe::test {
namespace {

TEST_F(GpuOracle, IsAHostMemoryPluginRankedJustAboveTheReference) {
  const PluginInfo& info = oracle_->info();
  EXPECT_EQ(info.memory, MOE_MEMORY_HOST);
  EXPECT_EQ(info.priority, reference_->info().priority + 1);
  EXPECT_EQ(info.format_mask, reference_->info().format_mask);
  EXPECT_EQ(info.activation_mask, reference_->info().activation_mask);
  EXPECT_EQ(info.routing_mask, reference_->info().routing_mask);
}

TEST_F(GpuOracle, RoutesBitForBitAsTheReferenceOnEverySmallProblem) {
  for (const ProblemFile& pf : small_problem_files()) {
    const moe_problem p = pf.problem.c();
    ASSERT_TRUE(oracle_->can_route(p)) << pf.name;
    for (const Scenario sc : pf.scenarios) {
      const Batch b = random_batch(p, 33, mix_seed(seed_, pf.name), sc);
      const Routing got = route_batch(*oracle_, p, b), want = route_batch(*reference_, p, b);
      ASSERT_EQ(got.ids.bytes(), want.ids.bytes());
      EXPECT_EQ(std::memcmp(got.ids.raw(), want.ids.raw(), want.ids.bytes()), 0) << pf.name;
      EXPECT_EQ(std::memcmp(got.weights.raw(), want.weights.raw(), want.weights.bytes()), 0)
          << pf.name << " " << scenario_name(sc);
    }
  }
}

TEST_F(GpuOracle, RefusesRedundantExpertsWithTheEpReason) {
  Problem p = small_problem();
  p.raw().redundant_experts = 1;
  const Support s = oracle_->supports(p.c());
  EXPECT_FALSE(s.supported);
  EXPECT_EQ(s.reason, MOE_REASON_EP);
  EXPECT_THAT(s.message, testing::HasSubstr("redundant experts (EPLB)"));
}

TEST_F(GpuOracle, WithoutAGpuRefusesWithTheArchReasonAndPrepareSaysWhy) {
  const moe_problem p = small_problem().c();
  const Support s = oracle_->supports(p);
  if (s.supported) GTEST_SKIP() << "this machine has a usable GPU";
  EXPECT_EQ(s.reason, MOE_REASON_ARCH);
  EXPECT_THAT(s.message, testing::HasSubstr("no CUDA device"));
  EXPECT_THAT(s.message, testing::HasSubstr("the GPU oracle runs its GEMMs with cuBLAS"));
  const LayerWeights w = random_weights(p, 1);
  expect_error([&] { oracle_->prepare(p, w.view(), {}); }, MOE_STATUS_UNSUPPORTED,
               {"plugin 'gpu_oracle'", "no CUDA device"});
}

TEST_F(GpuOracleOnAGpu, RefusesALayerLargerThanTheDeviceNamingTheSizes) {
  Problem huge;  // 1024 experts of H=7168, I=4096: 360 GB of fp32 weights
  huge.raw().experts = 1024;
  huge.raw().top_k = 8;
  huge.raw().hidden = 7168;
  huge.raw().intermediate = 4096;
  huge.raw().max_tokens = 16;
  huge.finalize();
  const Support s = oracle_->supports(huge.c());
  EXPECT_FALSE(s.supported);
  EXPECT_EQ(s.reason, MOE_REASON_SHAPE);
  EXPECT_THAT(s.message, testing::HasSubstr("the fp32 weights need 336.0 GiB"));
}

TEST_F(GpuOracleOnAGpu, TopkIdOutsideTheExpertsIsAnErrorNamingIt) {
  const moe_problem p = small_problem().c();
  const LayerWeights w = random_weights(p, 2);
  const Layer layer = oracle_->prepare(p, w.view(), {});
  const Batch b = random_batch(p, 3, 4, Scenario::kRandom);
  Routing r = route_batch(*reference_, p, b);
  r.ids.data<int32_t>()[3] = int32_t(p.experts);
  expect_error([&] { run_layer(layer, p, b.hidden, r); }, MOE_STATUS_INVALID_ARGUMENT,
               {"plugin 'gpu_oracle'", "topk_ids[1][1]=4 is outside [-1, experts=4)"});
}

}  // namespace
}  // namespace moe::test
