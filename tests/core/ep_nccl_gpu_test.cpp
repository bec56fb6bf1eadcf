// The EP group over a real NCCL communicator that the test makes and owns, as an engine does:
// one rank (ncclCommInitRank of world size 1 runs on one GPU), a device-memory plugin's layer
// stepped through it, equal to the single-rank step and close to the reference; after the group
// is gone the communicator still works, and the test destroys it. Skipped, saying why, without a
// GPU, NCCL or a GPU plugin.
#include <dlfcn.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "../support/test_env.hpp"
#include "device/cuda_driver.hpp"
#include "moe/ep.hpp"

namespace moe::test {
namespace {

// NCCL as an engine loads it: $MOE_NCCL_LIBRARY, else libnccl.so.2 (the group loads the same).
struct EngineNccl {
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = nullptr;
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*comm_count)(const ncclComm_t, int*) = nullptr;
  ncclResult_t (*comm_destroy)(ncclComm_t) = nullptr;
  std::string why_not;  // set when NCCL cannot be loaded
};

EngineNccl load_engine_nccl() {
  EngineNccl n;
  const char* env = std::getenv("MOE_NCCL_LIBRARY");
  const std::string name = env && *env ? env : "libnccl.so.2";
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    n.why_not = name + " cannot be loaded (set MOE_NCCL_LIBRARY): " + dlerror();
    return n;
  }
  n.get_unique_id = reinterpret_cast<decltype(n.get_unique_id)>(dlsym(lib, "ncclGetUniqueId"));
  n.comm_init_rank = reinterpret_cast<decltype(n.comm_init_rank)>(dlsym(lib, "ncclCommInitRank"));
  n.comm_count = reinterpret_cast<decltype(n.comm_count)>(dlsym(lib, "ncclCommCount"));
  n.comm_destroy = reinterpret_cast<decltype(n.comm_destroy)>(dlsym(lib, "ncclCommDestroy"));
  if (!n.get_unique_id || !n.comm_init_rank || !n.comm_count || !n.comm_destroy)
    n.why_not = name + " lacks a symbol of NCCL 2";
  return n;
}

// E=8 k=2 H=256 I=128 bf16, linear EP over one rank.
Problem one_rank_problem() {
  Problem p;
  moe_problem& r = p.raw();
  r.experts = 8;
  r.top_k = 2;
  r.hidden = 256;
  r.intermediate = 128;
  r.max_tokens = 64;
  r.ep_placement = MOE_EP_LINEAR;
  r.ep_size = 1;
  r.ep_rank = 0;
  p.finalize();
  validate_problem(p.c());
  return p;
}

// The first GPU plugin built here that takes the problem, or null with the reason.
std::shared_ptr<const Plugin> gpu_plugin(const Registry& r, const moe_problem& p,
                                         std::string* why) {
  for (const char* name : {"trtllm_style", "gpu_oracle"}) {
    const auto plugin = r.find(name);
    if (plugin == nullptr) {
      *why += std::string(name) + " is not built; ";
      continue;
    }
    try {
      const Support s = plugin->supports(p);
      if (s.supported) return plugin;
      *why += std::string(name) + ": " + s.message + "; ";
    } catch (const Error& e) {
      *why += std::string(name) + ": " + e.what() + "; ";
    }
  }
  return nullptr;
}

// "" where a CUDA device is present, else why not.
std::string no_gpu() {
  try {
    int devices = 0;
    const int r = device::cuda_driver().device_get_count(&devices);
    return r == 0 && devices > 0 ? "" : "the driver sees no CUDA device";
  } catch (const Error& e) {
    return e.what();
  }
}

// A GPU, NCCL and a GPU plugin, and the engine's one-rank communicator (made here; each test
// destroys it, checking that it still can).
class EpOverAnEnginesNccl : public testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = no_gpu(); !why.empty()) GTEST_SKIP() << "no CUDA device: " << why;
    engine_ = load_engine_nccl();
    if (!engine_.why_not.empty()) GTEST_SKIP() << engine_.why_not;
    std::string why;
    plugin_ = gpu_plugin(registry_, problem_.c(), &why);
    if (plugin_ == nullptr) GTEST_SKIP() << "no GPU plugin takes the problem here: " << why;
  }

  // After the layer is prepared: the plugin has made device 0 current, where NCCL goes too.
  ncclComm_t make_comm() {
    ncclUniqueId id{};
    EXPECT_EQ(engine_.get_unique_id(&id), ncclSuccess);
    ncclComm_t comm = nullptr;
    EXPECT_EQ(engine_.comm_init_rank(&comm, 1, id, 0), ncclSuccess);
    return comm;
  }

  const Registry registry_ = registry_of({build_plugin_dir()});
  const Problem problem_ = one_rank_problem();
  EngineNccl engine_;
  std::shared_ptr<const Plugin> plugin_;
};

TEST_F(EpOverAnEnginesNccl, AOneRankCommunicatorRunsTheLayerAndStaysTheCallers) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 21);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  const auto ref = registry_.oracle();
  const Batch batch = random_batch(p, 24, 22, Scenario::kRandom);
  const Routing routing = route_batch(*ref, p, batch);
  ncclComm_t comm = make_comm();
  ASSERT_NE(comm, nullptr);

  const uint64_t digest = config_digest(p, plugin_->name(), 0);
  const HostTensor alone = ep::run_step(nullptr, layer, p, batch.hidden, routing);
  {
    const auto group = ep::Group::borrow(comm, 0, 1, plugin_, 60, digest);
    EXPECT_FALSE(group->owns_communicator());
    ep::StepStats stats;
    const HostTensor through = ep::run_step(group.get(), layer, p, batch.hidden, routing, &stats);
    EXPECT_EQ(stats.tokens_sent, 24);
    EXPECT_EQ(stats.tokens_received, 24);
    ASSERT_EQ(through.bytes(), alone.bytes());
    EXPECT_EQ(std::memcmp(through.raw(), alone.raw(), alone.bytes()), 0)
        << "through NCCL and alone differ: rel_err " << relative_l2(through, alone);
    const Layer ref_layer = ref->prepare(p, w.view(), {});
    const RunResult want = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
    EXPECT_LT(relative_l2(through, want.output), default_tolerance(MOE_FORMAT_BF16));
  }
  // The group is gone and the communicator is still the engine's: it answers, carries another
  // group's step, and is destroyed by its owner.
  int count = 0;
  EXPECT_EQ(engine_.comm_count(comm, &count), ncclSuccess);
  EXPECT_EQ(count, 1);
  {
    const auto again = ep::Group::borrow(comm, 0, 1, plugin_, 60, digest);
    const HostTensor out = ep::run_step(again.get(), layer, p, batch.hidden, routing);
    EXPECT_EQ(std::memcmp(out.raw(), alone.raw(), alone.bytes()), 0);
  }
  EXPECT_EQ(engine_.comm_destroy(comm), ncclSuccess);
}

TEST_F(EpOverAnEnginesNccl, AOneRankCommunicatorIsRefusedForTwoRanks) {
  const LayerWeights w = random_weights(problem_.c(), 23);
  const Layer layer = plugin_->prepare(problem_.c(), w.view(), {});  // device 0 made current
  ncclComm_t comm = make_comm();
  ASSERT_NE(comm, nullptr);
  expect_error([&] { ep::Group::borrow(comm, 0, 2, plugin_, 60, 1); }, MOE_STATUS_CONFIG_ERROR,
               {"the NCCL communicator is rank 0 of 1, but the config says ep_rank=0 of "
                "ep_size=2"});
  int count = 0;
  EXPECT_EQ(engine_.comm_count(comm, &count), ncclSuccess);  // the refusal left it alone
  EXPECT_EQ(engine_.comm_destroy(comm), ncclSuccess);
}

// ep::DeviceStep through the real NCCL (one rank: the all-gathers and the reduce-scatter are
// NCCL's own copies), on the plugin's device memory and the legacy default stream: the host
// step's bits, and again after a step of fewer tokens (buffers made once, for 32 a rank); then
// captured into a CUDA graph (ep::StepGraph) and replayed: the same bits.
TEST_F(EpOverAnEnginesNccl, TheDeviceStepThroughNcclIsTheHostStep) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 31);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  ncclComm_t comm = make_comm();
  ASSERT_NE(comm, nullptr);
  {
    const auto group =
        ep::Group::borrow(comm, 0, 1, plugin_, 60, config_digest(p, plugin_->name(), 0));
    const ep::DeviceStep step(group.get(), layer, p, 32);
    for (const int64_t tokens : {int64_t(29), int64_t(5)}) {
      const Batch batch = random_batch(p, tokens, 32 + tokens, Scenario::kRandom);
      const Routing routing = route_batch(*registry_.oracle(), p, batch);
      const int64_t h = p.hidden, k = topk_width(p);
      auto upload = [&](const HostTensor& t) {
        Buffer b(plugin_, t.bytes());
        b.upload(t.raw(), t.bytes());
        return b;
      };
      Buffer x = upload(batch.hidden), ids = upload(routing.ids), wt = upload(routing.weights),
             y(plugin_, size_t(tokens * h * 2));
      // The step's tensors: views of the buffers, for the eager runs and the graph alike.
      const moe_tensor vx = make_view(x.data(), MOE_DTYPE_BF16, {tokens, h}),
                       vids = make_view(ids.data(), MOE_DTYPE_I32, {tokens, k}),
                       vwt = make_view(wt.data(), MOE_DTYPE_F32, {tokens, k}),
                       vy = make_view(y.data(), MOE_DTYPE_BF16, {tokens, h});
      step.run(vx, vids, vwt, vy, nullptr);
      plugin_->sync();
      HostTensor out(MOE_DTYPE_BF16, {tokens, h});
      y.download(out.raw(), out.bytes());
      const HostTensor host = ep::run_step(group.get(), layer, p, batch.hidden, routing);
      EXPECT_EQ(std::memcmp(out.raw(), host.raw(), host.bytes()), 0)
          << tokens << " tokens: rel_err " << relative_l2(out, host);
      // Captured into a graph and replayed twice (the output poisoned in between): the same.
      const ep::StepGraph graph(step, vx, vids, vwt, vy);
      for (int replay = 0; replay < 2; ++replay) {
        const std::vector<uint8_t> poison(out.bytes(), 0xff);
        y.upload(poison.data(), poison.size());
        graph.launch();
        graph.sync();
        HostTensor again(MOE_DTYPE_BF16, {tokens, h});
        y.download(again.raw(), again.bytes());
        EXPECT_EQ(std::memcmp(again.raw(), host.raw(), host.bytes()), 0)
            << tokens << " tokens, replay " << replay;
      }
    }
  }
  EXPECT_EQ(engine_.comm_destroy(comm), ncclSuccess);
}

}  // namespace
}  // namespace moe::test
