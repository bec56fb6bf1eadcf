// Bad input at run time is a clear status naming the problem, never a crash: a plugin that
// throws, tensors of the wrong shape, dtype or layout, too many tokens, bad weights.
#include <cmath>

#include "../support/test_env.hpp"

namespace moe::test {
namespace {

class PluginErrors : public testing::Test {
 protected:
  void SetUp() override {
    registry_ =
        std::make_unique<Registry>(registry_of({build_plugin_dir(), fixture_dir("throws")}));
    reference_ = registry_->find("reference");
    ASSERT_NE(reference_, nullptr);
    weights_ = random_weights(problem_.c(), 7);
    batch_ = random_batch(problem_.c(), 4, 8, Scenario::kRandom);
    routing_ = route_batch(*reference_, problem_.c(), batch_);
  }

  // moe_run_args over the fixture's batch, ready to be broken by a test.
  moe_run_args args(HostTensor& out) const {
    moe_run_args a{};
    a.hidden = batch_.hidden.view();
    a.topk_ids = routing_.ids.view();
    a.topk_weights = routing_.weights.view();
    a.output = out.view();
    return a;
  }

  Problem problem_ = small_problem();
  std::unique_ptr<Registry> registry_;
  std::shared_ptr<Plugin> reference_;
  LayerWeights weights_;
  Batch batch_;
  Routing routing_;
};

TEST_F(PluginErrors, ExceptionInsideAPluginBecomesAStatusAndTheProcessLives) {
  const auto thrower = registry_->find("fixture_throws");
  ASSERT_NE(thrower, nullptr);
  const Layer layer = thrower->prepare(problem_.c(), weights_.view(), {});
  for (int i = 0; i < 2; ++i) {
    expect_error([&] { run_layer(layer, problem_.c(), batch_.hidden, routing_); },
                 MOE_STATUS_INTERNAL,
                 {"plugin 'fixture_throws' run", "deliberate std::runtime_error inside run"});
  }
  // The process and the other plugins carry on.
  const Layer ok = reference_->prepare(problem_.c(), weights_.view(), {});
  EXPECT_NO_THROW(run_layer(ok, problem_.c(), batch_.hidden, routing_));
}

TEST_F(PluginErrors, RoutingWithAPluginThatDoesNotRouteIsUnsupportedNamingIt) {
  const auto thrower = registry_->find("fixture_throws");  // its table has no route entries
  ASSERT_NE(thrower, nullptr);
  expect_error([&] { route_batch(*thrower, problem_.c(), batch_); }, MOE_STATUS_UNSUPPORTED,
               {"plugin 'fixture_throws' does not route softmax_topk"});
}

TEST_F(PluginErrors, HiddenOfTheWrongWidthIsAShapeMismatchNamingIt) {
  const Layer layer = reference_->prepare(problem_.c(), weights_.view(), {});
  HostTensor out(MOE_DTYPE_BF16, {4, 64});
  HostTensor wrong(MOE_DTYPE_BF16, {4, 48});
  moe_run_args a = args(out);
  a.hidden = wrong.view();
  expect_error([&] { layer.run(a); }, MOE_STATUS_SHAPE_MISMATCH,
               {"hidden: expected [*, 64] bf16, got [4, 48] bf16"});
}

TEST_F(PluginErrors, IdsOfTheWrongDtypeAreADtypeMismatch) {
  const Layer layer = reference_->prepare(problem_.c(), weights_.view(), {});
  HostTensor out(MOE_DTYPE_BF16, {4, 64});
  HostTensor ids64(MOE_DTYPE_I64, {4, 2});
  moe_run_args a = args(out);
  a.topk_ids = ids64.view();
  expect_error([&] { layer.run(a); }, MOE_STATUS_DTYPE_MISMATCH,
               {"topk_ids: expected [4, 2] i32, got [4, 2] i64"});
}

TEST_F(PluginErrors, OutputWithFewerRowsThanTokensIsAShapeMismatch) {
  const Layer layer = reference_->prepare(problem_.c(), weights_.view(), {});
  HostTensor out(MOE_DTYPE_BF16, {3, 64});
  expect_error([&] { layer.run(args(out)); }, MOE_STATUS_SHAPE_MISMATCH,
               {"output: expected [4, 64] bf16, got [3, 64] bf16"});
}

TEST_F(PluginErrors, NonContiguousTensorIsRefused) {
  const Layer layer = reference_->prepare(problem_.c(), weights_.view(), {});
  HostTensor out(MOE_DTYPE_BF16, {4, 64});
  moe_run_args a = args(out);
  a.hidden.strides[0] = 128;  // every other row of a wider buffer
  a.hidden.strides[1] = 1;
  expect_error([&] { layer.run(a); }, MOE_STATUS_INVALID_ARGUMENT,
               {"hidden: [4, 64] bf16 is not contiguous"});
}

// A run's tensor that starts off its element size is refused, naming it (a GPU kernel's typed
// loads and stores would fault there): the output's bf16 one byte in, the weights' f32 two.
TEST_F(PluginErrors, MisalignedRunTensorIsRefusedNamingIt) {
  const Layer layer = reference_->prepare(problem_.c(), weights_.view(), {});
  HostTensor out(MOE_DTYPE_BF16, {4, 64});
  HostTensor wide(MOE_DTYPE_BF16, {4 * 64 + 8});
  moe_run_args a = args(out);
  a.output.data = static_cast<char*>(wide.view().data) + 1;
  expect_error([&] { layer.run(a); }, MOE_STATUS_INVALID_ARGUMENT,
               {"output: data at", "is not aligned to its 2-byte elements"});
  HostTensor weights(MOE_DTYPE_F32, {4 * 2 + 2});
  a = args(out);
  a.topk_weights.data = static_cast<char*>(weights.view().data) + 2;
  expect_error([&] { layer.run(a); }, MOE_STATUS_INVALID_ARGUMENT,
               {"topk_weights: data at", "is not aligned to its 4-byte elements"});
}

TEST_F(PluginErrors, MoreTokensThanMaxTokensIsACapacityErrorNamingBoth) {
  Problem small = problem_;
  small.raw().max_tokens = 3;
  const Layer layer = reference_->prepare(small.c(), weights_.view(), {});
  HostTensor out(MOE_DTYPE_BF16, {4, 64});
  expect_error([&] { layer.run(args(out)); }, MOE_STATUS_CAPACITY_EXCEEDED,
               {"4 tokens exceed max_tokens=3"});
}

// An options count no caller means (garbage, or a size in bytes) is refused before any read.
TEST_F(PluginErrors, AnAbsurdOptionsCountIsRefusedNamingIt) {
  const moe_problem p = problem_.c();
  const moe_weights w = weights_.view();
  const moe_option one{"x", "1"};
  moe_prepare_args a{};
  a.struct_size = sizeof(a);
  a.problem = &p;
  a.weights = &w;
  a.options = &one;
  a.num_options = int64_t{1} << 40;
  moe_layer* layer = nullptr;
  EXPECT_EQ(reference_->api().prepare(&a, &layer), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(reference_->api().last_error(),
              testing::HasSubstr("num_options=1099511627776 is more than 4096"));
  EXPECT_EQ(layer, nullptr);
}

// The SDK's table answers workspace sizes only for batches a run would take.
TEST_F(PluginErrors, WorkspaceSizeAboveMaxTokensIsACapacityErrorNamingBoth) {
  Problem small = problem_;
  small.raw().max_tokens = 3;
  const Layer layer = reference_->prepare(small.c(), weights_.view(), {});
  EXPECT_NO_THROW(layer.workspace_size(3));
  expect_error([&] { layer.workspace_size(4); }, MOE_STATUS_CAPACITY_EXCEEDED,
               {"workspace_size: 4 tokens exceed max_tokens=3"});
}

// The routing writes both outputs: one buffer as both, or an output over the logits, is refused
// (the ids over the weights came back as the weights' bits, with a success).
TEST_F(PluginErrors, RoutingOutputsThatOverlapAreRefusedNamingBoth) {
  const moe_problem p = problem_.c();
  HostTensor ids(MOE_DTYPE_I32, {4, 2}), weights(MOE_DTYPE_F32, {4, 2});
  HostTensor logits = batch_.logits;  // a copy the route may not write
  moe_route_args a{};
  a.struct_size = sizeof(a);
  a.problem = &p;
  a.logits = logits.view();
  a.topk_ids = ids.view();
  a.topk_weights = weights.view();
  ASSERT_EQ(reference_->api().route(&a), MOE_STATUS_OK) << reference_->api().last_error();
  moe_route_args same = a;
  same.topk_weights.data = ids.view().data;
  EXPECT_EQ(reference_->api().route(&same), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(reference_->api().last_error(),
              testing::HasSubstr("topk_ids and topk_weights overlap in memory"));
  moe_route_args over_logits = a;  // the weights' 32 bytes from the logits' 9th float
  over_logits.topk_weights.data = static_cast<float*>(logits.view().data) + 8;
  EXPECT_EQ(reference_->api().route(&over_logits), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(reference_->api().last_error(),
              testing::HasSubstr("topk_weights and logits overlap in memory"));
}

// A run's output over its hidden states or routing is refused, naming both: a backend that reads
// hidden again after writing the output (cutlass_mega's sinks in a second launch) computed from
// its own output.
TEST_F(PluginErrors, ARunOutputOverItsInputsIsRefusedNamingBoth) {
  const Layer layer = reference_->prepare(problem_.c(), weights_.view(), {});
  HostTensor hidden = batch_.hidden;
  HostTensor ids = routing_.ids, weights = routing_.weights;
  const moe_run_args ok = [&] {
    moe_run_args a{};
    a.struct_size = sizeof(a);
    a.hidden = hidden.view();
    a.topk_ids = ids.view();
    a.topk_weights = weights.view();
    a.output = hidden.view();  // replaced below
    return a;
  }();
  const struct {
    void* over;
    const char* says;
  } cases[] = {{hidden.view().data, "output and hidden overlap in memory"},
               {ids.view().data, "output and topk_ids overlap in memory"},
               {weights.view().data, "output and topk_weights overlap in memory"}};
  for (const auto& c : cases) {
    moe_run_args a = ok;
    a.output.data = c.over;
    expect_error([&] { layer.run(a); }, MOE_STATUS_INVALID_ARGUMENT,
                 {c.says, "pass separate buffers"});
  }
}

TEST_F(PluginErrors, ExpertIdOutOfRangeIsRefused) {
  const Layer layer = reference_->prepare(problem_.c(), weights_.view(), {});
  Routing bad = routing_;
  bad.ids.data<int32_t>()[3] = 4;  // token 1, slot 1; E = 4
  expect_error([&] { run_layer(layer, problem_.c(), batch_.hidden, bad); },
               MOE_STATUS_INVALID_ARGUMENT, {"topk_ids[1][1]=4 is outside [-1, experts=4)"});
}

// A token routed to one expert twice is refused by the reference (-1 may repeat).
TEST_F(PluginErrors, AnExpertRepeatedWithinATokenIsRefused) {
  const Layer layer = reference_->prepare(problem_.c(), weights_.view(), {});
  Routing bad = routing_;
  int32_t* ids = bad.ids.data<int32_t>();
  ids[3] = ids[2] == 0 ? 1 : 0;  // token 1's two slots: distinct first
  EXPECT_NO_THROW(run_layer(layer, problem_.c(), batch_.hidden, bad));
  ids[2] = ids[3] = -1;
  EXPECT_NO_THROW(run_layer(layer, problem_.c(), batch_.hidden, bad));
  ids[2] = ids[3] = 2;
  expect_error([&] { run_layer(layer, problem_.c(), batch_.hidden, bad); },
               MOE_STATUS_INVALID_ARGUMENT, {"topk_ids[1][1]=2 repeats topk_ids[1][0]"});
}

TEST_F(PluginErrors, WeightsOfTheWrongShapeAreRefusedAtPrepareNamingTheTensor) {
  LayerWeights w = random_weights(problem_.c(), 7);
  w.w2 = HostTensor(MOE_DTYPE_BF16, {4, 64, 31});
  expect_error([&] { reference_->prepare(problem_.c(), w.view(), {}); }, MOE_STATUS_SHAPE_MISMATCH,
               {"w2: expected [4, 64, 32] bf16, got [4, 64, 31] bf16"});
}

TEST_F(PluginErrors, WeightsOfAnotherFormatAreADtypeMismatch) {
  const LayerWeights fp8 = random_weights(small_problem(MOE_FORMAT_FP8_TENSOR).c(), 7);
  expect_error([&] { reference_->prepare(problem_.c(), fp8.view(), {}); },
               MOE_STATUS_DTYPE_MISMATCH, {"w13: expected [4, 64, 64] bf16, got [4, 64, 64] e4m3"});
}

TEST_F(PluginErrors, AScaleForAFormatWithoutScalesIsRefused) {
  LayerWeights w = random_weights(problem_.c(), 7);
  w.w13_scale = HostTensor(MOE_DTYPE_F32, {4});
  expect_error([&] { reference_->prepare(problem_.c(), w.view(), {}); },
               MOE_STATUS_INVALID_ARGUMENT, {"w13_scale: given, but format bf16 has no scales"});
}

TEST_F(PluginErrors, NonPositiveNvfp4GlobalScaleIsRefused) {
  const Problem nv = small_problem(MOE_FORMAT_NVFP4);
  LayerWeights w = random_weights(nv.c(), 7);
  w.w2_scale_2.data<float>()[2] = 0.0f;
  expect_error([&] { reference_->prepare(nv.c(), w.view(), {}); }, MOE_STATUS_INVALID_ARGUMENT,
               {"scale_2[2]=0 must be finite and > 0"});
}

TEST_F(PluginErrors, HostCostPerCallNeedsCallsAndSurfacesARunError) {
  const Layer layer = reference_->prepare(problem_.c(), weights_.view(), {});
  HostTensor out(MOE_DTYPE_BF16, {4, problem_.c().hidden});
  moe_run_args a = args(out);
  a.layer = layer.get();
  const double us = reference_->host_us_per_call({a}, 3);
  EXPECT_TRUE(std::isfinite(us) && us > 0) << us;
  expect_error([&] { reference_->host_us_per_call({a}, 0); }, MOE_STATUS_INVALID_ARGUMENT,
               {"calls > 0"});
  HostTensor narrow(MOE_DTYPE_BF16, {4, 48});
  a.hidden = narrow.view();
  expect_error([&] { reference_->host_us_per_call({a}, 3); }, MOE_STATUS_SHAPE_MISMATCH,
               {"hidden: expected [*, 64] bf16, got [4, 48] bf16"});
}

}  // namespace
}  // namespace moe::test
