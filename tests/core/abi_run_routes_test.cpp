// ABI 1.6 (docs/design.md §2.7): moe_run_args.router_logits asks run() to route the batch itself
// and run the layer from the topk tensors it writes, for plugins whose moe_plugin_info.run_features
// declare MOE_RUN_FEATURE_ROUTES. The SDK's table declares it for every backend that routes, routes
// with the backend's route() on the run's stream and workspace, and refuses what the backend does
// not route; the core refuses logits before an older plugin (which never reads them) could run
// from whatever the topk tensors hold; the reference gives the bits of route() then run().
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../support/raw_layer.hpp"
#include "../support/sdk_test_backend.hpp"
#include "../support/test_env.hpp"
#include "loading/bench_runs.hpp"
#include "moe/sdk/backend.hpp"

namespace moe::test {
namespace {

// Older callers' struct sizes: 1.1-1.3 (to `stream`), 1.4-1.5 (with accumulate).
constexpr size_t k13RunArgsSize = detail::kRunArgsSizeBefore14;
constexpr size_t k15RunArgsSize = detail::kRunArgsSizeBefore16;

// ---- the SDK's table builder --------------------------------------------------------------------

// The small problem, routed by softmax_topk (what RoutingBackend routes).
moe_problem softmax_problem() {
  Problem q = small_problem();
  q.raw().routing = MOE_ROUTING_SOFTMAX_TOPK;
  return q.c();
}

// A host backend that routes softmax_topk (every token to experts 0..k-1, weight 1) and records
// the order of its calls; its routing needs 100 bytes of workspace a token, its layer none.
class RoutingBackend : public Bf16TestBackend {
 public:
  static inline std::vector<std::string> calls;

  static sdk::BackendInfo info() {
    sdk::BackendInfo i = bf16_info("sdk_routes", "test backend: routing in run");
    i.routings = {MOE_ROUTING_SOFTMAX_TOPK};
    return i;
  }
  size_t route_workspace_size(const moe_problem&, int64_t tokens) const {
    return size_t(100 * tokens);
  }
  void route(const moe_problem& p, const moe_route_args& a, int64_t tokens) const {
    calls.push_back("route");
    auto* ids = static_cast<int32_t*>(a.topk_ids.data);
    auto* weights = static_cast<float*>(a.topk_weights.data);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < p.top_k; ++j) {
        ids[t * p.top_k + j] = int32_t(j);
        weights[t * p.top_k + j] = 1.0f;
      }
  }
  void run(Layer&, const moe_run_args& a) const {
    calls.push_back("run " + std::to_string(static_cast<const int32_t*>(a.topk_ids.data)[1]));
  }
};

// The same, routing inside its own run for batches of up to 3 tokens (RoutesInRun): there the
// SDK checks the routing arguments but calls no route().
class FusingBackend : public RoutingBackend {
 public:
  static sdk::BackendInfo info() {
    sdk::BackendInfo i = bf16_info("sdk_fuses", "test backend: routing inside its run");
    i.routings = {MOE_ROUTING_SOFTMAX_TOPK};
    return i;
  }
  bool routes_in_run(const Layer&, const moe_run_args& a) const { return a.hidden.shape[0] <= 3; }
  void run(Layer&, const moe_run_args& a) const {
    calls.push_back(std::string(sdk::run_routes(a) ? "run routing " : "run ") +
                    std::to_string(a.hidden.shape[0]));
  }
};

// The same without route(): it cannot route, so it declares no routing in run.
class PlainBackend : public Bf16TestBackend {
 public:
  static inline int runs = 0;
  static sdk::BackendInfo info() { return bf16_info("sdk_plain", "test backend: no routing"); }
  void run(Layer&, const moe_run_args&) const { ++runs; }
};

// A layer of `api` for `p` (RawLayer) and a run's tensors on the host: T tokens of hidden states,
// logits, topk outputs and output.
struct RawRun : RawLayer {
  HostTensor hidden, logits, ids, weights, output;
  std::vector<uint8_t> workspace;
  RawRun(const moe_plugin_api* a, const moe_problem& p, const moe_weights& w, int64_t tokens)
      : RawLayer(a, p, w),
        hidden(MOE_DTYPE_BF16, {tokens, p.hidden}),
        logits(MOE_DTYPE_F32, {tokens, p.experts}),
        ids(MOE_DTYPE_I32, {tokens, p.top_k}),
        weights(MOE_DTYPE_F32, {tokens, p.top_k}),
        output(MOE_DTYPE_BF16, {tokens, p.hidden}) {
    ids.fill_bytes(0xFF);
  }
  size_t workspace_size(int64_t tokens) const {
    size_t bytes = 0;
    EXPECT_EQ(api->workspace_size(layer, tokens, &bytes), MOE_STATUS_OK) << api->last_error();
    return bytes;
  }
  // The run's arguments: these tensors, the workspace, the logits where asked.
  moe_run_args args(bool with_logits) {
    moe_run_args a{};
    a.struct_size = sizeof(a);
    a.layer = layer;
    a.hidden = hidden.view();
    a.topk_ids = ids.view();
    a.topk_weights = weights.view();
    a.output = output.view();
    a.workspace = workspace.empty() ? nullptr : workspace.data();
    a.workspace_size = workspace.size();
    if (with_logits) a.router_logits = logits.view();
    return a;
  }
  moe_status run(bool with_logits, size_t struct_size = sizeof(moe_run_args)) {
    moe_run_args a = args(with_logits);
    a.struct_size = struct_size;
    return api->run(&a);
  }
};

TEST(SdkRunRoutes, GetInfoDeclaresRoutingInRunForEveryBackendThatRoutes) {
  EXPECT_EQ(run_features_of(sdk::plugin_api<RoutingBackend>()), MOE_RUN_FEATURE_ROUTES);
  EXPECT_EQ(run_features_of(sdk::plugin_api<PlainBackend>()), 0u);
}

TEST(SdkRunRoutes, RunRoutesFirstOnItsWorkspaceAndRunsFromTheIdsItWrote) {
  const moe_problem p = softmax_problem();
  const LayerWeights w = random_weights(p, 3);
  RawRun r(sdk::plugin_api<RoutingBackend>(), p, w.view(), 5);
  // The layer needs none; routing 5 tokens needs 500 bytes, so the run's workspace holds them.
  EXPECT_EQ(r.workspace_size(5), 500u);
  EXPECT_EQ(r.workspace_size(0), 0u);
  r.workspace.resize(500);
  RoutingBackend::calls.clear();
  ASSERT_EQ(r.run(true), MOE_STATUS_OK) << r.api->last_error();
  EXPECT_EQ(RoutingBackend::calls, (std::vector<std::string>{"route", "run 1"}));
  // Without logits, or from a 1.5 caller's struct (logits past its end are not read): run alone.
  r.ids.fill_bytes(0xFF);
  RoutingBackend::calls.clear();
  ASSERT_EQ(r.run(false), MOE_STATUS_OK) << r.api->last_error();
  ASSERT_EQ(r.run(true, k15RunArgsSize), MOE_STATUS_OK) << r.api->last_error();
  EXPECT_EQ(RoutingBackend::calls, (std::vector<std::string>{"run -1", "run -1"}));

  // Too little workspace for the routing, and logits for another batch size: refused, nothing run.
  RoutingBackend::calls.clear();
  r.workspace.resize(499);
  EXPECT_EQ(r.run(true), MOE_STATUS_CAPACITY_EXCEEDED);
  EXPECT_THAT(r.api->last_error(),
              testing::HasSubstr("smaller than the 500 bytes routing 5 tokens needs"));
  r.workspace.resize(500);
  r.logits = HostTensor(MOE_DTYPE_F32, {4, p.experts});
  EXPECT_EQ(r.run(true), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(r.api->last_error(), testing::HasSubstr("router_logits has 4 rows but hidden 5"));
  EXPECT_TRUE(RoutingBackend::calls.empty());
}

// A backend that keeps a whole copy of each run (as cutlass_mega's ValidatedRuns does).
class CopyingBackend : public Bf16TestBackend {
 public:
  static inline moe_run_args last{};
  static sdk::BackendInfo info() { return bf16_info("sdk_copies", "test backend: copies runs"); }
  void run(Layer&, const moe_run_args& a) const { last = a; }
};

// `bytes` of `run` copied to the end of a page whose next page is inaccessible: a read past the
// caller's struct faults instead of passing unseen.
class GuardedRun {
 public:
  GuardedRun(const moe_run_args& run, size_t bytes) : page_(size_t(sysconf(_SC_PAGESIZE))) {
    base_ = mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(base_, MAP_FAILED);
    EXPECT_EQ(mprotect(static_cast<char*>(base_) + page_, page_, PROT_NONE), 0);
    at_ = reinterpret_cast<moe_run_args*>(static_cast<char*>(base_) + page_ - bytes);
    std::memcpy(static_cast<void*>(at_), &run, bytes);
    at_->struct_size = bytes;
  }
  ~GuardedRun() { munmap(base_, 2 * page_); }
  const moe_run_args* get() const { return at_; }

 private:
  size_t page_;
  void* base_ = nullptr;
  moe_run_args* at_ = nullptr;
};

// An older caller's shorter struct (1.1-1.3: 496 bytes, 1.4-1.5: 504) reaches the backend as this
// build's, its later fields zero, and nothing reads past the caller's bytes.
TEST(SdkRunRoutes, AnOlderCallersStructIsReadWithinItsBytes) {
  const Problem q = small_problem();
  const moe_problem p = q.c();
  const LayerWeights w = random_weights(p, 4);
  RawRun r(sdk::plugin_api<CopyingBackend>(), p, w.view(), 2);
  moe_run_args a = r.args(false);
  a.workspace_size = 12345;
  for (const size_t bytes : {k13RunArgsSize, k15RunArgsSize}) {
    CopyingBackend::last = moe_run_args{};
    const GuardedRun guarded(a, bytes);
    ASSERT_EQ(r.api->run(guarded.get()), MOE_STATUS_OK) << r.api->last_error();
    EXPECT_EQ(CopyingBackend::last.struct_size, sizeof(moe_run_args)) << bytes;
    EXPECT_EQ(CopyingBackend::last.workspace_size, 12345u) << bytes;
    EXPECT_EQ(CopyingBackend::last.accumulate, 0) << bytes;
    EXPECT_EQ(CopyingBackend::last.router_logits.data, nullptr) << bytes;
  }
}

// A run that routes is checked whole before the routing writes its outputs: refused for its
// output, it leaves topk_ids as they were and calls no route().
TEST(SdkRunRoutes, ARunRefusedForItsOutputRoutesNothing) {
  const moe_problem p = softmax_problem();
  const LayerWeights w = random_weights(p, 3);
  RawRun r(sdk::plugin_api<RoutingBackend>(), p, w.view(), 2);
  r.workspace.resize(r.workspace_size(2));
  moe_run_args a = r.args(true);
  a.output.data = nullptr;
  RoutingBackend::calls.clear();
  EXPECT_EQ(r.api->run(&a), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(r.api->last_error(), testing::HasSubstr("output: tensor is missing"));
  EXPECT_TRUE(RoutingBackend::calls.empty());
  const auto* ids = static_cast<const uint32_t*>(r.ids.view().data);
  for (int64_t i = 0; i < 2 * p.top_k; ++i) EXPECT_EQ(ids[i], 0xFFFFFFFFu) << i;
}

// routing_bias and is_padding belong to routing in run: without router_logits they would be
// ignored, so the run is refused, naming the field.
TEST(SdkRunRoutes, RoutingFieldsWithoutLogitsAreRefused) {
  const moe_problem p = softmax_problem();
  const LayerWeights w = random_weights(p, 3);
  RawRun r(sdk::plugin_api<RoutingBackend>(), p, w.view(), 2);
  HostTensor bias(MOE_DTYPE_F32, {p.experts}), padding(MOE_DTYPE_U8, {2});
  for (const bool with_bias : {true, false}) {
    moe_run_args a = r.args(false);
    (with_bias ? a.routing_bias : a.is_padding) = with_bias ? bias.view() : padding.view();
    RoutingBackend::calls.clear();
    EXPECT_EQ(r.api->run(&a), MOE_STATUS_INVALID_ARGUMENT);
    EXPECT_THAT(r.api->last_error(),
                testing::HasSubstr(fmt::format("moe_run_args.{} is set but router_logits is NULL",
                                               with_bias ? "routing_bias" : "is_padding")));
    EXPECT_TRUE(RoutingBackend::calls.empty());
  }
}

TEST(SdkRunRoutes, ABackendThatRoutesInItsOwnRunGetsNoRouteCallButTheSameChecks) {
  const moe_problem p = softmax_problem();
  const LayerWeights w = random_weights(p, 3);
  EXPECT_EQ(run_features_of(sdk::plugin_api<FusingBackend>()), MOE_RUN_FEATURE_ROUTES);
  for (int64_t tokens : {3, 4}) {
    RawRun r(sdk::plugin_api<FusingBackend>(), p, w.view(), tokens);
    r.workspace.resize(r.workspace_size(tokens));
    FusingBackend::calls.clear();
    ASSERT_EQ(r.run(true), MOE_STATUS_OK) << r.api->last_error();
    if (tokens == 3)  // routed inside its run: the run sees the logits, route() is not called
      EXPECT_EQ(FusingBackend::calls, (std::vector<std::string>{"run routing 3"}));
    else
      EXPECT_EQ(FusingBackend::calls, (std::vector<std::string>{"route", "run routing 4"}));
    // The routing arguments are still the SDK's to check: too little workspace, logits of
    // another batch size.
    FusingBackend::calls.clear();
    r.workspace.resize(r.workspace.size() - 1);
    EXPECT_EQ(r.run(true), MOE_STATUS_CAPACITY_EXCEEDED) << tokens;
    r.workspace.resize(r.workspace.size() + 1);
    r.logits = HostTensor(MOE_DTYPE_F32, {tokens + 1, p.experts});
    EXPECT_EQ(r.run(true), MOE_STATUS_INVALID_ARGUMENT) << tokens;
    EXPECT_THAT(r.api->last_error(), testing::HasSubstr("router_logits has"));
    EXPECT_TRUE(FusingBackend::calls.empty()) << tokens;
  }
}

TEST(SdkRunRoutes, ABackendThatCannotRouteTheProblemRefusesLogitsBeforeItRuns) {
  const moe_problem p = softmax_problem();
  const LayerWeights w = random_weights(p, 4);
  RawRun plain(sdk::plugin_api<PlainBackend>(), p, w.view(), 3);
  const int before = PlainBackend::runs;
  EXPECT_EQ(plain.run(true), MOE_STATUS_UNSUPPORTED);
  EXPECT_THAT(plain.api->last_error(),
              testing::HasSubstr("plugin 'sdk_plain' cannot route in run() (router_logits "
                                 "given): sdk_plain does not route"));
  EXPECT_EQ(PlainBackend::runs, before) << "the backend's run was reached";

  // A backend that routes, on a problem whose method it does not list.
  Problem g = small_problem();
  g.raw().routing = MOE_ROUTING_SIGMOID_TOPK;
  RawRun other(sdk::plugin_api<RoutingBackend>(), g.c(), w.view(), 3);
  RoutingBackend::calls.clear();
  EXPECT_EQ(other.run(true), MOE_STATUS_UNSUPPORTED);
  EXPECT_THAT(other.api->last_error(), testing::HasSubstr("sdk_routes does not route sigmoid"));
  EXPECT_TRUE(RoutingBackend::calls.empty());
}

// ---- moe_bench_args.runs: the stride rule ------------------------------------------------------

// A backend with its own benchmark(): it records the runs it is given, as its structs.
class BenchBackend : public Bf16TestBackend {
 public:
  static inline std::vector<moe_run_args> seen;
  static sdk::BackendInfo info() { return bf16_info("sdk_bench", "test backend: run sets"); }
  void run(Layer&, const moe_run_args&) const {}
  void benchmark(const moe_bench_args& a, const sdk::RunFn&) const {
    seen.assign(a.runs, a.runs + a.num_runs);
    for (int32_t i = 0; i < a.iterations; ++i) a.times_ms[i] = 1.0;
  }
};

// Three runs laid out `stride` bytes apart, each with its struct_size and a workspace size of i.
std::vector<unsigned char> runs_at(size_t stride, const moe_layer* layer) {
  std::vector<unsigned char> bytes(3 * stride);
  for (size_t i = 0; i < 3; ++i) {
    moe_run_args a{};
    a.struct_size = stride;
    a.layer = const_cast<moe_layer*>(layer);
    a.workspace_size = 100 + i;
    std::memcpy(bytes.data() + i * stride, &a, std::min(stride, sizeof(a)));
  }
  return bytes;
}

moe_status bench(const RawLayer& l, const std::vector<unsigned char>& runs) {
  double times[2];
  moe_bench_args b{};
  b.struct_size = sizeof(b);
  b.runs = reinterpret_cast<const moe_run_args*>(runs.data());
  b.num_runs = 3;
  b.iterations = 2;
  b.times_ms = times;
  return l.api->benchmark(&b);
}

TEST(SdkRunRoutes, BenchRunsAreReadByTheFirstRunsStructSize) {
  const Problem q = small_problem();
  const LayerWeights w = random_weights(q.c(), 9);
  const RawLayer l(sdk::plugin_api<BenchBackend>(), q.c(), w.view());
  // A 1.1-1.3 caller's 496-byte structs, a 1.4-1.5 caller's 504-byte ones, this build's, and a
  // later caller's larger ones.
  for (const size_t stride :
       {k13RunArgsSize, k15RunArgsSize, sizeof(moe_run_args), sizeof(moe_run_args) + 64}) {
    BenchBackend::seen.clear();
    ASSERT_EQ(bench(l, runs_at(stride, l.layer)), MOE_STATUS_OK) << l.api->last_error();
    ASSERT_EQ(BenchBackend::seen.size(), 3u) << stride;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(BenchBackend::seen[i].workspace_size, 100 + i) << stride;
      EXPECT_EQ(BenchBackend::seen[i].router_logits.data, nullptr) << stride;
    }
  }
  std::vector<unsigned char> mixed = runs_at(sizeof(moe_run_args), l.layer);
  reinterpret_cast<moe_run_args*>(mixed.data() + sizeof(moe_run_args))->struct_size = 504;
  EXPECT_EQ(bench(l, mixed), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(l.api->last_error(), testing::HasSubstr("runs[1].struct_size=504 differs"));
}

TEST(CoreBenchRuns, OlderPluginsGetTheLayoutTheirOwnSizeofStepsBy) {
  std::vector<moe_run_args> runs(3);
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i].struct_size = sizeof(moe_run_args);
    runs[i].workspace_size = 7 + i;
  }
  EXPECT_EQ(detail::kRunArgsSizeBefore16, 504u);
  EXPECT_EQ(detail::kRunArgsSizeBefore14, 496u);  // 1.1-1.3: the struct ended at `stream`
  for (const uint32_t minor : {1u, 2u, 3u, 4u, 5u, 6u}) {
    const size_t stride = minor < 4 ? 496 : minor < 6 ? 504 : sizeof(moe_run_args);
    const std::vector<unsigned char> packed = detail::pack_bench_runs(runs, minor);
    ASSERT_EQ(packed.size(), 3 * stride);
    for (size_t i = 0; i < runs.size(); ++i) {
      moe_run_args got{};
      std::memcpy(&got, packed.data() + i * stride, stride);
      EXPECT_EQ(got.struct_size, stride) << minor;
      EXPECT_EQ(got.workspace_size, 7 + i) << minor;
    }
  }
}

// ---- the core and the reference -----------------------------------------------------------------

class RunRoutes : public testing::Test {
 protected:
  RunRoutes()
      : registry_(
            registry_of({build_plugin_dir(), fixture_dir("abi_v1_2"), fixture_dir("works")})) {}
  Registry registry_;
};

// The reference routes in run: the same ids, weights and output bits as route() then run(), with
// a selection bias and padding tokens, and for an empty batch.
TEST_F(RunRoutes, TheReferenceGivesTheBitsOfRouteThenRun) {
  const auto ref = registry_.find("reference");
  ASSERT_NE(ref, nullptr);
  ASSERT_TRUE(ref->info().routes_in_run());
  for (const moe_routing method : {MOE_ROUTING_SOFTMAX_TOPK, MOE_ROUTING_GROUPED_TOPK}) {
    Problem q = small_problem();
    q.raw().experts = 8;
    q.raw().routing = method;
    if (method == MOE_ROUTING_GROUPED_TOPK) {
      q.raw().num_groups = 4;
      q.raw().topk_group = 2;
      q.raw().score_function = MOE_SCORE_SIGMOID;
      q.raw().routing_bias = 1;
    }
    q.finalize();
    const moe_problem p = q.c();
    const LayerWeights w = random_weights(p, 5);
    const Layer layer = ref->prepare(p, w.view(), {});
    for (const int64_t tokens : {0, 1, 7}) {
      const Batch batch = random_batch(p, tokens, 6 + uint64_t(tokens), Scenario::kPadding);
      const Routing want_routing = route_batch(*ref, p, batch);
      const RunResult want = run_layer(layer, p, batch.hidden, want_routing);
      Routing got_routing;
      const RunResult got = run_layer_routing(layer, p, batch, &got_routing);
      const std::string at = fmt::format("{}, {} tokens", routing_name(method), tokens);
      ASSERT_EQ(got.output.bytes(), want.output.bytes()) << at;
      EXPECT_EQ(std::memcmp(got.output.raw(), want.output.raw(), got.output.bytes()), 0) << at;
      EXPECT_EQ(std::memcmp(got_routing.ids.raw(), want_routing.ids.raw(), got_routing.ids.bytes()),
                0)
          << at;
      EXPECT_EQ(std::memcmp(got_routing.weights.raw(), want_routing.weights.raw(),
                            got_routing.weights.bytes()),
                0)
          << at;
    }
  }
}

// A batch of 0 tokens may come without storage (a framework's empty device tensor can carry a
// NULL pointer): nothing is read, so the run succeeds, routing in run included. One token without
// storage is still refused, naming the tensor.
TEST_F(RunRoutes, AnEmptyBatchNeedsNoStorage) {
  const auto ref = registry_.find("reference");
  ASSERT_NE(ref, nullptr);
  const Problem q = small_problem();
  const moe_problem p = q.c();
  const LayerWeights w = random_weights(p, 5);
  const Layer layer = ref->prepare(p, w.view(), {});
  const int64_t width = topk_width(p);
  moe_run_args a{};
  a.struct_size = sizeof(a);
  a.hidden = make_view(nullptr, MOE_DTYPE_BF16, {0, p.hidden});
  a.topk_ids = make_view(nullptr, MOE_DTYPE_I32, {0, width});
  a.topk_weights = make_view(nullptr, MOE_DTYPE_F32, {0, width});
  a.output = make_view(nullptr, MOE_DTYPE_BF16, {0, p.hidden});
  EXPECT_NO_THROW(layer.run(a));
  a.router_logits = make_view(nullptr, MOE_DTYPE_F32, {0, p.experts});
  EXPECT_NO_THROW(layer.run(a));

  const Batch batch = random_batch(p, 1, 7, Scenario::kRandom);
  Routing routing = route_batch(*ref, p, batch);
  HostTensor out(MOE_DTYPE_BF16, {1, p.hidden});
  a.router_logits = moe_tensor{};
  a.hidden = make_view(nullptr, MOE_DTYPE_BF16, {1, p.hidden});
  a.topk_ids = routing.ids.view();
  a.topk_weights = routing.weights.view();
  a.output = out.view();
  expect_error([&] { layer.run(a); }, MOE_STATUS_INVALID_ARGUMENT,
               {"hidden: tensor is missing (data is NULL)"});
}

TEST_F(RunRoutes, AnOlderPluginIsRefusedLogitsBeforeItRuns) {
  const auto old = registry_.find("fixture_abi_v1_2");
  const auto works = registry_.find("fixture_works");
  ASSERT_NE(old, nullptr);
  ASSERT_NE(works, nullptr);
  EXPECT_FALSE(old->info().routes_in_run());
  EXPECT_FALSE(works->info().routes_in_run());  // today's ABI, but its route() is absent
  const Problem q = small_problem();
  const moe_problem p = q.c();
  const LayerWeights w = random_weights(p, 7);
  const Batch batch = random_batch(p, 3, 8, Scenario::kRandom);
  for (const auto& plugin : {old, works}) {
    const Layer layer = plugin->prepare(p, w.view(), {});
    expect_error([&] { run_layer_routing(layer, p, batch); }, MOE_STATUS_UNSUPPORTED,
                 {fmt::format("plugin '{}' (ABI {}.{})", plugin->name(), plugin->info().abi_major,
                              plugin->info().abi_minor),
                  "does not declare MOE_RUN_FEATURE_ROUTES"});
  }
}

// The core refuses routing_bias or is_padding without router_logits before any plugin runs: a
// raw one (no SDK) would ignore them.
TEST_F(RunRoutes, TheCoreRefusesRoutingFieldsWithoutLogitsForEveryPlugin) {
  const auto works = registry_.find("fixture_works");
  ASSERT_NE(works, nullptr);
  const Problem q = small_problem();
  const moe_problem p = q.c();
  const LayerWeights w = random_weights(p, 7);
  const Layer layer = works->prepare(p, w.view(), {});
  HostTensor bias(MOE_DTYPE_F32, {p.experts});
  moe_run_args a{};
  a.routing_bias = bias.view();
  expect_error([&] { layer.run(a); }, MOE_STATUS_INVALID_ARGUMENT,
               {"moe_run_args.routing_bias is set but router_logits is NULL"});
}

}  // namespace
}  // namespace moe::test
