// ABI 1.2 (docs/design.md §2 rules 11-15): typed extension chains, build info on the table,
// routing capability in supports(), init/shutdown leases, enum values newer than a build, and a
// plugin built against the frozen 1.1 header loading beside 1.2 ones.
#include <cstring>

#include "../support/test_env.hpp"
#include "moe/sdk/format_table.hpp"
#include "moe/sdk/version.hpp"

namespace moe::test {
namespace {

// Every in-tree plugin (SDK-built) and the hand-written raw-table fixtures of every minor.
Registry every_plugin() {
  return registry_of({build_plugin_dir(), example_plugin_dir(), fixture_dir("works"),
                      fixture_dir("abi_v1_1"), fixture_dir("abi_v1_2")});
}

const char* const kInTree[] = {"reference",       "gpu_oracle",    "trtllm_style",
                               "example_cpu",     "fixture_works", "fixture_abi_v1_1",
                               "fixture_abi_v1_2"};

// ---- enum values this build does not know ----------------------------------------------------

struct Unknown {
  const char* field;
  void (*edit)(moe_problem&);
  moe_reason reason;
};

const Unknown kUnknown[] = {
    {"format", [](moe_problem& p) { p.format = int32_t(format_table().size()); },
     MOE_REASON_FORMAT},
    {"activation", [](moe_problem& p) { p.activation = int32_t(known_activations().size()); },
     MOE_REASON_ACTIVATION},
    {"routing", [](moe_problem& p) { p.routing = int32_t(known_routings().size()); },
     MOE_REASON_ROUTING},
};

TEST(UnknownEnumValues, EveryPluginRefusesAValueOnePastTheLastKnown) {
  const Registry r = every_plugin();
  const Problem known = small_problem();
  const LayerWeights w = random_weights(known.c(), 7);
  const moe_weights wv = w.view();
  for (const char* name : kInTree) {
    const auto plugin = r.find(name);
    if (plugin == nullptr && std::string(name) == "gpu_oracle") continue;  // built with CUDA only
    ASSERT_NE(plugin, nullptr) << name;
    for (const Unknown& u : kUnknown) {
      SCOPED_TRACE(std::string(name) + " with an unknown " + u.field);
      moe_problem p = known.c();
      u.edit(p);
      const Support s = plugin->supports(p);
      EXPECT_FALSE(s.supported);
      EXPECT_EQ(s.reason, u.reason) << s.message;
      EXPECT_THAT(s.message, testing::HasSubstr(u.field));
      EXPECT_NE(s.routes, 1);

      moe_prepare_args args{};
      args.struct_size = sizeof(args);
      args.problem = &p;
      args.weights = &wv;
      moe_layer* layer = nullptr;
      EXPECT_EQ(plugin->api().prepare(&args, &layer), MOE_STATUS_UNSUPPORTED)
          << plugin->api().last_error();
      EXPECT_EQ(layer, nullptr);
      EXPECT_FALSE(plugin->can_route(p));
    }
  }
}

TEST(UnknownEnumValues, RouteRefusesAnUnknownMethod) {
  const Registry r = every_plugin();
  moe_problem p = small_problem().c();
  p.routing = int32_t(known_routings().size());
  const Batch b = random_batch(small_problem().c(), 3, 1, Scenario::kRandom);
  HostTensor ids(MOE_DTYPE_I32, {3, 2}), weights(MOE_DTYPE_F32, {3, 2});
  for (const char* name : {"reference", "example_cpu"}) {
    const auto plugin = r.find(name);
    ASSERT_NE(plugin, nullptr);
    moe_route_args a{};
    a.struct_size = sizeof(a);
    a.problem = &p;
    a.logits = b.logits.view();
    a.topk_ids = ids.view();
    a.topk_weights = weights.view();
    EXPECT_EQ(plugin->api().route(&a), MOE_STATUS_UNSUPPORTED) << name;
    EXPECT_THAT(plugin->api().last_error(), testing::HasSubstr("routing=4 is not")) << name;
  }
}

// ---- extension chains --------------------------------------------------------------------------

struct SomeFutureExtension {
  moe_extension header;
  double payload[3];
};

TEST(ExtensionChain, AnUnknownExtensionTypeIsSkipped) {
  const Registry r = registry_of({build_plugin_dir()});
  const auto ref = r.find("reference");
  SomeFutureExtension future{{sizeof(SomeFutureExtension), 9999, nullptr}, {1, 2, 3}};
  moe_problem p = small_problem().c();
  p.ext = &future.header;
  const Support s = ref->supports(p);
  EXPECT_TRUE(s.supported) << s.message;
}

TEST(ExtensionChain, AMalformedChainIsRefusedNamingTheStruct) {
  const Registry r = registry_of({build_plugin_dir()});
  const auto ref = r.find("reference");
  moe_problem p = small_problem().c();
  moe_support answer{};
  answer.struct_size = sizeof(answer);

  moe_extension tiny{4, 1, nullptr};  // struct_size below the header
  p.ext = &tiny;
  EXPECT_EQ(ref->api().supports(&p, &answer), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(ref->api().last_error(),
              testing::HasSubstr("moe_problem.ext: extension 0 (type 1) has struct_size=4"));

  moe_extension a{sizeof(moe_extension), 7, nullptr}, b{sizeof(moe_extension), 8, &a};
  a.next = &b;  // a cycle
  p.ext = &a;
  EXPECT_EQ(ref->api().supports(&p, &answer), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(ref->api().last_error(),
              testing::HasSubstr("extension chain is longer than 64 entries (a cycle?)"));
}

TEST(ExtensionChain, SdkPluginsCarryBuildInfoAndOldOnesDoNot) {
  const Registry r = every_plugin();
  const auto ref = r.find("reference");
  ASSERT_TRUE(ref->info().build.has_value());
  EXPECT_EQ(ref->info().build->sdk_version, MOE_REGISTRY_SDK_VERSION);
  EXPECT_EQ(ref->info().build->cuda_runtime, "none");
  EXPECT_EQ(ref->info().build->targets, "host");
  EXPECT_THAT(ref->info().build->compiler, testing::Not(testing::IsEmpty()));
  if (const auto trt = r.find("trtllm_style")) {
    ASSERT_TRUE(trt->info().build.has_value());
    EXPECT_EQ(trt->info().build->targets, "sm_90a");
    EXPECT_THAT(trt->info().build->cuda_runtime, testing::MatchesRegex("[0-9]+\\.[0-9]+"));
  }
  EXPECT_FALSE(r.find("fixture_works")->info().build.has_value());  // hand-written, no chain
}

TEST(SupportAnswer, A11SizedAnswerIsWrittenOnlyWhereItFits) {
  const Registry r = registry_of({build_plugin_dir()});
  const auto ref = r.find("reference");
  moe_support answer{};
  answer.struct_size = MOE_SUPPORT_MIN_SIZE;  // a 1.1 caller: no `routes`
  answer.routes = 12345;                      // past the caller's struct: must stay untouched
  const moe_problem p = small_problem().c();
  ASSERT_EQ(ref->api().supports(&p, &answer), MOE_STATUS_OK) << ref->api().last_error();
  EXPECT_EQ(answer.supported, 1);
  EXPECT_EQ(answer.routes, 12345);
  EXPECT_EQ(answer.struct_size, MOE_SUPPORT_MIN_SIZE);
  answer.struct_size = sizeof(answer);
  ASSERT_EQ(ref->api().supports(&p, &answer), MOE_STATUS_OK);
  EXPECT_EQ(answer.routes, 1);
}

// ---- layers handed back ------------------------------------------------------------------------

TEST(LayerOwnership, AForeignOrDestroyedLayerIsRefusedNotRead) {
  const Registry r = registry_of({build_plugin_dir(), example_plugin_dir()});
  const auto ref = r.find("reference"), example = r.find("example_cpu");
  const Problem p = small_problem();
  const LayerWeights w = random_weights(p.c(), 9);
  const Layer other = example->prepare(p.c(), w.view(), {});
  size_t bytes = 0;
  EXPECT_EQ(ref->api().workspace_size(other.get(), 4, &bytes), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(ref->api().last_error(),
              testing::HasSubstr("not a live layer of plugin 'reference'"));
  EXPECT_EQ(ref->api().destroy_layer(other.get()), MOE_STATUS_INVALID_ARGUMENT);

  moe_prepare_args args{};
  args.struct_size = sizeof(args);
  const moe_problem pc = p.c();
  const moe_weights wv = w.view();
  args.problem = &pc;
  args.weights = &wv;
  moe_layer* mine = nullptr;
  ASSERT_EQ(ref->api().prepare(&args, &mine), MOE_STATUS_OK);
  EXPECT_EQ(ref->api().destroy_layer(mine), MOE_STATUS_OK);
  EXPECT_EQ(ref->api().destroy_layer(mine), MOE_STATUS_INVALID_ARGUMENT);  // twice
  moe_run_args run{};
  run.struct_size = sizeof(run);
  run.layer = mine;
  EXPECT_EQ(ref->api().run(&run), MOE_STATUS_INVALID_ARGUMENT);
}

// ---- a 1.1 plugin next to 1.2 ones -------------------------------------------------------------

TEST(OlderMinor, APluginBuiltAgainstTheFrozen11HeaderLoadsAndRuns) {
  const Registry r = every_plugin();
  const auto old = r.find("fixture_abi_v1_1");
  ASSERT_NE(old, nullptr) << r.names();
  EXPECT_EQ(old->api().abi_minor, 1u);
  EXPECT_LT(old->api().struct_size, sizeof(moe_plugin_api));  // no ext, no shutdown
  const Support s = old->supports(small_problem().c());
  EXPECT_TRUE(s.supported) << s.message;
  EXPECT_EQ(s.routes, -1);  // a 1.1 moe_support has no routes field: the preset stays
  const Problem p = small_problem();
  const LayerWeights w = random_weights(p.c(), 3);
  const Batch b = random_batch(p.c(), 5, 4, Scenario::kRandom);
  const auto ref = r.find("reference");
  const Routing routing = route_batch(*ref, p.c(), b);
  const RunResult want = run_layer(ref->prepare(p.c(), w.view(), {}), p.c(), b.hidden, routing);
  const RunResult got = run_layer(old->prepare(p.c(), w.view(), {}), p.c(), b.hidden, routing);
  EXPECT_EQ(std::memcmp(got.output.raw(), want.output.raw(), want.output.bytes()), 0);
}

// ---- routing capability in supports() ---------------------------------------------------------

TEST(RoutesAnswer, AKernelLimitSendsRoutingBackToTheHost) {
  const Registry r = registry_of({build_plugin_dir()});
  const auto trt = r.find("trtllm_style");
  if (trt == nullptr) GTEST_SKIP() << "trtllm_style is built only with nvcc and CUTLASS";
  Problem p = small_problem();
  EXPECT_EQ(trt->supports(p.c()).routes, 1);
  EXPECT_TRUE(trt->can_route(p.c()));
  p.raw().experts = 9000;  // beyond the routing kernel's 8192
  p.raw().top_k = 2;
  p.finalize();
  const Support s = trt->supports(p.c());
  EXPECT_EQ(s.routes, 0);
  EXPECT_FALSE(trt->can_route(p.c()));
  EXPECT_TRUE(r.find("reference")->can_route(p.c()));
}

// ---- init / shutdown leases --------------------------------------------------------------------

TEST(Shutdown, TheLastHandleShutsThePluginDownAndANewLoadInitsItAgain) {
  const moe_plugin_api* api = nullptr;
  {
    const Registry r = registry_of({build_plugin_dir()});
    api = &r.find("reference")->api();
    moe_support answer{};
    answer.struct_size = sizeof(answer);
    const moe_problem p = small_problem().c();
    EXPECT_EQ(api->supports(&p, &answer), MOE_STATUS_OK);
    {
      const Registry second = registry_of({build_plugin_dir()});  // a second hold, same table
      EXPECT_EQ(&second.find("reference")->api(), api);
    }
    EXPECT_EQ(api->supports(&p, &answer), MOE_STATUS_OK) << "dropping one of two holds";
  }
  moe_support answer{};
  answer.struct_size = sizeof(answer);
  const moe_problem p = small_problem().c();
  EXPECT_EQ(api->supports(&p, &answer), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(api->last_error(), testing::HasSubstr("is not initialised"));
  const Registry again = registry_of({build_plugin_dir()});
  EXPECT_TRUE(again.find("reference")->supports(p).supported);
}

TEST(Shutdown, ALayerKeepsItsPluginAlive) {
  std::optional<Layer> layer;
  const Problem p = small_problem();
  const LayerWeights w = random_weights(p.c(), 5);
  {
    const Registry r = registry_of({build_plugin_dir()});
    layer.emplace(r.find("reference")->prepare(p.c(), w.view(), {}));
  }
  const Batch b = random_batch(p.c(), 4, 6, Scenario::kRandom);
  const Routing routing = route_batch(layer->plugin(), p.c(), b);
  EXPECT_EQ(run_layer(*layer, p.c(), b.hidden, routing).output.shape()[0], 4);
}

}  // namespace
}  // namespace moe::test
