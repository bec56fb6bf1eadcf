// ABI 1.4 (docs/design.md §2.4): moe_run_args.accumulate adds a layer's result into the output,
// for plugins whose moe_plugin_info.run_features declare MOE_RUN_FEATURE_ACCUMULATE. The SDK's
// table writes the feature and refuses an undeclared accumulate; the core refuses it before an
// older plugin (which never reads the field) could overwrite the output; the reference adds.
#include <cstring>
#include <memory>

#include "../support/raw_layer.hpp"
#include "../support/sdk_test_backend.hpp"
#include "../support/test_env.hpp"
#include "moe/sdk/backend.hpp"

namespace moe::test {
namespace {

// The 1.4 field took what was the 1.3 struct's tail padding: the size did not change.
static_assert(offsetof(moe_plugin_info, run_features) ==
                  offsetof(moe_plugin_info, decode_priority) + sizeof(int32_t),
              "run_features follows decode_priority");
constexpr size_t k13RunArgsSize = offsetof(moe_run_args, accumulate);

// ---- the SDK's table builder --------------------------------------------------------------------

template <bool kAccumulates>
class AccumulateBackend : public Bf16TestBackend {
 public:
  static inline int runs = 0;
  static inline bool last_accumulate = false;

  static sdk::BackendInfo info() {
    sdk::BackendInfo i = bf16_info(kAccumulates ? "sdk_accumulates" : "sdk_overwrites",
                                   "test backend: run features");
    i.accumulates = kAccumulates;
    return i;
  }
  void run(Layer&, const moe_run_args& a) const {
    ++runs;
    last_accumulate = sdk::run_accumulates(a);
  }
};

// A layer of `api` for the small bf16 problem (the SDK checks the weights), run with a given
// accumulate and struct size.
struct AccumulateLayer : RawLayer {
  using RawLayer::RawLayer;
  moe_status run(int32_t accumulate, size_t struct_size = sizeof(moe_run_args)) const {
    moe_run_args a{};
    a.struct_size = struct_size;
    a.layer = layer;
    a.accumulate = accumulate;
    return api->run(&a);
  }
};

TEST(SdkRunFeatures, GetInfoDeclaresAccumulateOnlyForABackendThatSaysSo) {
  EXPECT_EQ(run_features_of(sdk::plugin_api<AccumulateBackend<true>>()),
            MOE_RUN_FEATURE_ACCUMULATE);
  EXPECT_EQ(run_features_of(sdk::plugin_api<AccumulateBackend<false>>()), 0u);
}

TEST(SdkRunFeatures, RunRefusesAnUndeclaredAccumulateAndReadsADeclaredOne) {
  const Problem p = small_problem();
  const LayerWeights w = random_weights(p.c(), 3);
  const moe_weights wv = w.view();
  using Yes = AccumulateBackend<true>;
  using No = AccumulateBackend<false>;
  const AccumulateLayer yes(sdk::plugin_api<Yes>(), p.c(), wv),
      no(sdk::plugin_api<No>(), p.c(), wv);

  ASSERT_EQ(yes.run(1), MOE_STATUS_OK) << yes.api->last_error();
  EXPECT_TRUE(Yes::last_accumulate);
  ASSERT_EQ(yes.run(0), MOE_STATUS_OK) << yes.api->last_error();
  EXPECT_FALSE(Yes::last_accumulate);
  // A 1.3 caller's struct ends before the field: whatever lies past it is not read.
  ASSERT_EQ(yes.run(1, k13RunArgsSize), MOE_STATUS_OK) << yes.api->last_error();
  EXPECT_FALSE(Yes::last_accumulate);
  EXPECT_EQ(yes.run(2), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(yes.api->last_error(), testing::HasSubstr("accumulate=2 must be 0"));

  const int before = No::runs;
  EXPECT_EQ(no.run(1), MOE_STATUS_UNSUPPORTED);
  EXPECT_THAT(no.api->last_error(),
              testing::HasSubstr("plugin 'sdk_overwrites' cannot add into the output"));
  EXPECT_EQ(No::runs, before) << "the backend's run was reached";
  EXPECT_EQ(no.run(0), MOE_STATUS_OK) << no.api->last_error();
}

// ---- the core and the reference -----------------------------------------------------------------

class RunAccumulate : public testing::Test {
 protected:
  RunAccumulate()
      : registry_(registry_of({build_plugin_dir(), fixture_dir("abi_v1_2"), fixture_dir("works")})),
        problem_(small_problem()),
        weights_(random_weights(problem_.c(), 11)),
        batch_(random_batch(problem_.c(), kTokens, 12, Scenario::kRandom)) {}

  // The layer of `plugin` run on the batch into `out` (its old values kept where accumulate).
  void run(const Layer& layer, HostTensor& out, int32_t accumulate) {
    const Routing routing = route_batch(*registry_.find("reference"), problem_.c(), batch_);
    moe_run_args a{};
    a.hidden = batch_.hidden.view();
    a.topk_ids = routing.ids.view();
    a.topk_weights = routing.weights.view();
    a.output = out.view();
    a.accumulate = accumulate;
    layer.run(a);
  }
  HostTensor random_output(moe_dtype dtype, uint64_t seed) {
    const Batch other = random_batch(problem_.c(), kTokens, seed, Scenario::kRandom);
    HostTensor out(dtype, {kTokens, problem_.c().hidden});
    for (int64_t i = 0; i < out.numel(); ++i) {
      const float v = bf16_to_float(other.hidden.data<uint16_t>()[i]);
      if (dtype == MOE_DTYPE_F64)
        out.data<double>()[i] = v;
      else
        out.data<uint16_t>()[i] = float_to_bf16(v);
    }
    return out;
  }

  static constexpr int64_t kTokens = 9;
  Registry registry_;
  Problem problem_;
  LayerWeights weights_;
  Batch batch_;
};

TEST_F(RunAccumulate, TheReferenceAddsItsResultToTheOldOutput) {
  const auto ref = registry_.find("reference");
  ASSERT_TRUE(ref->info().accumulates());
  const Layer layer = ref->prepare(problem_.c(), weights_.view(), {});
  // In f64 the sum is exact to the last bit: old + the plain run's value.
  HostTensor plain(MOE_DTYPE_F64, {kTokens, problem_.c().hidden});
  run(layer, plain, 0);
  HostTensor added = random_output(MOE_DTYPE_F64, 21);
  const HostTensor old = random_output(MOE_DTYPE_F64, 21);
  run(layer, added, 1);
  for (int64_t i = 0; i < added.numel(); ++i)
    ASSERT_EQ(added.data<double>()[i], old.data<double>()[i] + plain.data<double>()[i])
        << "element " << i;
  // In bf16: the old value and the fp64 result summed, rounded once.
  HostTensor added16 = random_output(MOE_DTYPE_BF16, 22);
  const HostTensor old16 = random_output(MOE_DTYPE_BF16, 22);
  run(layer, added16, 1);
  int64_t wrong = 0;
  for (int64_t i = 0; i < added16.numel(); ++i)
    wrong +=
        added16.data<uint16_t>()[i] !=
        double_to_bf16(double(bf16_to_float(old16.data<uint16_t>()[i])) + plain.data<double>()[i]);
  EXPECT_EQ(wrong, 0);
}

TEST_F(RunAccumulate, ACurrentFixtureDeclaresItAnd12PluginIsRefusedBeforeItRuns) {
  const auto works = registry_.find("fixture_works");
  const auto old = registry_.find("fixture_abi_v1_2");
  ASSERT_NE(works, nullptr);
  ASSERT_NE(old, nullptr);
  EXPECT_TRUE(works->info().accumulates());
  EXPECT_FALSE(old->info().accumulates());
  const Layer layer = old->prepare(problem_.c(), weights_.view(), {});
  HostTensor out = random_output(MOE_DTYPE_BF16, 23);
  const HostTensor before = random_output(MOE_DTYPE_BF16, 23);
  expect_error([&] { run(layer, out, 1); }, MOE_STATUS_UNSUPPORTED,
               {"plugin 'fixture_abi_v1_2' (ABI 1.2)", "does not declare MOE_RUN_FEATURE_"});
  EXPECT_EQ(std::memcmp(out.raw(), before.raw(), out.bytes()), 0) << "the output changed";
  expect_error([&] { run(layer, out, -1); }, MOE_STATUS_INVALID_ARGUMENT,
               {"moe_run_args.accumulate=-1 must be 0 (write the output) or 1"});
  run(layer, out, 0);  // an ordinary run still works
}

}  // namespace
}  // namespace moe::test
