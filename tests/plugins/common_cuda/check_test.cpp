// MOE_CUDA_CHECK's error, and the host-side refusals of every launcher. These run without a GPU:
// the checks come before any CUDA call.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/activation.hpp"
#include "moe_cuda/check.hpp"
#include "moe_cuda/permute.hpp"
#include "moe_cuda/quantize.hpp"
#include "moe_cuda/routing.hpp"

namespace moe::gpu {
namespace {

using testing::HasSubstr;

// Runs fn, expects moe::Error(status) whose message holds `part`.
template <class Fn>
void expect_error(Fn&& fn, moe_status status, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "expected moe::Error(" << status_name(status) << ") containing: " << part;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(part));
  }
}

moe_problem routing_problem(moe_routing routing, int64_t experts, int64_t top_k) {
  Problem p;
  p.raw().routing = routing;
  p.raw().experts = experts;
  p.raw().top_k = top_k;
  p.raw().hidden = 64;
  p.raw().intermediate = 32;
  p.finalize();
  return p.c();
}

TEST(CudaCheck, FailedCallThrowsDeviceErrorNamingTheCallTheCudaMessageAndTheLine) {
  expect_error([] { MOE_CUDA_CHECK(cudaErrorInvalidValue); }, MOE_STATUS_DEVICE_ERROR,
               "cudaErrorInvalidValue failed: invalid argument at ");
  expect_error([] { MOE_CUDA_CHECK(cudaErrorInvalidValue); }, MOE_STATUS_DEVICE_ERROR,
               "check_test.cpp:");
}

TEST(CudaCheck, SuccessDoesNotThrow) {
  EXPECT_NO_THROW(MOE_CUDA_CHECK(cudaSuccess));
}

TEST(RouteChecks, RefusesWhatTheReferenceRefusesWithItsMessages) {
  float dummy = 0;
  int32_t ids = 0;
  moe_problem p = routing_problem(MOE_ROUTING_SOFTMAX_TOPK, 4, 5);
  expect_error([&] { launch_route(p, 1, &dummy, nullptr, nullptr, &ids, &dummy, nullptr); },
               MOE_STATUS_INVALID_ARGUMENT, "top_k=5 must be in [1, experts=4]");
  p = routing_problem(MOE_ROUTING_GROUPED_TOPK, 8, 2);
  p.num_groups = 3;
  expect_error([&] { launch_route(p, 1, &dummy, nullptr, nullptr, &ids, &dummy, nullptr); },
               MOE_STATUS_INVALID_ARGUMENT, "num_groups=3 must divide experts=8");
  p = routing_problem(MOE_ROUTING_SIGMOID_TOPK, 8, 2);
  expect_error([&] { launch_route(p, 1, &dummy, &dummy, nullptr, &ids, &dummy, nullptr); },
               MOE_STATUS_INVALID_ARGUMENT, "bias is given but routing_bias=0");
  expect_error([&] { launch_route(p, 3, nullptr, nullptr, nullptr, &ids, &dummy, nullptr); },
               MOE_STATUS_INVALID_ARGUMENT, "must not be null with tokens=3");
  p.sink_experts = 2;
  expect_error([&] { launch_route(p, 1, &dummy, nullptr, nullptr, &ids, &dummy, nullptr); },
               MOE_STATUS_INVALID_ARGUMENT, "sink_experts=2 needs routing sigmoid_bias_sink");
}

TEST(RouteChecks, RefusesMoreColumnsOrExpertsThanTheKernelHolds) {
  float dummy = 0;
  int32_t ids = 0;
  moe_problem p = routing_problem(MOE_ROUTING_SIGMOID_BIAS_SINK, 64, 30);
  p.sink_experts = 3;
  expect_error([&] { launch_route(p, 1, &dummy, nullptr, nullptr, &ids, &dummy, nullptr); },
               MOE_STATUS_UNSUPPORTED, "top_k + sink_experts = 33 exceeds the 32 columns");
  p = routing_problem(MOE_ROUTING_SOFTMAX_TOPK, kRouteMaxExperts + 1, 2);
  expect_error([&] { launch_route(p, 1, &dummy, nullptr, nullptr, &ids, &dummy, nullptr); },
               MOE_STATUS_UNSUPPORTED, "experts=8193 exceeds the 8192");
}

TEST(PermuteChecks, RefusesMoreTokensThanCarvedAndAForeignGeometry) {
  const moe_problem p = routing_problem(MOE_ROUTING_SOFTMAX_TOPK, 8, 2);
  Permutation perm;
  perm.max_tokens = 4;
  perm.width = 2;
  perm.groups = 8;
  int32_t ids = 0;
  expect_error([&] { launch_permute(p, 5, &ids, perm, nullptr); }, MOE_STATUS_CAPACITY_EXCEEDED,
               "tokens=5 exceeds the max_tokens=4");
  perm.groups = 9;
  expect_error([&] { launch_permute(p, 1, &ids, perm, nullptr); }, MOE_STATUS_INVALID_ARGUMENT,
               "the permutation was carved for W=2 G=9");
}

TEST(PermuteChecks, RefusesAnEpMapThatIsNoPlacementWithoutADeviceCopy) {
  Problem problem;
  moe_problem& r = problem.raw();
  r.experts = 4;
  r.top_k = 1;
  r.ep_placement = MOE_EP_LINEAR;
  r.ep_size = 2;
  r.ep_rank = 0;
  problem.finalize();
  moe_problem p = problem.c();
  const int32_t custom[4] = {-1, 0, 1, -1};  // not linear rank 0's {0, 1, -1, -1}
  p.ep_map = custom;
  Permutation perm;
  perm.max_tokens = 1;
  perm.width = 1;
  perm.groups = 2;
  int32_t ids = 0;
  expect_error([&] { launch_permute(p, 1, &ids, perm, nullptr); }, MOE_STATUS_INVALID_ARGUMENT,
               "ep_map is not the linear map of ep_rank=0 of ep_size=2");
}

TEST(ActivationChecks, RefusesSiluGroupsInARelu2CallAndAMissingRowGroup) {
  moe_problem p = routing_problem(MOE_ROUTING_SOFTMAX_TOPK, 8, 2);
  p.activation = MOE_ACTIVATION_RELU2;
  ActivationArgs a;
  a.intermediate = 16;
  a.silu_group_begin = 8;
  a.silu_group_end = 10;
  expect_error([&] { launch_activation(p, a, nullptr); }, MOE_STATUS_INVALID_ARGUMENT,
               "run the sink rows in a call of their own");
  p.activation = MOE_ACTIVATION_SILU_MUL;
  expect_error([&] { launch_activation(p, a, nullptr); }, MOE_STATUS_INVALID_ARGUMENT,
               "row_group is needed");
}

TEST(QuantizeChecks, RefusesMissingBuffers) {
  const uint16_t x = 0;
  uint8_t codes = 0;
  expect_error(
      [&] { launch_quantize_fp8_1x128(&x, 128, RowRange{1}, &codes, Fp8BlockScales{}, nullptr); },
      MOE_STATUS_INVALID_ARGUMENT, "scales.data must be given");
  expect_error(
      [&] { launch_quantize_fp8_tensor_static(&x, 0, RowRange{1}, nullptr, &codes, nullptr); },
      MOE_STATUS_INVALID_ARGUMENT, "hidden=0 must be >= 1");
}

}  // namespace
}  // namespace moe::gpu
