// The EP group over a communicator the caller owns (Group::borrow), proved on the CPU through a
// fake NCCL (the table the group calls through) and fixture_device_like (the reference in "device
// memory" that is host memory): the argument checks, the config check, steps through the borrowed
// communicator, and that the group never destroys nor aborts it. The real NCCL runs in
// ep_nccl_gpu_test.cpp.
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "../support/test_env.hpp"
#include "ep/nccl.hpp"
#include "moe/ep.hpp"

namespace moe::test {
namespace {

// The fake's communicator: `world` ranks of which this process is `rank`. Sends and receives
// between a group start and end are paired in order (only this rank's own exchanges move bytes);
// an all-gather fills the other ranks' slots with `others_digest`, or this rank's value.
struct FakeComm {
  int world = 1, rank = 0, device = 0, current_device = 0;
  int destroyed = 0, aborted = 0, sends = 0;
  bool never_done = false;  // the stream never completes: a rank that stopped answering
  int stream_error = 0;     // cuStreamQuery's answer when not 0: a kernel faulted
  uint64_t others_digest = 0;
  std::vector<std::pair<const void*, size_t>> pending_sends;
  std::vector<std::pair<void*, size_t>> pending_recvs;
} g_comm;

ncclComm_t fake_comm() {
  return reinterpret_cast<ncclComm_t>(&g_comm);
}

ncclResult_t ok_if_ours(ncclComm_t c) {
  return c == fake_comm() ? ncclSuccess : ncclInvalidArgument;
}

ep::NcclApi fake_nccl() {
  ep::NcclApi api{};
  api.comm_count = [](const ncclComm_t c, int* n) { return *n = g_comm.world, ok_if_ours(c); };
  api.comm_user_rank = [](const ncclComm_t c, int* r) { return *r = g_comm.rank, ok_if_ours(c); };
  api.comm_cu_device = [](const ncclComm_t c, int* d) { return *d = g_comm.device, ok_if_ours(c); };
  api.comm_destroy = [](ncclComm_t) { return ++g_comm.destroyed, ncclSuccess; };
  api.comm_abort = [](ncclComm_t) { return ++g_comm.aborted, ncclSuccess; };
  api.comm_get_async_error = [](ncclComm_t, ncclResult_t* r) {
    return *r = ncclSuccess, ncclSuccess;
  };
  api.group_start = [] { return ncclSuccess; };
  api.group_end = [] {
    for (size_t i = 0; i < g_comm.pending_sends.size(); ++i)
      std::memcpy(g_comm.pending_recvs[i].first, g_comm.pending_sends[i].first,
                  g_comm.pending_sends[i].second);
    g_comm.pending_sends.clear();
    g_comm.pending_recvs.clear();
    return ncclSuccess;
  };
  api.send = [](const void* buf, size_t n, ncclDataType_t, int peer, ncclComm_t, cudaStream_t) {
    ++g_comm.sends;
    if (peer == g_comm.rank) g_comm.pending_sends.push_back({buf, n});
    return ncclSuccess;
  };
  api.recv = [](void* buf, size_t n, ncclDataType_t, int peer, ncclComm_t, cudaStream_t) {
    if (peer == g_comm.rank) g_comm.pending_recvs.push_back({buf, n});
    return ncclSuccess;
  };
  api.all_gather = [](const void* mine, void* all, size_t n, ncclDataType_t, ncclComm_t,
                      cudaStream_t) {
    for (int r = 0; r < g_comm.world; ++r) {
      auto* slot = static_cast<uint8_t*>(all) + size_t(r) * n;
      if (r == g_comm.rank || g_comm.others_digest == 0)
        std::memcpy(slot, mine, n);
      else
        std::memcpy(slot, &g_comm.others_digest, n);
    }
    return ncclSuccess;
  };
  api.error_string = [](ncclResult_t) { return "fake NCCL error"; };
  api.stream_query = [](void*) {
    return g_comm.stream_error != 0 ? g_comm.stream_error : g_comm.never_done ? 600 : 0;
  };
  api.current_device = [] { return int32_t(g_comm.current_device); };
  api.library = "fake NCCL";
  return api;
}

class BorrowedGroup : public testing::Test {
 protected:
  void SetUp() override {
    g_comm = FakeComm{};
    registry_ =
        std::make_unique<Registry>(registry_of({build_plugin_dir(), fixture_dir("device_like")}));
    device_ = registry_->find("fixture_device_like");
    ASSERT_NE(device_, nullptr) << "the device_like fixture plugin was not built";
  }

  std::unique_ptr<ep::Group> borrow(int32_t rank, int32_t world, double timeout_s = 10) {
    return ep::Group::borrow(nccl_, fake_comm(), rank, world, device_, timeout_s, 42);
  }

  ep::NcclApi nccl_ = fake_nccl();
  std::unique_ptr<Registry> registry_;
  std::shared_ptr<const Plugin> device_;
};

TEST_F(BorrowedGroup, ANullCommunicatorIsRefusedBeforeNcclIsLoaded) {
  expect_error([&] { ep::Group::borrow(nullptr, 0, 1, device_, 10, 42); },
               MOE_STATUS_INVALID_ARGUMENT, {"nccl_comm is NULL"});
  expect_error([&] { ep::Group::borrow(nccl_, nullptr, 0, 1, device_, 10, 42); },
               MOE_STATUS_INVALID_ARGUMENT, {"nccl_comm is NULL"});
}

TEST_F(BorrowedGroup, AHostMemoryBackendIsRefused) {
  expect_error(
      [&] { ep::Group::borrow(nccl_, fake_comm(), 0, 1, registry_->find("reference"), 10, 42); },
      MOE_STATUS_UNSUPPORTED, {"device memory", "'reference' keeps host memory"});
}

TEST_F(BorrowedGroup, ARankOrSizeOtherThanTheConfigsIsRefusedNamingBoth) {
  g_comm.world = 2;
  g_comm.rank = 1;
  expect_error([&] { borrow(0, 2); }, MOE_STATUS_CONFIG_ERROR,
               {"the NCCL communicator is rank 1 of 2, but the config says ep_rank=0 of "
                "ep_size=2"});
  g_comm.world = 4;
  g_comm.rank = 0;
  expect_error([&] { borrow(0, 2); }, MOE_STATUS_CONFIG_ERROR,
               {"rank 0 of 4", "ep_rank=0 of ep_size=2"});
  EXPECT_EQ(g_comm.destroyed + g_comm.aborted, 0);
}

TEST_F(BorrowedGroup, ACommunicatorOnAnotherDeviceIsRefused) {
  g_comm.device = 1;
  expect_error([&] { borrow(0, 1); }, MOE_STATUS_INVALID_ARGUMENT,
               {"communicator is on cuda:1", "current device", "cuda:0"});
}

TEST_F(BorrowedGroup, RanksRunningAnotherConfigAreRefused) {
  g_comm.world = 2;
  g_comm.others_digest = 7;
  expect_error([&] { borrow(0, 2); }, MOE_STATUS_CONFIG_ERROR,
               {"rank 1 runs a different config than rank 0"});
  EXPECT_EQ(g_comm.destroyed + g_comm.aborted, 0);
}

TEST_F(BorrowedGroup, TheGroupNeverDestroysTheCallersCommunicator) {
  auto group = borrow(0, 1);
  EXPECT_FALSE(group->owns_communicator());
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->world(), 1);
  group.reset();
  EXPECT_EQ(g_comm.destroyed, 0);
  EXPECT_EQ(g_comm.aborted, 0);
}

TEST_F(BorrowedGroup, AStepThroughItEqualsTheSingleRankStep) {
  const Problem p = small_ep_problem(1, 0);
  const LayerWeights w = random_weights(p.c(), 11);
  const Layer layer = device_->prepare(p.c(), w.view(), {});
  const Batch batch = random_batch(p.c(), 9, 12, Scenario::kRandom);
  const Routing routing = route_batch(*registry_->find("reference"), p.c(), batch);
  auto group = borrow(0, 1);
  const HostTensor alone = ep::run_step(nullptr, layer, p.c(), batch.hidden, routing);
  const int sends_before = g_comm.sends;
  ep::StepStats stats;
  const HostTensor through = ep::run_step(group.get(), layer, p.c(), batch.hidden, routing, &stats);
  EXPECT_GT(g_comm.sends, sends_before);  // the exchanges went through the communicator
  EXPECT_EQ(stats.tokens_sent, 9);
  ASSERT_EQ(through.bytes(), alone.bytes());
  EXPECT_EQ(std::memcmp(through.raw(), alone.raw(), alone.bytes()), 0);
}

// A host step with another device current than the communicator's is refused before it sends
// anything (the layer's own device check would come after the exchanges).
TEST_F(BorrowedGroup, AStepWithAnotherDeviceCurrentIsRefusedBeforeItSends) {
  const Problem p = small_ep_problem(1, 0);
  const LayerWeights w = random_weights(p.c(), 11);
  const Layer layer = device_->prepare(p.c(), w.view(), {});
  const Batch batch = random_batch(p.c(), 3, 12, Scenario::kRandom);
  const Routing routing = route_batch(*registry_->find("reference"), p.c(), batch);
  auto group = borrow(0, 1);
  const int sends_before = g_comm.sends;
  g_comm.current_device = 1;
  expect_error([&] { ep::run_step(group.get(), layer, p.c(), batch.hidden, routing); },
               MOE_STATUS_INVALID_ARGUMENT,
               {"the step runs with cuda:1 current, but the group's NCCL communicator"});
  g_comm.current_device = 0;
  EXPECT_EQ(g_comm.sends, sends_before);
}

// A weight-1 shared expert under EP: refused as it is (each rank would add it), split off into a
// one-expert layer it runs once per token at home, and the step then matches one layer.
TEST_F(BorrowedGroup, ASharedExpertRunsOncePerTokenSplitOff) {
  Problem p = small_ep_problem(1, 0);
  p.raw().shared_intermediate = 48;
  p.finalize();
  const LayerWeights w = random_weights(p.c(), 21);
  const Batch batch = random_batch(p.c(), 9, 22, Scenario::kRandom);
  const Routing routing = route_batch(*registry_->find("reference"), p.c(), batch);
  const Layer whole = device_->prepare(p.c(), w.view(), {});
  expect_error([&] { ep::run_step(nullptr, whole, p.c(), batch.hidden, routing); },
               MOE_STATUS_UNSUPPORTED, {"shared_intermediate=48", "split_shared_expert"});

  const moe_weights view = w.view();
  const ep::SharedSplit s = ep::split_shared_expert(p.c(), view);
  EXPECT_EQ(s.routed.raw().shared_intermediate, 0);
  EXPECT_TRUE(s.routed_weights.shared_w13.data == nullptr &&
              s.routed_weights.shared_w2.data == nullptr);
  EXPECT_EQ(s.routed_weights.w13.data, view.w13.data);  // views of the caller's weights
  EXPECT_EQ(s.shared.raw().experts, 1);
  EXPECT_EQ(s.shared.raw().intermediate, 48);
  auto shape = [](const moe_tensor& t) { return std::vector<int64_t>(t.shape, t.shape + t.ndim); };
  EXPECT_EQ(shape(s.shared_weights.w13), (std::vector<int64_t>{1, 96, 64}));
  EXPECT_EQ(shape(s.shared_weights.w2), (std::vector<int64_t>{1, 64, 48}));
  EXPECT_EQ(s.shared_weights.w13.data, view.shared_w13.data);
  const Layer routed = device_->prepare(s.routed.c(), s.routed_weights, {});
  const Layer shared = device_->prepare(s.shared.c(), s.shared_weights, {});
  const HostTensor out = ep::run_step(nullptr, routed, s.routed.c(), batch.hidden, routing, nullptr,
                                      {&shared, s.shared.c()});
  const RunResult one = run_layer(whole, p.c(), batch.hidden, routing);
  EXPECT_LT(relative_l2(out, one.output), 1e-2);  // the parts summed once more in f32, rounded
  const HostTensor without = ep::run_step(nullptr, routed, s.routed.c(), batch.hidden, routing);
  EXPECT_GT(relative_l2(without, one.output), 0.1);  // the shared expert is a real part of it

  // A layer that is not split_shared_expert's, and a problem with nothing to split, are named.
  expect_error(
      [&] {
        ep::run_step(nullptr, routed, s.routed.c(), batch.hidden, routing, nullptr,
                     {&routed, s.routed.c()});
      },
      MOE_STATUS_INVALID_ARGUMENT, {"one expert of hidden=64", "not experts=8"});
  expect_error([&] { ep::split_shared_expert(s.routed.c(), s.routed_weights); },
               MOE_STATUS_INVALID_ARGUMENT, {"no shared expert"});
}

// A caller's map survives the split (the routed weights stay in its local order); without one
// the routed problem's map is the placement's.
TEST_F(BorrowedGroup, TheSplitKeepsACallersMap) {
  Problem p = small_ep_problem(2, 0);
  p.raw().shared_intermediate = 48;
  p.finalize();
  const LayerWeights w = random_weights(p.c(), 21);
  const std::vector<int32_t> map = {-1, -1, -1, -1, 3, 2, 1, 0};  // experts 4-7, reversed
  moe_problem q = p.c();
  q.ep_map = map.data();
  EXPECT_EQ(ep::split_shared_expert(q, w.view()).routed.ep_map(), map);
  moe_problem placed = p.c();
  placed.ep_map = nullptr;  // the placement's map, made again
  EXPECT_EQ(ep::split_shared_expert(placed, w.view()).routed.ep_map(),
            (std::vector<int32_t>{0, 1, 2, 3, -1, -1, -1, -1}));
}

// A rank runs what arrives in slices of the layer's max_tokens: up to ep_size x T rows come when
// every token routes to it. Here 100 tokens through a layer of max_tokens 64 give the bits of a
// layer that takes them at once.
TEST_F(BorrowedGroup, WhatArrivesRunsInSlicesOfMaxTokens) {
  const Problem p = small_ep_problem(1, 0);  // max_tokens 64
  Problem big = p;
  big.raw().max_tokens = 128;
  big.finalize();
  const LayerWeights w = random_weights(p.c(), 31);
  const Layer small = device_->prepare(p.c(), w.view(), {});
  const Layer large = device_->prepare(big.c(), w.view(), {});
  const Batch batch = random_batch(big.c(), 100, 32, Scenario::kRandom);
  const Routing routing = route_batch(*registry_->find("reference"), big.c(), batch);
  auto group = borrow(0, 1);
  ep::StepStats stats;
  const HostTensor sliced = ep::run_step(group.get(), small, p.c(), batch.hidden, routing, &stats);
  EXPECT_EQ(stats.tokens_received, 100);
  const HostTensor whole = ep::run_step(group.get(), large, big.c(), batch.hidden, routing);
  ASSERT_EQ(sliced.bytes(), whole.bytes());
  EXPECT_EQ(std::memcmp(sliced.raw(), whole.raw(), whole.bytes()), 0);
}

TEST_F(BorrowedGroup, AStepOfAnotherRanksProblemIsRefused) {
  g_comm.world = 2;
  auto group = borrow(0, 2);
  const Problem p = small_ep_problem(2, 1);
  const LayerWeights w = slice_local_experts(random_weights(small_ep_problem(1, 0).c(), 3), p.c());
  const Layer layer = device_->prepare(p.c(), w.view(), {});
  const Batch batch = random_batch(p.c(), 4, 5, Scenario::kRandom);
  const Routing routing = route_batch(*registry_->find("reference"), p.c(), batch);
  expect_error([&] { ep::run_step(group.get(), layer, p.c(), batch.hidden, routing); },
               MOE_STATUS_CONFIG_ERROR, {"ep_rank=1", "rank 0 of the group"});
}

TEST_F(BorrowedGroup, ATimeoutGivesTheCommunicatorUpWithoutAbortingIt) {
  auto group = borrow(0, 1, /*timeout_s=*/0.05);
  g_comm.never_done = true;
  std::vector<uint8_t> s(8), r(8);
  expect_error(
      [&] {
        group->exchange({{s.data(), 8}}, {{r.data(), 8}}, "token dispatch");
      },
      MOE_STATUS_DEVICE_ERROR,
      {"token dispatch did not finish", "the communicator is the caller's", "ncclCommAbort"});
  EXPECT_EQ(g_comm.aborted, 0);
  expect_error([&] { group->all_gather(1, "again"); }, MOE_STATUS_DEVICE_ERROR,
               {"timed out earlier"});
  group.reset();
  EXPECT_EQ(g_comm.destroyed + g_comm.aborted, 0);
}

// A fault on the stream (cuStreamQuery 700: an illegal address) is a device error at once, not
// a wait until the timeout that then blames a silent rank.
TEST_F(BorrowedGroup, AFaultOnTheStreamIsADeviceErrorAtOnce) {
  auto group = borrow(0, 1, /*timeout_s=*/60);
  g_comm.stream_error = 700;
  std::vector<uint8_t> s(8), r(8);
  const auto start = std::chrono::steady_clock::now();
  expect_error(
      [&] {
        group->exchange({{s.data(), 8}}, {{r.data(), 8}}, "token dispatch");
      },
      MOE_STATUS_DEVICE_ERROR,
      {"rank 0 of 1: token dispatch failed on the device (CUDA error 700)"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// Each step of one Slurm allocation gets a run id of its own (the job id is the allocation's).
TEST(EpLaunch, SrunStepsOfOneJobHaveTheirOwnRunIds) {
  const char* names[] = {
      "RANK",         "WORLD_SIZE",   "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
      "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",        "SLURM_JOB_ID",
      "SLURM_STEP_ID"};
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  for (const char* n : names) {
    const char* v = std::getenv(n);
    saved.push_back({n, v ? std::optional<std::string>(v) : std::nullopt});
    unsetenv(n);
  }
  setenv("SLURM_PROCID", "1", 1);
  setenv("SLURM_NTASKS", "2", 1);
  setenv("SLURM_JOB_ID", "77", 1);
  const ep::Launch whole_job = ep::launch_from_env();
  setenv("SLURM_STEP_ID", "3", 1);
  const ep::Launch step = ep::launch_from_env();
  for (const auto& [n, v] : saved) v ? setenv(n.c_str(), v->c_str(), 1) : unsetenv(n.c_str());
  EXPECT_EQ(whole_job.launcher, "srun");
  EXPECT_EQ(whole_job.run_id, "77");
  EXPECT_EQ(step.run_id, "77.3");
  EXPECT_EQ(step.rank, 1);
  EXPECT_EQ(step.world, 2);
}

}  // namespace
}  // namespace moe::test
