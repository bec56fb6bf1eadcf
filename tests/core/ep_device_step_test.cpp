// ep::DeviceStep on the CPU: two ranks as two threads of this process over a fake NCCL whose
// collectives meet at a barrier (all-gather copies every rank's bytes; reduce-scatter sums each
// rank's bf16 block over the ranks in rank order in f32 and rounds once, as NCCL does for two
// ranks), with fixture_device_like (the reference in "device memory" that is host memory). The
// step's output must be the bf16 sum of both ranks' layers on the rank's own tokens, bit for bit,
// and within the layer tolerance of one whole layer.
#include <nccl.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <thread>
#include <tuple>
#include <vector>

#include "../support/test_env.hpp"
#include "device/cuda_driver.hpp"
#include "ep/nccl.hpp"
#include "moe/ep.hpp"
#include "moe/sdk/formats.hpp"

namespace moe::test {
namespace {

constexpr int kWorld = 2;

// The ranks' communicators; a collective's arguments are posted, all ranks meet, each reads what
// it needs, all meet again (so no rank's buffers change while another reads them).
struct FakeWorld {
  std::barrier<> meet{kWorld};
  const void* posted[kWorld] = {};
  std::atomic<int> gathers[kWorld] = {}, scatters[kWorld] = {};  // collectives each rank posted
} g_world;
struct FakeRank {
  int rank;
} g_ranks[kWorld] = {{0}, {1}};

int rank_of(ncclComm_t c) {
  return reinterpret_cast<FakeRank*>(c)->rank;
}

// The device a rank's thread has current (a test moves it after the group is made).
thread_local int32_t t_current_device = 0;

// What a rank's thread enqueued where, while a test collects it (FakeDriver, the fake NCCL).
thread_local std::vector<std::string>* t_log = nullptr;
std::string stream_name(const void* s) {
  return s == nullptr ? "caller" : fmt::format("s{}", reinterpret_cast<uintptr_t>(s) - 0x1000);
}
std::string event_name(const void* e) {
  return fmt::format("e{}", reinterpret_cast<uintptr_t>(e) - 0x2000);
}
void log_op(std::string op) {
  if (t_log != nullptr) t_log->push_back(std::move(op));
}

ep::NcclApi fake_world_nccl() {
  ep::NcclApi api{};
  api.comm_count = [](const ncclComm_t, int* n) { return *n = kWorld, ncclSuccess; };
  api.comm_user_rank = [](const ncclComm_t c, int* r) { return *r = rank_of(c), ncclSuccess; };
  api.comm_cu_device = [](const ncclComm_t, int* d) { return *d = 0, ncclSuccess; };
  api.comm_destroy = [](ncclComm_t) { return ncclSuccess; };
  api.comm_abort = [](ncclComm_t) { return ncclSuccess; };
  api.comm_get_async_error = [](ncclComm_t, ncclResult_t* r) {
    return *r = ncclSuccess, ncclSuccess;
  };
  api.all_gather = [](const void* mine, void* all, size_t n, ncclDataType_t dt, ncclComm_t c,
                      cudaStream_t stream) {
    const int me = rank_of(c);
    ++g_world.gathers[me];
    log_op("gather on " + stream_name(stream));
    g_world.posted[me] = mine;
    g_world.meet.arrive_and_wait();
    for (int r = 0; r < kWorld; ++r)
      std::memcpy(static_cast<uint8_t*>(all) + size_t(r) * n * (dt == ncclUint8 ? 1 : 4),
                  g_world.posted[r], n * (dt == ncclUint8 ? 1 : 4));
    g_world.meet.arrive_and_wait();
    return ncclSuccess;
  };
  api.reduce_scatter = [](const void* all, void* mine, size_t n, ncclDataType_t dt, ncclRedOp_t op,
                          ncclComm_t c, cudaStream_t stream) {
    if (dt != ncclBfloat16 || op != ncclSum) return ncclInvalidArgument;
    const int me = rank_of(c);
    log_op("scatter on " + stream_name(stream));
    ++g_world.scatters[me];
    g_world.posted[me] = all;
    g_world.meet.arrive_and_wait();
    auto* out = static_cast<uint16_t*>(mine);
    for (size_t i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (int r = 0; r < kWorld; ++r)
        sum += bf16_to_float(static_cast<const uint16_t*>(g_world.posted[r])[size_t(me) * n + i]);
      out[i] = float_to_bf16(sum);
    }
    g_world.meet.arrive_and_wait();
    return ncclSuccess;
  };
  api.error_string = [](ncclResult_t) { return "fake NCCL error"; };
  api.stream_query = [](void*) { return 0; };
  api.current_device = [] { return t_current_device; };
  api.library = "fake NCCL";
  return api;
}

// `p` with two sink experts (sigmoid routing with a bias, as Inkling's).
Problem with_sinks(Problem p) {
  p.raw().routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  p.raw().routing_bias = 1;
  p.raw().sink_experts = 2;
  p.raw().sink_intermediate = 16;
  p.finalize();
  validate_problem(p.c());
  return p;
}

// `step` on device buffers of `tokens` rows: hidden, ids, weights in, output out.
void run_on(const ep::DeviceStep& step, const moe_problem& p, int64_t tokens, const Buffer& x,
            const Buffer& ids, const Buffer& wt, const Buffer& y) {
  const int64_t h = p.hidden, w = topk_width(p);
  step.run(make_view(x.data(), MOE_DTYPE_BF16, {tokens, h}),
           make_view(ids.data(), MOE_DTYPE_I32, {tokens, w}),
           make_view(wt.data(), MOE_DTYPE_F32, {tokens, w}),
           make_view(y.data(), MOE_DTYPE_BF16, {tokens, h}), nullptr);
}

class DeviceStepTest : public testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_unique<Registry>(
        registry_of({build_plugin_dir(), fixture_dir("device_like"), fixture_dir("abi_v1_2")}));
    device_ = registry_->find("fixture_device_like");
    ASSERT_NE(device_, nullptr) << "the device_like fixture plugin was not built";
  }
  // A host tensor copied into a buffer of the device, and a view of it.
  Buffer upload(const HostTensor& t) {
    Buffer b(device_, t.bytes());
    b.upload(t.raw(), t.bytes());
    return b;
  }

  // Every rank on a thread of its own: `make(group, r)` builds its step over the fake world, which
  // runs on the rank's batch and routing; the ranks' outputs (a rank's exception fails the test).
  template <class Make>
  std::vector<HostTensor> run_ranks(Make make, const std::vector<Batch>& batches,
                                    const std::vector<Routing>& routings, const moe_problem& p) {
    const int64_t h = p.hidden;
    std::vector<HostTensor> out;
    for (int r = 0; r < kWorld; ++r)
      out.emplace_back(MOE_DTYPE_BF16,
                       std::vector<int64_t>{batches[size_t(r)].hidden.shape()[0], h});
    std::vector<std::string> errors(kWorld);
    std::vector<std::thread> ranks;
    for (int r = 0; r < kWorld; ++r)
      ranks.emplace_back([&, r] {
        try {
          auto group = ep::Group::borrow(nccl_, reinterpret_cast<ncclComm_t>(&g_ranks[r]), r,
                                         kWorld, device_, 10, 42);
          const ep::DeviceStep step = make(group.get(), r);
          const int64_t tokens = batches[size_t(r)].hidden.shape()[0];
          // (At least one row each: a rank of no tokens still hands the step real buffers.)
          Buffer x = upload(batches[size_t(r)].hidden), ids = upload(routings[size_t(r)].ids),
                 wt = upload(routings[size_t(r)].weights),
                 y(device_, size_t(std::max<int64_t>(tokens, 1) * h * 2));
          run_on(step, p, tokens, x, ids, wt, y);
          y.download(out[size_t(r)].raw(), out[size_t(r)].bytes());
        } catch (const std::exception& e) {
          errors[size_t(r)] = e.what();
        }
      });
    for (auto& t : ranks) t.join();
    for (int r = 0; r < kWorld; ++r) EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
    return out;
  }
  // Every rank's problem (make(r)), its experts of `weights` prepared by the device plugin, and
  // its own batch of `tokens` (seed seed + r) routed by the reference on `whole`.
  struct Ranks {
    std::vector<Problem> problems;
    std::vector<LayerWeights> local;
    std::vector<Layer> layers;
    std::vector<Batch> batches;
    std::vector<Routing> routings;
    std::vector<moe_problem> raw;
  };
  template <class MakeProblem>
  Ranks make_ranks(const Problem& whole, const LayerWeights& weights, int64_t tokens, uint64_t seed,
                   MakeProblem make) {
    return make_ranks(whole, weights, std::vector<int64_t>(kWorld, tokens), seed, make);
  }
  // The same with `tokens[r]` tokens on rank r.
  template <class MakeProblem>
  Ranks make_ranks(const Problem& whole, const LayerWeights& weights,
                   const std::vector<int64_t>& tokens, uint64_t seed, MakeProblem make) {
    Ranks k;
    for (int r = 0; r < kWorld; ++r) {
      k.problems.push_back(make(r));
      k.local.push_back(slice_local_experts(weights, k.problems.back().c()));
      k.layers.push_back(device_->prepare(k.problems.back().c(), k.local.back().view(), {}));
      k.batches.push_back(random_batch(whole.c(), tokens[size_t(r)], seed + r, Scenario::kRandom));
      k.routings.push_back(route_batch(*registry_->find("reference"), whole.c(), k.batches.back()));
      k.raw.push_back(k.problems.back().c());
    }
    return k;
  }
  // Every rank's routed layer on one rank's tokens, summed in rank order in f32.
  static std::vector<float> routed_sum(const std::vector<Layer>& layers,
                                       const std::vector<moe_problem>& problems, const Batch& batch,
                                       const Routing& routing) {
    const int64_t n = batch.hidden.numel();
    std::vector<float> sum(size_t(n), 0.0f);
    for (size_t q = 0; q < layers.size(); ++q) {
      const RunResult part = run_layer(layers[q], problems[q], batch.hidden, routing);
      for (int64_t i = 0; i < n; ++i)
        sum[size_t(i)] += bf16_to_float(part.output.data<uint16_t>()[i]);
    }
    return sum;
  }

  ep::NcclApi nccl_ = fake_world_nccl();
  std::unique_ptr<Registry> registry_;
  std::shared_ptr<const Plugin> device_;
};

TEST_F(DeviceStepTest, TwoRanksSumBothRanksExpertsOnEachRanksTokens) {
  const Problem whole = small_ep_problem(1, 0);
  const LayerWeights weights = random_weights(whole.c(), 31);
  const Layer one = device_->prepare(whole.c(), weights.view(), {});
  const int64_t tokens = 13, h = whole.c().hidden;
  const Ranks ranks =
      make_ranks(whole, weights, tokens, 40, [](int r) { return small_ep_problem(kWorld, r); });
  const auto& [problems, local, layers, batches, routings, raw] = ranks;
  const std::vector<HostTensor> out = run_ranks(
      [&](ep::Group* g, int r) { return ep::DeviceStep(g, layers[size_t(r)], raw[size_t(r)], 32); },
      batches, routings, whole.c());
  for (int r = 0; r < kWorld; ++r) {
    // Each rank's layer on this rank's tokens, summed in rank order in f32, rounded once.
    const std::vector<float> sum = routed_sum(layers, raw, batches[size_t(r)], routings[size_t(r)]);
    int64_t wrong = 0;
    for (int64_t i = 0; i < tokens * h; ++i)
      wrong += out[size_t(r)].data<uint16_t>()[i] != float_to_bf16(sum[size_t(i)]);
    EXPECT_EQ(wrong, 0) << "rank " << r;
    const RunResult alone =
        run_layer(one, whole.c(), batches[size_t(r)].hidden, routings[size_t(r)]);
    EXPECT_LT(relative_l2(out[size_t(r)], alone.output), 1e-2) << "rank " << r;
  }
}

// Ragged: the ranks step different batch sizes (13 and 5, then 0 and 9), each padded to
// max_tokens rows around the exchanges; each rank's output is still the bf16 sum of both ranks'
// layers on its own tokens, bit for bit, and a rank of no tokens joins the exchanges (the other
// would wait for it otherwise).
TEST_F(DeviceStepTest, RaggedRanksStepTheirOwnBatchSizes) {
  const Problem whole = small_ep_problem(1, 0);
  const LayerWeights weights = random_weights(whole.c(), 33);
  const int64_t h = whole.c().hidden;
  for (const std::vector<int64_t>& tokens :
       {std::vector<int64_t>{13, 5}, std::vector<int64_t>{0, 9}}) {
    const Ranks ranks =
        make_ranks(whole, weights, tokens, 70, [](int r) { return small_ep_problem(kWorld, r); });
    const auto& [problems, local, layers, batches, routings, raw] = ranks;
    const std::vector<HostTensor> out = run_ranks(
        [&](ep::Group* g, int r) {
          return ep::DeviceStep(g, layers[size_t(r)], raw[size_t(r)], 16, {}, true);
        },
        batches, routings, whole.c());
    for (int r = 0; r < kWorld; ++r) {
      const int64_t t = tokens[size_t(r)];
      ASSERT_EQ(out[size_t(r)].shape()[0], t);
      if (t == 0) continue;
      const std::vector<float> sum =
          routed_sum(layers, raw, batches[size_t(r)], routings[size_t(r)]);
      int64_t wrong = 0;
      for (int64_t i = 0; i < t * h; ++i)
        wrong += out[size_t(r)].data<uint16_t>()[i] != float_to_bf16(sum[size_t(i)]);
      EXPECT_EQ(wrong, 0) << "rank " << r << " of batch sizes " << tokens[0] << ", " << tokens[1];
    }
  }
}

// A chunked step (each rank's rows cut into chunks, each gathered, run and reduce-scattered on its
// own) gives one chunk's bits: 3 chunks of 13 rows, a chunk a row, ragged ranks (13 and 5 tokens)
// in 5 chunks of their 16 padded rows, and sink experts in 4 chunks (the gathered ids' sink
// columns cleared chunk by chunk). The one-chunk step is checked against the layers' sum above.
TEST_F(DeviceStepTest, ChunkedStepsGiveOneChunksBits) {
  struct Case {
    bool sinks;
    std::vector<int64_t> tokens;
    bool ragged;
    int32_t chunks;
  };
  for (const Case& c : {Case{false, {13, 13}, false, 3}, Case{false, {13, 13}, false, 13},
                        Case{false, {13, 5}, true, 5}, Case{true, {12, 12}, false, 4}}) {
    auto problem = [&](int world, int rank) {
      const Problem q = small_ep_problem(world, rank);
      return c.sinks ? with_sinks(q) : q;
    };
    const Problem whole = problem(1, 0);
    const LayerWeights weights = random_weights(whole.c(), 43);
    const Ranks ranks =
        make_ranks(whole, weights, c.tokens, 80, [&](int r) { return problem(kWorld, r); });
    // The collectives each rank posts: the group's and the step's checks, then per chunk three
    // all-gathers and a reduce-scatter.
    std::vector<std::pair<int, int>> posted;
    auto step = [&](int32_t chunks) {
      for (int r = 0; r < kWorld; ++r) g_world.gathers[r] = 0, g_world.scatters[r] = 0;
      std::vector<HostTensor> out = run_ranks(
          [&](ep::Group* g, int r) {
            return ep::DeviceStep(g, ranks.layers[size_t(r)], ranks.raw[size_t(r)], 16, {},
                                  c.ragged, chunks);
          },
          ranks.batches, ranks.routings, whole.c());
      posted.emplace_back(g_world.gathers[0].load(), g_world.scatters[0].load());
      return out;
    };
    const std::vector<HostTensor> one = step(1), chunked = step(c.chunks);
    EXPECT_EQ(posted[1].first - posted[0].first, 3 * (c.chunks - 1)) << c.chunks << " chunks";
    EXPECT_EQ(posted[1].second - posted[0].second, c.chunks - 1) << c.chunks << " chunks";
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_EQ(chunked[size_t(r)].bytes(), one[size_t(r)].bytes());
      EXPECT_EQ(std::memcmp(chunked[size_t(r)].raw(), one[size_t(r)].raw(), one[size_t(r)].bytes()),
                0)
          << "rank " << r << ", " << c.chunks << " chunks" << (c.ragged ? ", ragged" : "")
          << (c.sinks ? ", sink experts" : "");
    }
  }
}

// Ranks that would cut or pad their rows differently would post collectives that do not match:
// the step is refused on every rank at construction, naming both ways.
TEST_F(DeviceStepTest, RanksThatMakeTheirStepsDifferentlyAreRefusedOnEveryRank) {
  const Problem whole = small_ep_problem(1, 0);
  const LayerWeights weights = random_weights(whole.c(), 45);
  const Ranks ranks =
      make_ranks(whole, weights, 4, 90, [](int r) { return small_ep_problem(kWorld, r); });
  struct Way {
    bool ragged;
    int32_t chunks;
  };
  for (const auto& [way0, way1, want] :
       {std::tuple{Way{false, 2}, Way{false, 3}, std::pair{"chunks=2", "chunks=3"}},
        std::tuple{Way{true, 1}, Way{false, 1},
                   std::pair{"ragged=1 (max_tokens=16)", "ragged=0"}}}) {
    std::vector<std::thread> threads;
    for (int r = 0; r < kWorld; ++r)
      threads.emplace_back([&, r] {
        const Way way = r == 0 ? way0 : way1;
        auto group = ep::Group::borrow(nccl_, reinterpret_cast<ncclComm_t>(&g_ranks[r]), r, kWorld,
                                       device_, 10, 42);
        expect_error(
            [&] {
              ep::DeviceStep(group.get(), ranks.layers[size_t(r)], ranks.raw[size_t(r)], 16, {},
                             way.ragged, way.chunks);
            },
            MOE_STATUS_CONFIG_ERROR, {want.first, want.second, "every rank must make it alike"});
      });
    for (auto& t : threads) t.join();
  }
}

// A rank whose step cannot be made (here: more tokens a rank than its layer's capacity allows)
// still joins the group's agreement, so every rank throws at once, the others naming it and its
// status, instead of waiting in their first step's collectives.
TEST_F(DeviceStepTest, ARankThatCannotMakeItsStepFailsEveryRankAtOnce) {
  const Problem whole = small_ep_problem(1, 0);
  const LayerWeights weights = random_weights(whole.c(), 46);
  const Ranks ranks =
      make_ranks(whole, weights, 4, 91, [](int r) { return small_ep_problem(kWorld, r); });
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r)
    threads.emplace_back([&, r] {
      auto group = ep::Group::borrow(nccl_, reinterpret_cast<ncclComm_t>(&g_ranks[r]), r, kWorld,
                                     device_, 10, 42);
      // The layers take 64 rows: 2 ranks x 16 fit, 2 x 40 do not.
      const int64_t max_tokens = r == 1 ? 40 : 16;
      expect_error(
          [&] {
            ep::DeviceStep(group.get(), ranks.layers[size_t(r)], ranks.raw[size_t(r)], max_tokens);
          },
          MOE_STATUS_CAPACITY_EXCEEDED,
          r == 1 ? std::initializer_list<std::string>{"2 x 40 = 80", "max_tokens=64"}
                 : std::initializer_list<std::string>{
                       "rank 1 could not make its device step (capacity_exceeded",
                       "so rank 0 does not step either"});
    });
  for (auto& t : threads) t.join();
  // Long before the group's 10-second timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// A CUDA driver on host memory that calls every pointer device memory, does its copies and
// memsets at once, and logs what goes on which stream (streams s1, s2, ... and events e0, e1, ...
// in the order a thread makes them).
thread_local int t_streams = 0, t_events = 0;
device::CudaDriver fake_logging_driver() {
  device::CudaDriver d{};
  d.library = "fake driver";
  d.device_get_count = [](int* n) { return *n = 1, 0; };
  d.ctx_get_device = [](int* dev) { return *dev = 0, 0; };
  d.primary_ctx_retain = [](void** ctx, int) { return *ctx = reinterpret_cast<void*>(1), 0; };
  d.primary_ctx_release = [](int) { return 0; };
  d.ctx_push = [](void*) { return 0; };
  d.ctx_pop = [](void** ctx) { return *ctx = reinterpret_cast<void*>(1), 0; };
  d.pointer_get_attributes = [](unsigned count, int* attributes, void** data, uint64_t) {
    for (unsigned i = 0; i < count; ++i) {
      if (attributes[i] == device::kPointerMemoryType)
        *static_cast<unsigned*>(data[i]) = device::kMemoryTypeDevice;
      else if (attributes[i] == device::kPointerDeviceOrdinal)
        *static_cast<int*>(data[i]) = 0;
    }
    return 0;
  };
  d.stream_synchronize = [](void*) { return 0; };
  d.stream_query = [](void*) { return 0; };
  d.error_name = [](int, const char** name) { return *name = "FAKE", 0; };
  d.stream_create = [](void** s, unsigned) {
    return *s = reinterpret_cast<void*>(uintptr_t(0x1000 + ++t_streams)), 0;
  };
  d.stream_destroy = [](void*) { return 0; };
  d.memset_d2d32_async = [](uint64_t dst, size_t pitch, unsigned value, size_t width, size_t height,
                            void* s) {
    for (size_t r = 0; r < height; ++r)
      for (size_t c = 0; c < width; ++c)
        std::memcpy(reinterpret_cast<uint8_t*>(dst) + r * pitch + c * 4, &value, 4);
    log_op("memset on " + stream_name(s));
    return 0;
  };
  d.memcpy_dtod_async = [](uint64_t dst, uint64_t src, size_t bytes, void* s) {
    std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    log_op("copy on " + stream_name(s));
    return 0;
  };
  d.event_create = [](void** e, unsigned) {
    return *e = reinterpret_cast<void*>(uintptr_t(0x2000 + t_events++)), 0;
  };
  d.event_record = [](void* e, void* s) {
    log_op(fmt::format("record {} on {}", event_name(e), stream_name(s)));
    return 0;
  };
  d.event_destroy = [](void*) { return 0; };
  d.stream_wait_event = [](void* s, void* e, unsigned) {
    log_op(fmt::format("{} waits {}", stream_name(s), event_name(e)));
    return 0;
  };
  return d;
}

// The chunked step's two streams, on that driver (each rank's thread logs its own), with sink
// experts so that each chunk's layer shows (its gathered ids' sink columns cleared first): the
// collectives all on the step's stream s1 in the order gather 0, gather 1, scatter 0, gather 2,
// ...; each chunk's layer after the event of its gathers, its reduce-scatter after the event of
// its layer; the fork first, the join before the home pass. And the one-chunk step's bits.
TEST_F(DeviceStepTest, AChunkedStepOrdersItsTwoStreamsByEvents) {
  const device::CudaDriver fake = fake_logging_driver();
  device::set_cuda_driver_for_tests(&fake);
  struct Restore {
    ~Restore() { device::set_cuda_driver_for_tests(nullptr); }
  } restore;
  const Problem whole = with_sinks(small_ep_problem(1, 0));
  const LayerWeights weights = random_weights(whole.c(), 47);
  const Ranks ranks = make_ranks(whole, weights, 9, 100,
                                 [](int r) { return with_sinks(small_ep_problem(kWorld, r)); });
  constexpr int32_t kChunks = 3;
  std::vector<std::vector<std::string>> logs(kWorld);
  std::vector<HostTensor> outs[2];
  for (int32_t chunks : {1, kChunks}) {
    for (int r = 0; r < kWorld; ++r)
      outs[chunks > 1].emplace_back(MOE_DTYPE_BF16, std::vector<int64_t>{9, whole.c().hidden});
    std::vector<std::thread> threads;
    for (int r = 0; r < kWorld; ++r)
      threads.emplace_back([&, r] {
        t_streams = 0, t_events = 0;
        auto group = ep::Group::borrow(nccl_, reinterpret_cast<ncclComm_t>(&g_ranks[r]), r, kWorld,
                                       device_, 10, 42);
        const ep::DeviceStep step(group.get(), ranks.layers[size_t(r)], ranks.raw[size_t(r)], 16,
                                  {}, false, chunks);
        Buffer x = upload(ranks.batches[size_t(r)].hidden),
               ids = upload(ranks.routings[size_t(r)].ids),
               wt = upload(ranks.routings[size_t(r)].weights),
               y(device_, size_t(9 * whole.c().hidden * 2));
        std::vector<std::string> log;
        t_log = &log;
        run_on(step, ranks.raw[size_t(r)], 9, x, ids, wt, y);
        t_log = nullptr;
        y.download(outs[chunks > 1][size_t(r)].raw(), outs[chunks > 1][size_t(r)].bytes());
        if (chunks > 1) logs[size_t(r)] = log;
      });
    for (auto& t : threads) t.join();
  }
  // Events: fork e0, join e1, chunk c's gathers e(2 + 2c), its layer e(3 + 2c).
  std::vector<std::string> want = {"record e0 on caller", "s1 waits e0"};
  auto gather = [&](int c) {
    for (int i = 0; i < 3; ++i) want.push_back("gather on s1");
    want.push_back(fmt::format("record e{} on s1", 2 + 2 * c));
  };
  gather(0);
  for (int c = 0; c < kChunks; ++c) {
    if (c + 1 < kChunks) gather(c + 1);
    want.push_back(fmt::format("caller waits e{}", 2 + 2 * c));
    want.push_back("memset on caller");  // the chunk's sink columns, then its layer
    want.push_back(fmt::format("record e{} on caller", 3 + 2 * c));
    want.push_back(fmt::format("s1 waits e{}", 3 + 2 * c));
    want.push_back("scatter on s1");
  }
  for (const char* op :
       {"record e1 on s1", "caller waits e1", "copy on caller", "memset on caller"})
    want.push_back(op);  // the join, then the home pass's ids (copied, routed columns cleared)
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(logs[size_t(r)], want) << "rank " << r;
    EXPECT_EQ(
        std::memcmp(outs[1][size_t(r)].raw(), outs[0][size_t(r)].raw(), outs[0][size_t(r)].bytes()),
        0)
        << "rank " << r;
  }
}

TEST_F(DeviceStepTest, OneRankIsTheLayersRun) {
  const Problem p = small_ep_problem(1, 0);
  const LayerWeights weights = random_weights(p.c(), 5);
  const Layer layer = device_->prepare(p.c(), weights.view(), {});
  const int64_t tokens = 7, h = p.c().hidden;
  const Batch batch = random_batch(p.c(), tokens, 6, Scenario::kRandom);
  const Routing routing = route_batch(*registry_->find("reference"), p.c(), batch);
  const ep::DeviceStep step(nullptr, layer, p.c(), 8);
  Buffer x = upload(batch.hidden), ids = upload(routing.ids), wt = upload(routing.weights),
         y(device_, size_t(tokens * h * 2));
  run_on(step, p.c(), tokens, x, ids, wt, y);
  HostTensor out(MOE_DTYPE_BF16, {tokens, h});
  y.download(out.raw(), out.bytes());
  const RunResult want = run_layer(layer, p.c(), batch.hidden, routing);
  EXPECT_EQ(std::memcmp(out.raw(), want.output.raw(), out.bytes()), 0);
}

// A rank that steps with another device current than its communicator's is refused before it
// posts a collective, for any chunk count (the layer's own check came only at the first chunk's
// launch, after the first all-gathers), so no rank waits on a half-posted step.
TEST_F(DeviceStepTest, AStepWithAnotherDeviceCurrentIsRefusedBeforeAnyCollective) {
  const Problem whole = small_ep_problem(1, 0);
  const LayerWeights weights = random_weights(whole.c(), 17);
  const Ranks ranks =
      make_ranks(whole, weights, 6, 70, [](int r) { return small_ep_problem(kWorld, r); });
  for (const int32_t chunks : {1, 3}) {
    std::vector<std::string> errors(kWorld);
    std::vector<int> posted(kWorld, -1);
    std::vector<std::thread> threads;
    for (int r = 0; r < kWorld; ++r)
      threads.emplace_back([&, r] {
        auto group = ep::Group::borrow(nccl_, reinterpret_cast<ncclComm_t>(&g_ranks[r]), r, kWorld,
                                       device_, 10, 42);
        const ep::DeviceStep step(group.get(), ranks.layers[size_t(r)], ranks.raw[size_t(r)], 8, {},
                                  false, chunks);
        Buffer x = upload(ranks.batches[size_t(r)].hidden),
               ids = upload(ranks.routings[size_t(r)].ids),
               wt = upload(ranks.routings[size_t(r)].weights), y(device_, size_t(6 * 64 * 2));
        const int before = g_world.gathers[r].load();
        t_current_device = 1;
        try {
          run_on(step, ranks.raw[size_t(r)], 6, x, ids, wt, y);
        } catch (const Error& e) {
          errors[size_t(r)] = fmt::format("{} {}", int(e.status()), e.what());
        }
        t_current_device = 0;
        posted[size_t(r)] = g_world.gathers[r].load() - before;
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_THAT(errors[size_t(r)],
                  testing::HasSubstr(fmt::format("{} rank {} of 2: the device step runs with "
                                                 "cuda:1 current, but the group's NCCL "
                                                 "communicator and the layer's buffers are on "
                                                 "cuda:0",
                                                 int(MOE_STATUS_INVALID_ARGUMENT), r)))
          << "chunks " << chunks;
      EXPECT_EQ(posted[size_t(r)], 0) << "rank " << r << " posted collectives, chunks " << chunks;
    }
  }
}

TEST_F(DeviceStepTest, BadInputIsNamed) {
  Problem p = small_ep_problem(1, 0);
  const LayerWeights weights = random_weights(p.c(), 5);
  const Layer layer = device_->prepare(p.c(), weights.view(), {});
  const ep::DeviceStep step(nullptr, layer, p.c(), 4);
  const int64_t h = p.c().hidden, w = topk_width(p.c());
  Buffer x(device_, size_t(8 * h * 2)), ids(device_, size_t(8 * w * 4)),
      wt(device_, size_t(8 * w * 4)), y(device_, size_t(8 * h * 2));
  auto run = [&](int64_t t, moe_dtype ids_dtype) {
    step.run(make_view(x.data(), MOE_DTYPE_BF16, {t, h}), make_view(ids.data(), ids_dtype, {t, w}),
             make_view(wt.data(), MOE_DTYPE_F32, {t, w}),
             make_view(y.data(), MOE_DTYPE_BF16, {t, h}), nullptr);
  };
  expect_error([&] { run(5, MOE_DTYPE_I32); }, MOE_STATUS_CAPACITY_EXCEEDED,
               {"up to 4 tokens a rank", "not 5"});
  expect_error([&] { run(3, MOE_DTYPE_F32); }, MOE_STATUS_DTYPE_MISMATCH,
               {"topk_ids: expected [3, 2] i32, got [3, 2] f32"});
  expect_error(
      [&] {
        moe_tensor strided = make_view(x.data(), MOE_DTYPE_BF16, {2, h});
        strided.strides[0] = 2 * h, strided.strides[1] = 1;  // every other row
        step.run(strided, make_view(ids.data(), MOE_DTYPE_I32, {2, w}),
                 make_view(wt.data(), MOE_DTYPE_F32, {2, w}),
                 make_view(y.data(), MOE_DTYPE_BF16, {2, h}), nullptr);
      },
      MOE_STATUS_INVALID_ARGUMENT, {"hidden:", "not contiguous row-major"});
  expect_error([&] { ep::DeviceStep(nullptr, layer, p.c(), 0); }, MOE_STATUS_INVALID_ARGUMENT,
               {"max_tokens >= 1"});
  EXPECT_FALSE(step.ragged());
  EXPECT_TRUE(ep::DeviceStep(nullptr, layer, p.c(), 4, {}, true).ragged());
  // Chunks: 1 to 64, no more than max_tokens (every chunk holds a row of each rank).
  EXPECT_EQ(step.chunks(), 1);
  EXPECT_EQ(ep::DeviceStep(nullptr, layer, p.c(), 4, {}, false, 4).chunks(), 4);
  for (int32_t bad : {0, -2, 5})
    expect_error([&] { ep::DeviceStep(nullptr, layer, p.c(), 4, {}, false, bad); },
                 MOE_STATUS_INVALID_ARGUMENT,
                 {"1 to 64 chunks", "max_tokens=4", fmt::format("not {}", bad)});
  expect_error([&] { ep::DeviceStep(nullptr, layer, p.c(), 64, {}, false, 65); },
               MOE_STATUS_INVALID_ARGUMENT, {"1 to 64 chunks", "not 65"});
  // The layer runs every rank's tokens at once: they must fit its max_tokens (64).
  expect_error([&] { ep::DeviceStep(nullptr, layer, p.c(), 65); }, MOE_STATUS_CAPACITY_EXCEEDED,
               {"1 x 65 = 65", "max_tokens=64"});
  Problem shared = p;
  shared.raw().shared_intermediate = 16;
  shared.finalize();
  expect_error([&] { ep::DeviceStep(nullptr, layer, shared.c(), 4); }, MOE_STATUS_UNSUPPORTED,
               {"shared expert (shared_intermediate=16)", "ep::split_shared_expert"});
  // A shared expert's layer must be one expert of the same hidden size, of the same plugin, and
  // that plugin must add into the output (ABI 1.4).
  expect_error(
      [&] {
        ep::DeviceStep(nullptr, layer, p.c(), 4, {&layer, p.c()});
      },
      MOE_STATUS_INVALID_ARGUMENT, {"one expert of hidden=64", "not experts=8"});
  const LayerWeights shared_weights = random_weights(shared.c(), 6);
  const ep::SharedSplit split = ep::split_shared_expert(shared.c(), shared_weights.view());
  const auto old = registry_->find("fixture_abi_v1_2");
  ASSERT_NE(old, nullptr);
  const Layer other = old->prepare(split.shared.c(), split.shared_weights, {});
  expect_error(
      [&] {
        ep::DeviceStep(nullptr, layer, p.c(), 4, {&other, split.shared.c()});
      },
      MOE_STATUS_INVALID_ARGUMENT,
      {"plugin 'fixture_abi_v1_2''s", "plugin 'fixture_device_like''s"});
  const Layer old_routed = old->prepare(p.c(), weights.view(), {});
  expect_error(
      [&] {
        ep::DeviceStep(nullptr, old_routed, p.c(), 4, {&other, split.shared.c()});
      },
      MOE_STATUS_UNSUPPORTED,
      {"plugin 'fixture_abi_v1_2' does not declare MOE_RUN_FEATURE_ACCUMULATE"});
  // Sink experts on several ranks run in a home pass that adds into the output (ABI 1.4).
  Problem sinks = with_sinks(small_ep_problem(kWorld, 0));
  const LayerWeights sink_weights = random_weights(sinks.c(), 7);
  const Layer old_sinks = old->prepare(sinks.c(), sink_weights.view(), {});
  ep::NcclApi lone = nccl_;  // rank 0 of two on this thread alone: its own bytes everywhere
  lone.all_gather = [](const void* mine, void* all, size_t n, ncclDataType_t dt, ncclComm_t,
                       cudaStream_t) {
    const size_t bytes = n * (dt == ncclUint8 ? 1 : 4);
    for (int r = 0; r < kWorld; ++r)
      std::memcpy(static_cast<uint8_t*>(all) + r * bytes, mine, bytes);
    return ncclSuccess;
  };
  auto group = ep::Group::borrow(lone, reinterpret_cast<ncclComm_t>(&g_ranks[0]), 0, kWorld,
                                 device_, 10, 42);
  expect_error([&] { ep::DeviceStep(group.get(), old_sinks, sinks.c(), 4); },
               MOE_STATUS_UNSUPPORTED,
               {"sink experts (2)", "plugin 'fixture_abi_v1_2' does not declare"});
}

// Sink experts (replicated on every rank) leave the gathered run and are added on each rank's own
// tokens after the reduce-scatter by a home pass with the routed columns cleared: bf16(the
// reduce-scatter sum + the home pass's fp64 result), bit for bit, and within the layer tolerance of
// the whole layer on one rank. Every token reaches the sinks at least once (some columns -1).
TEST_F(DeviceStepTest, TwoRanksAddTheSinkExpertsOnTheirOwnTokens) {
  const Problem whole = with_sinks(small_ep_problem(1, 0));
  const LayerWeights weights = random_weights(whole.c(), 41);
  const Layer one = device_->prepare(whole.c(), weights.view(), {});
  const int64_t tokens = 12, h = whole.c().hidden;
  const Ranks ranks = make_ranks(whole, weights, tokens, 60,
                                 [](int r) { return with_sinks(small_ep_problem(kWorld, r)); });
  const auto& [problems, local, layers, batches, routings, raw] = ranks;
  const std::vector<HostTensor> out = run_ranks(
      [&](ep::Group* g, int r) { return ep::DeviceStep(g, layers[size_t(r)], raw[size_t(r)], 16); },
      batches, routings, whole.c());
  for (int r = 0; r < kWorld; ++r) {
    const Routing& routing = routings[size_t(r)];
    const SinkSplit split = split_sink_columns(whole.c(), routing);
    ASSERT_GT(split.sink_slots, 0) << "the routing sent no token to a sink";
    const std::vector<float> sum = routed_sum(layers, raw, batches[size_t(r)], split.routed);
    const RunResult sinks = run_layer(layers[size_t(r)], raw[size_t(r)], batches[size_t(r)].hidden,
                                      split.home, MOE_DTYPE_F64);
    int64_t wrong = 0;
    for (int64_t i = 0; i < tokens * h; ++i) {
      const double part = bf16_to_float(float_to_bf16(sum[size_t(i)]));
      wrong += out[size_t(r)].data<uint16_t>()[i] !=
               double_to_bf16(part + sinks.output.data<double>()[i]);
    }
    EXPECT_EQ(wrong, 0) << "rank " << r;
    const RunResult alone = run_layer(one, whole.c(), batches[size_t(r)].hidden, routing);
    EXPECT_LT(relative_l2(out[size_t(r)], alone.output), 1e-2) << "rank " << r;
  }
}

// A shared expert (split off, its own one-expert layer) is added on each rank's own tokens after
// the reduce-scatter: bf16(reduce-scatter sum + the shared layer's fp64 result), bit for bit, and
// within the layer tolerance of the whole layer on one rank.
TEST_F(DeviceStepTest, TwoRanksAddTheSharedExpertOnTheirOwnTokens) {
  Problem whole = small_ep_problem(1, 0);
  whole.raw().shared_intermediate = 24;
  whole.finalize();
  const LayerWeights weights = random_weights(whole.c(), 37);
  const Layer one = device_->prepare(whole.c(), weights.view(), {});
  const int64_t tokens = 11, h = whole.c().hidden;
  std::vector<Problem> problems;
  std::vector<LayerWeights> local;
  std::vector<ep::SharedSplit> splits;
  std::vector<Layer> layers, shared_layers;
  std::vector<Batch> batches;
  std::vector<Routing> routings;
  for (int r = 0; r < kWorld; ++r) {
    Problem pr = small_ep_problem(kWorld, r);
    pr.raw().shared_intermediate = 24;
    pr.finalize();
    problems.push_back(pr);
    local.push_back(slice_local_experts(weights, problems.back().c()));
    splits.push_back(ep::split_shared_expert(problems.back().c(), local.back().view()));
    layers.push_back(device_->prepare(splits.back().routed.c(), splits.back().routed_weights, {}));
    shared_layers.push_back(
        device_->prepare(splits.back().shared.c(), splits.back().shared_weights, {}));
    batches.push_back(random_batch(whole.c(), tokens, 50 + r, Scenario::kRandom));
    routings.push_back(route_batch(*registry_->find("reference"), whole.c(), batches.back()));
  }
  std::vector<moe_problem> routed;
  for (const ep::SharedSplit& sp : splits) routed.push_back(sp.routed.c());
  const std::vector<HostTensor> out = run_ranks(
      [&](ep::Group* g, int r) {
        return ep::DeviceStep(g, layers[size_t(r)], routed[size_t(r)], 16,
                              {&shared_layers[size_t(r)], splits[size_t(r)].shared.c()});
      },
      batches, routings, whole.c());
  for (int r = 0; r < kWorld; ++r) {
    const std::vector<float> sum =
        routed_sum(layers, routed, batches[size_t(r)], routings[size_t(r)]);
    HostTensor ids(MOE_DTYPE_I32, {tokens, 1}), ones(MOE_DTYPE_F32, {tokens, 1});
    for (int64_t t = 0; t < tokens; ++t) ids.data<int32_t>()[t] = 0, ones.data<float>()[t] = 1.0f;
    const RunResult home = run_layer(shared_layers[size_t(r)], splits[size_t(r)].shared.c(),
                                     batches[size_t(r)].hidden, Routing{ids, ones}, MOE_DTYPE_F64);
    int64_t wrong = 0;
    for (int64_t i = 0; i < tokens * h; ++i) {
      const double routed = bf16_to_float(float_to_bf16(sum[size_t(i)]));
      wrong += out[size_t(r)].data<uint16_t>()[i] !=
               double_to_bf16(routed + home.output.data<double>()[i]);
    }
    EXPECT_EQ(wrong, 0) << "rank " << r;
    const RunResult alone =
        run_layer(one, whole.c(), batches[size_t(r)].hidden, routings[size_t(r)]);
    EXPECT_LT(relative_l2(out[size_t(r)], alone.output), 1e-2) << "rank " << r;
  }
}

}  // namespace
}  // namespace moe::test
