// The struct_size rules of the ABI, proved through a real plugin (the reference): a struct
// below the minimum size is refused with a message, one at exactly the minimum ("old" caller)
// and one larger than the plugin knows ("new" caller) are accepted.
#include <cstring>

#include "../support/test_env.hpp"

namespace moe::test {
namespace {

class Abi : public testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_unique<Registry>(registry_of({build_plugin_dir()}));
    plugin_ = registry_->find("reference");
    ASSERT_NE(plugin_, nullptr);
  }
  const moe_plugin_api& api() const { return plugin_->api(); }
  std::string last_error() const { return api().last_error(); }

  std::unique_ptr<Registry> registry_;
  std::shared_ptr<Plugin> plugin_;
};

// A "newer" caller: the struct followed by fields this plugin has never heard of.
struct NewerProblem {
  moe_problem p;
  uint64_t appended[4];
};

TEST_F(Abi, ProblemSmallerThanTheMinimumIsRefusedWithItsSizes) {
  moe_problem p = small_problem().c();
  p.struct_size = MOE_PROBLEM_MIN_SIZE - 8;
  moe_support answer{};
  answer.struct_size = sizeof(answer);
  EXPECT_EQ(api().supports(&p, &answer), MOE_STATUS_ABI_MISMATCH);
  EXPECT_THAT(last_error(), testing::HasSubstr(fmt::format(
                                "moe_problem.struct_size={} is smaller than the minimum {}",
                                MOE_PROBLEM_MIN_SIZE - 8, MOE_PROBLEM_MIN_SIZE)));
}

TEST_F(Abi, ProblemAtExactlyTheMinimumSizeIsAccepted) {
  moe_problem p = small_problem().c();
  p.struct_size = MOE_PROBLEM_MIN_SIZE;
  moe_support answer{};
  answer.struct_size = sizeof(answer);
  EXPECT_EQ(api().supports(&p, &answer), MOE_STATUS_OK) << last_error();
  EXPECT_EQ(answer.supported, 1);
}

TEST_F(Abi, ProblemLargerThanThePluginKnowsIsAcceptedAndItsTailIgnored) {
  NewerProblem big;
  big.p = small_problem().c();
  big.p.struct_size = sizeof(NewerProblem);
  std::memset(big.appended, 0xAB, sizeof(big.appended));
  moe_support answer{};
  answer.struct_size = sizeof(answer);
  EXPECT_EQ(api().supports(&big.p, &answer), MOE_STATUS_OK) << last_error();
  EXPECT_EQ(answer.supported, 1);
}

TEST_F(Abi, OutputStructLargerThanThePluginKnowsKeepsItsTailAndItsSize) {
  struct NewerInfo {
    moe_plugin_info info;
    uint64_t appended[2];
  } out;
  std::memset(&out, 0, sizeof(out));
  out.info.struct_size = sizeof(NewerInfo);
  out.appended[0] = out.appended[1] = 0x1234;
  ASSERT_EQ(api().get_info(&out.info), MOE_STATUS_OK) << last_error();
  EXPECT_STREQ(out.info.name, "reference");
  EXPECT_EQ(out.info.struct_size, sizeof(NewerInfo));
  EXPECT_EQ(out.appended[0], 0x1234u);
  EXPECT_EQ(out.appended[1], 0x1234u);
}

TEST_F(Abi, OutputStructSmallerThanTheMinimumIsRefused) {
  moe_plugin_info info{};
  info.struct_size = MOE_PLUGIN_INFO_MIN_SIZE - 4;
  EXPECT_EQ(api().get_info(&info), MOE_STATUS_ABI_MISMATCH);
  EXPECT_THAT(last_error(), testing::HasSubstr("moe_plugin_info.struct_size="));
  moe_support answer{};
  answer.struct_size = 8;
  const moe_problem p = small_problem().c();
  EXPECT_EQ(api().supports(&p, &answer), MOE_STATUS_ABI_MISMATCH);
  EXPECT_THAT(last_error(), testing::HasSubstr("moe_support.struct_size=8"));
}

TEST_F(Abi, RunArgsSmallerThanTheMinimumAreRefusedAndLargerAccepted) {
  const Problem problem = small_problem();
  const moe_problem p = problem.c();
  const LayerWeights w = random_weights(p, 1);
  const Layer layer = plugin_->prepare(p, w.view(), {});
  const Batch batch = random_batch(p, 3, 2, Scenario::kRandom);
  const Routing routing = route_batch(*plugin_, p, batch);
  HostTensor out(MOE_DTYPE_BF16, {3, p.hidden});
  struct NewerRunArgs {
    moe_run_args a;
    uint64_t appended[3];
  } args;
  std::memset(&args, 0, sizeof(args));
  args.a.layer = layer.get();
  args.a.hidden = batch.hidden.view();
  args.a.topk_ids = routing.ids.view();
  args.a.topk_weights = routing.weights.view();
  args.a.output = out.view();
  args.a.struct_size = MOE_RUN_ARGS_MIN_SIZE - 8;
  EXPECT_EQ(api().run(&args.a), MOE_STATUS_ABI_MISMATCH);
  EXPECT_THAT(last_error(), testing::HasSubstr("moe_run_args.struct_size="));
  args.a.struct_size = sizeof(NewerRunArgs);
  std::memset(args.appended, 0xCD, sizeof(args.appended));
  EXPECT_EQ(api().run(&args.a), MOE_STATUS_OK) << last_error();
}

TEST_F(Abi, NullPointersAreInvalidArgumentsNotCrashes) {
  moe_support answer{};
  answer.struct_size = sizeof(answer);
  EXPECT_EQ(api().supports(nullptr, &answer), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(last_error(), testing::HasSubstr("moe_problem is NULL"));
  EXPECT_EQ(api().run(nullptr), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(api().prepare(nullptr, nullptr), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(api().get_info(nullptr), MOE_STATUS_INVALID_ARGUMENT);
}

TEST_F(Abi, AnInvalidProblemIsAStatusWithTheFieldNamed) {
  moe_problem p = small_problem().c();
  p.top_k = 9;
  moe_support answer{};
  answer.struct_size = sizeof(answer);
  EXPECT_EQ(api().supports(&p, &answer), MOE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(last_error(), testing::HasSubstr("top_k=9 must be in [1, experts=4]"));
}

TEST_F(Abi, LastErrorIsClearedBySuccessAndPerThread) {
  moe_support answer{};
  answer.struct_size = sizeof(answer);
  ASSERT_NE(api().supports(nullptr, &answer), MOE_STATUS_OK);
  std::string other_thread;
  std::thread([&] { other_thread = api().last_error(); }).join();
  EXPECT_EQ(other_thread, "");
  const moe_problem p = small_problem().c();
  ASSERT_EQ(api().supports(&p, &answer), MOE_STATUS_OK);
  EXPECT_EQ(last_error(), "");
}

TEST(AbiNames, EveryStatusHasAName) {
  for (int s = MOE_STATUS_OK; s <= MOE_STATUS_CONFIG_ERROR; ++s)
    EXPECT_STRNE(status_name(static_cast<moe_status>(s)), "unknown_status") << s;
}

}  // namespace
}  // namespace moe::test
