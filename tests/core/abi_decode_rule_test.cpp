// ABI 1.3 (docs/design.md §2.4): the decode rule appended to moe_plugin_info, written by the SDK's
// table builder and by a raw table only where the caller's struct holds it, absent from a plugin
// built against the frozen 1.2 header, and refused when negative.
#include <cstring>
#include <memory>

#include "../support/test_env.hpp"
#include "decode_backend.hpp"

namespace moe::test {
namespace {

// The size of moe_plugin_info a 1.2 caller passes: it ends at routing_mask.
constexpr size_t k12InfoSize = offsetof(moe_plugin_info, decode_max_tokens);
static_assert(k12InfoSize == MOE_PLUGIN_INFO_MIN_SIZE, "1.0 to 1.2 appended nothing to the info");

// A 1.3-sized info whose decode fields hold values no plugin writes, to see which it overwrote.
moe_plugin_info marked_info(size_t struct_size) {
  moe_plugin_info info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = struct_size;
  info.decode_max_tokens = 12345;
  info.decode_priority = -777;
  return info;
}

// ---- the SDK's table builder --------------------------------------------------------------------

TEST(SdkDecodeRule, GetInfoWritesTheRuleIntoA13Struct) {
  const moe_plugin_api* api = sdk::plugin_api<DecodeBackend<8>>();
  moe_plugin_info info = marked_info(sizeof(moe_plugin_info));
  ASSERT_EQ(api->get_info(&info), MOE_STATUS_OK) << api->last_error();
  EXPECT_EQ(info.priority, 40);
  EXPECT_EQ(info.decode_priority, 70);
  EXPECT_EQ(info.decode_max_tokens, 8);
  EXPECT_EQ(api->abi_minor, uint32_t(MOE_ABI_VERSION_MINOR));
}

TEST(SdkDecodeRule, A12CallersStructKeepsItsTailAndItsSize) {
  const moe_plugin_api* api = sdk::plugin_api<DecodeBackend<8>>();
  moe_plugin_info info = marked_info(k12InfoSize);
  ASSERT_EQ(api->get_info(&info), MOE_STATUS_OK) << api->last_error();
  EXPECT_STREQ(info.name, "sdk_decode_test");
  EXPECT_EQ(info.priority, 40);
  EXPECT_EQ(info.struct_size, k12InfoSize);
  EXPECT_EQ(info.decode_max_tokens, 12345);  // past the caller's struct: untouched
  EXPECT_EQ(info.decode_priority, -777);
}

TEST(SdkDecodeRule, ANegativeDecodeMaxTokensFailsGetInfoNamingTheValue) {
  const moe_plugin_api* api = sdk::plugin_api<DecodeBackend<-3>>();
  moe_plugin_info info = marked_info(sizeof(moe_plugin_info));
  EXPECT_EQ(api->get_info(&info), MOE_STATUS_INTERNAL);
  EXPECT_THAT(api->last_error(), testing::HasSubstr("plugin 'sdk_decode_test' declares "
                                                    "decode_max_tokens=-3: it must be >= 0"));
}

// ---- raw tables: today's header, the frozen 1.2 one, and a bad rule -----------------------------

TEST(RawDecodeRule, TheRuleIsWrittenOnlyWhereTheCallersStructHoldsIt) {
  const Registry r = registry_of({fixture_dir("decode")});
  const auto plugin = r.find("fixture_decode");
  ASSERT_NE(plugin, nullptr) << r.names();
  EXPECT_EQ(plugin->info().decode.priority, 70);
  EXPECT_EQ(plugin->info().decode.max_tokens, 8);
  EXPECT_EQ(plugin->info().priority, 40);

  moe_plugin_info old = marked_info(k12InfoSize);
  ASSERT_EQ(plugin->api().get_info(&old), MOE_STATUS_OK) << plugin->api().last_error();
  EXPECT_EQ(old.struct_size, k12InfoSize);
  EXPECT_EQ(old.decode_max_tokens, 12345);
  EXPECT_EQ(old.decode_priority, -777);
}

TEST(RawDecodeRule, A12PluginLeavesTheFieldsItDoesNotKnow) {
  const Registry r = registry_of({fixture_dir("abi_v1_2")});
  const auto old = r.find("fixture_abi_v1_2");
  ASSERT_NE(old, nullptr) << r.names();
  EXPECT_EQ(old->api().abi_minor, 2u);
  moe_plugin_info info = marked_info(sizeof(moe_plugin_info));  // a 1.3 caller
  ASSERT_EQ(old->api().get_info(&info), MOE_STATUS_OK) << old->api().last_error();
  EXPECT_STREQ(info.name, "fixture_abi_v1_2");
  EXPECT_EQ(info.struct_size, sizeof(moe_plugin_info));
  EXPECT_EQ(info.decode_max_tokens, 12345);  // so the core's preset of 0 (no rule) stands
  EXPECT_EQ(info.decode_priority, -777);
  EXPECT_FALSE(old->info().decode.declared());
  EXPECT_EQ(old->info().decode.priority, 0);
}

TEST(RawDecodeRule, A12PluginLoadsRoutesAnswersAndRunsLikeTheReference) {
  const Registry r = registry_of({build_plugin_dir(), fixture_dir("abi_v1_2")});
  const auto old = r.find("fixture_abi_v1_2");
  ASSERT_NE(old, nullptr) << r.names();
  EXPECT_EQ(old->api().struct_size, sizeof(moe_plugin_api));  // 1.3 appended no table entry
  const Problem p = small_problem();
  const Support s = old->supports(p.c());
  EXPECT_TRUE(s.supported) << s.message;
  EXPECT_EQ(s.routes, -1);  // a raw table without route() leaves the caller's preset
  const LayerWeights w = random_weights(p.c(), 11);
  const Batch b = random_batch(p.c(), 5, 4, Scenario::kRandom);
  const auto ref = r.find("reference");
  const Routing routing = route_batch(*ref, p.c(), b);
  const RunResult want = run_layer(ref->prepare(p.c(), w.view(), {}), p.c(), b.hidden, routing);
  const RunResult got = run_layer(old->prepare(p.c(), w.view(), {}), p.c(), b.hidden, routing);
  EXPECT_EQ(std::memcmp(got.output.raw(), want.output.raw(), want.output.bytes()), 0);
}

TEST(RawDecodeRule, ANegativeDecodeMaxTokensIsSkippedNamingTheValue) {
  EXPECT_THAT(skip_reason_of_fixture("decode_negative", "fixture_decode_negative"),
              testing::HasSubstr("libmoe_fixture_decode_negative.so: get_info gave "
                                 "decode_max_tokens=-1: it must be >= 0 (0 = no decode rule)"));
}

// ---- the in-tree declaration --------------------------------------------------------------------

// cutlass_mega ranks first for bf16 layers up to 64 tokens and 4-bit ones up to 32 (its limits by
// format, ABI 1.5: measured faster than trtllm_style there, bench/results/2026-12-05_s43_
// cutlass_mega_*_grid_h100.md, 2026-12-05_s44_cutlass_mega_bf16_decode_h100.md); deepgemm_style
// (fp8_block only) ranks above it for fp8_block ones, where it is measured faster on the large
// shapes; at larger capacities both fall back to their plain priorities, below trtllm_style's for
// cutlass_mega.
TEST(InTreeDecodeRule, CutlassMegaTakesBf16And4BitDecodeLayersAndDeepGemmFp8Ones) {
  const Registry r = registry_of({build_plugin_dir()});
  const auto mega = r.find("cutlass_mega");
  if (mega == nullptr) GTEST_SKIP() << "cutlass_mega is built only with nvcc and CUTLASS";
  const PluginInfo& i = mega->info();
  EXPECT_EQ(i.priority, 40);
  EXPECT_EQ(i.decode.priority, 70);
  EXPECT_EQ(i.decode.max_tokens, 8);
  EXPECT_EQ(i.decode.limit(MOE_FORMAT_FP8_BLOCK), 8);
  EXPECT_EQ(i.decode.limit(MOE_FORMAT_BF16), 64);
  EXPECT_EQ(i.decode.limit(MOE_FORMAT_MXFP4), 32);
  EXPECT_EQ(i.decode.limit(MOE_FORMAT_NVFP4), 32);
  if (const auto t = r.find("trtllm_style")) {
    EXPECT_GT(i.priority_for(64, MOE_FORMAT_BF16), t->info().priority_for(64, MOE_FORMAT_BF16));
    EXPECT_LT(i.priority_for(65, MOE_FORMAT_BF16), t->info().priority_for(65, MOE_FORMAT_BF16));
    for (moe_format f : {MOE_FORMAT_MXFP4, MOE_FORMAT_NVFP4}) {
      EXPECT_GT(i.priority_for(32, f), t->info().priority_for(32, f)) << format_name(f);
      EXPECT_LT(i.priority_for(33, f), t->info().priority_for(33, f)) << format_name(f);
    }
    EXPECT_FALSE(t->info().decode.declared());
  }
  if (const auto d = r.find("deepgemm_style")) {
    EXPECT_EQ(d->info().priority, 60);
    EXPECT_EQ(d->info().decode.priority, 75);
    EXPECT_EQ(d->info().decode.max_tokens, 8);
    const moe_format fp8 = MOE_FORMAT_FP8_BLOCK;
    EXPECT_GT(d->info().priority_for(8, fp8), i.priority_for(8, fp8));
    EXPECT_GT(d->info().priority_for(9, fp8), i.priority_for(9, fp8));
  }
  for (const char* name : {"reference", "gpu_oracle"}) {
    if (const auto p = r.find(name)) {
      EXPECT_FALSE(p->info().decode.declared()) << name;
    }
  }
}

}  // namespace
}  // namespace moe::test
