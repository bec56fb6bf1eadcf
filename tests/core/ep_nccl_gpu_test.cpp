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

// A device step's tensors in `plugin`'s memory: the batch's hidden states and routing uploaded,
// an output buffer, and views of the four (the eager runs and a graph use the same).
struct StepTensors {
  Buffer x, ids, wt, y;
  moe_tensor vx{}, vids{}, vwt{}, vy{};
  HostTensor output() const {
    HostTensor o(MOE_DTYPE_BF16, {vy.shape[0], vy.shape[1]});
    y.download(o.raw(), o.bytes());
    return o;
  }
  void poison_output() const {
    const std::vector<uint8_t> poison(y.size(), 0xff);
    y.upload(poison.data(), poison.size());
  }
};
StepTensors stage_step(const std::shared_ptr<const Plugin>& plugin, const Batch& batch,
                       const Routing& routing) {
  auto upload = [&](const HostTensor& t) {
    Buffer b(plugin, t.bytes());
    b.upload(t.raw(), t.bytes());
    return b;
  };
  const int64_t tokens = batch.hidden.shape()[0], h = batch.hidden.shape()[1],
                w = routing.ids.shape()[1];
  StepTensors s{upload(batch.hidden), upload(routing.ids), upload(routing.weights),
                Buffer(plugin, size_t(tokens * h * 2))};
  s.vx = make_view(s.x.data(), MOE_DTYPE_BF16, {tokens, h});
  s.vids = make_view(s.ids.data(), MOE_DTYPE_I32, {tokens, w});
  s.vwt = make_view(s.wt.data(), MOE_DTYPE_F32, {tokens, w});
  s.vy = make_view(s.y.data(), MOE_DTYPE_BF16, {tokens, h});
  return s;
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
// captured into a CUDA graph (ep::StepGraph) and replayed: the same bits. Ragged, the rows padded
// to 32 on the device (driver copies and memsets): the layer then runs 32 rows, which may take
// another kernel path than T rows, so the host step within the layer tolerance, and the replays
// the eager step's bits. The same in 4 chunks (the collectives on the step's own stream, ordered
// against the caller's by events; a graph captures both): each chunk's layer runs fewer rows, so
// the host step within the tolerance too.
TEST_F(EpOverAnEnginesNccl, TheDeviceStepThroughNcclIsTheHostStep) {
  const moe_problem p = problem_.c();
  const LayerWeights w = random_weights(p, 31);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  ncclComm_t comm = make_comm();
  ASSERT_NE(comm, nullptr);
  {
    const auto group =
        ep::Group::borrow(comm, 0, 1, plugin_, 60, config_digest(p, plugin_->name(), 0));
    for (const auto& [ragged, chunks] :
         {std::pair{false, 1}, std::pair{true, 1}, std::pair{false, 4}, std::pair{true, 4}}) {
      const ep::DeviceStep step(group.get(), layer, p, 32, {}, ragged, chunks);
      const std::string how = fmt::format("{}{} chunk(s)", ragged ? "ragged, " : "", chunks);
      for (const int64_t tokens : {int64_t(29), int64_t(5)}) {
        const Batch batch = random_batch(p, tokens, 32 + tokens, Scenario::kRandom);
        const Routing routing = route_batch(*registry_.oracle(), p, batch);
        const StepTensors s = stage_step(plugin_, batch, routing);
        s.poison_output();
        step.run(s.vx, s.vids, s.vwt, s.vy, nullptr);
        plugin_->sync();
        const HostTensor out = s.output();
        const HostTensor host = ep::run_step(group.get(), layer, p, batch.hidden, routing);
        if (ragged || chunks > 1)
          EXPECT_LT(relative_l2(out, host), 1e-2) << tokens << " tokens, " << how;
        else
          EXPECT_EQ(std::memcmp(out.raw(), host.raw(), host.bytes()), 0)
              << tokens << " tokens: rel_err " << relative_l2(out, host);
        // Captured into a graph and replayed twice (the output poisoned in between): the same.
        const ep::StepGraph graph(step, s.vx, s.vids, s.vwt, s.vy);
        for (int replay = 0; replay < 2; ++replay) {
          s.poison_output();
          graph.launch();
          graph.sync();
          const HostTensor again = s.output();
          EXPECT_EQ(std::memcmp(again.raw(), out.raw(), out.bytes()), 0)
              << tokens << " tokens, replay " << replay << ", " << how;
        }
      }
    }
  }
  EXPECT_EQ(engine_.comm_destroy(comm), ncclSuccess);
}

// Sink experts through the device step on one NCCL rank: the gathered run with the sink columns
// cleared on the device (cuMemsetD2D32Async), then the home pass with the routed columns cleared,
// added through accumulate. Bit for bit what the plugin gives for the two runs from the host
// (run_layer on the routed columns, run_layer_onto on the sink columns), eager and as a replayed
// graph, and within the layer tolerance of the reference.
TEST_F(EpOverAnEnginesNccl, TheDeviceStepRunsSinkExpertsAtHome) {
  Problem sp = problem_;
  sp.raw().routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  sp.raw().routing_bias = 1;
  sp.raw().sink_experts = 2;
  sp.raw().sink_intermediate = sp.raw().intermediate;
  sp.finalize();
  const moe_problem p = sp.c();
  std::string why;
  const auto plugin = gpu_plugin(registry_, p, &why);
  if (plugin == nullptr || !plugin->info().accumulates())
    GTEST_SKIP() << "no GPU plugin that accumulates takes sink experts here: " << why;
  const LayerWeights w = random_weights(p, 51);
  const Layer layer = plugin->prepare(p, w.view(), {});
  ncclComm_t comm = make_comm();
  ASSERT_NE(comm, nullptr);
  {
    const auto group =
        ep::Group::borrow(comm, 0, 1, plugin, 60, config_digest(p, plugin->name(), 0));
    const ep::DeviceStep step(group.get(), layer, p, 32);
    const int64_t tokens = 27;
    const Batch batch = random_batch(p, tokens, 52, Scenario::kRandom);
    const Routing routing = route_batch(*registry_.oracle(), p, batch);
    const SinkSplit split = split_sink_columns(p, routing);
    ASSERT_GT(split.sink_slots, 0);
    const RunResult first = run_layer(layer, p, batch.hidden, split.routed);
    const RunResult want = run_layer_onto(layer, p, batch.hidden, split.home, first.output);
    const StepTensors s = stage_step(plugin, batch, routing);
    step.run(s.vx, s.vids, s.vwt, s.vy, nullptr);
    plugin->sync();
    const HostTensor out = s.output();
    EXPECT_EQ(std::memcmp(out.raw(), want.output.raw(), out.bytes()), 0)
        << "rel_err " << relative_l2(out, want.output);
    HostTensor ids_after(MOE_DTYPE_I32, {tokens, topk_width(p)});
    s.ids.download(ids_after.raw(), ids_after.bytes());
    EXPECT_EQ(std::memcmp(ids_after.raw(), routing.ids.raw(), ids_after.bytes()), 0)
        << "the caller's ids were changed";
    const Layer ref_layer = registry_.oracle()->prepare(p, w.view(), {});
    const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
    EXPECT_LT(relative_l2(out, ref.output), default_tolerance(MOE_FORMAT_BF16));
    const ep::StepGraph graph(step, s.vx, s.vids, s.vwt, s.vy);
    s.poison_output();
    graph.launch();
    graph.sync();
    const HostTensor again = s.output();
    EXPECT_EQ(std::memcmp(again.raw(), want.output.raw(), again.bytes()), 0) << "replayed graph";
  }
  EXPECT_EQ(engine_.comm_destroy(comm), ncclSuccess);
}

}  // namespace
}  // namespace moe::test
