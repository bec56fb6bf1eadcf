// ABI 1.5 (docs/design.md §2.6): the decode rule's limits by weight format, written by the SDK's
// table builder and by a raw table, left at 0 by older plugins, and refused below -1 (what
// cutlass_mega declares with them: abi_decode_rule_test.cpp).
#include <cstring>
#include <memory>

#include "../support/test_env.hpp"
#include "decode_backend.hpp"

namespace moe::test {
namespace {

// The size of moe_plugin_info a 1.4 caller passes: it ends at run_features, where the 1.5 array
// begins (no padding between: a 1.4 plugin's struct ends where the array starts).
constexpr size_t k14InfoSize = offsetof(moe_plugin_info, decode_max_tokens_by_format);
static_assert(k14InfoSize == offsetof(moe_plugin_info, run_features) + sizeof(uint32_t),
              "the 1.5 array starts at the 1.4 struct's end");

moe_plugin_info info_of_size(size_t struct_size) {
  moe_plugin_info info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = struct_size;
  for (int64_t& v : info.decode_max_tokens_by_format) v = 12345;  // no plugin writes that
  return info;
}

using Limits = std::vector<std::pair<moe_format, int64_t>>;
struct Sound {
  static Limits value() { return {{MOE_FORMAT_MXFP4, 32}, {MOE_FORMAT_FP8_BLOCK, -1}}; }
};
struct Zero {
  static Limits value() { return {{MOE_FORMAT_NVFP4, 0}}; }
};
struct BelowMinusOne {
  static Limits value() { return {{MOE_FORMAT_NVFP4, -2}}; }
};
struct PastTheArray {
  static Limits value() { return {{static_cast<moe_format>(MOE_DECODE_FORMATS), 16}}; }
};
struct Twice {
  static Limits value() { return {{MOE_FORMAT_MXFP4, 32}, {MOE_FORMAT_MXFP4, 64}}; }
};

TEST(SdkDecodeByFormat, GetInfoWritesEachFormatsLimitAndZerosElsewhere) {
  const moe_plugin_api* api = sdk::plugin_api<DecodeBackend<8, Sound>>();
  moe_plugin_info info = info_of_size(sizeof(moe_plugin_info));
  ASSERT_EQ(api->get_info(&info), MOE_STATUS_OK) << api->last_error();
  EXPECT_EQ(info.decode_max_tokens, 8);
  for (int f = 0; f < MOE_DECODE_FORMATS; ++f) {
    const int64_t want = f == MOE_FORMAT_MXFP4 ? 32 : f == MOE_FORMAT_FP8_BLOCK ? -1 : 0;
    EXPECT_EQ(info.decode_max_tokens_by_format[f], want) << "format " << f;
  }
}

TEST(SdkDecodeByFormat, A14CallersStructKeepsItsTail) {
  const moe_plugin_api* api = sdk::plugin_api<DecodeBackend<8, Sound>>();
  moe_plugin_info info = info_of_size(k14InfoSize);
  ASSERT_EQ(api->get_info(&info), MOE_STATUS_OK) << api->last_error();
  EXPECT_EQ(info.struct_size, k14InfoSize);
  EXPECT_EQ(info.decode_max_tokens, 8);
  for (int64_t v : info.decode_max_tokens_by_format) EXPECT_EQ(v, 12345);
}

template <class L>
std::string refusal() {
  const moe_plugin_api* api = sdk::plugin_api<DecodeBackend<8, L>>();
  moe_plugin_info info = info_of_size(sizeof(moe_plugin_info));
  EXPECT_EQ(api->get_info(&info), MOE_STATUS_INTERNAL);
  return api->last_error();
}

TEST(SdkDecodeByFormat, UnsoundLimitsFailGetInfoNamingThem) {
  EXPECT_THAT(refusal<Zero>(), testing::HasSubstr("declares decode_max_tokens_by_format 5=0: it "
                                                  "must be > 0, or -1"));
  EXPECT_THAT(refusal<BelowMinusOne>(), testing::HasSubstr("decode_max_tokens_by_format 5=-2"));
  EXPECT_THAT(refusal<PastTheArray>(),
              testing::HasSubstr("declares a decode limit for format 32: formats are 0..31"));
  EXPECT_THAT(refusal<Twice>(), testing::HasSubstr("declares format 4's decode limit twice"));
}

// ---- raw tables --------------------------------------------------------------------------------

TEST(RawDecodeByFormat, TheCoreKeepsEachFormatsLimit) {
  const Registry r = registry_of({fixture_dir("decode_by_format")});
  const auto plugin = r.find("fixture_decode_by_format");
  ASSERT_NE(plugin, nullptr) << r.names();
  const DecodeRule& rule = plugin->info().decode;
  EXPECT_EQ(rule.by_format[MOE_FORMAT_MXFP4], 32);
  EXPECT_EQ(rule.by_format[MOE_FORMAT_FP8_BLOCK], -1);
  EXPECT_EQ(rule.limit(MOE_FORMAT_BF16), 8);
  EXPECT_EQ(rule.limit(MOE_FORMAT_MXFP4), 32);
  EXPECT_EQ(rule.limit(MOE_FORMAT_FP8_BLOCK), 0);
  EXPECT_TRUE(rule.covers(32, MOE_FORMAT_MXFP4));
  EXPECT_FALSE(rule.covers(33, MOE_FORMAT_MXFP4));
  EXPECT_FALSE(rule.covers(9, MOE_FORMAT_BF16));
  EXPECT_FALSE(rule.covers(1, MOE_FORMAT_FP8_BLOCK));
}

TEST(RawDecodeByFormat, AnOlderPluginMeansTheOneLimitInEveryFormat) {
  const Registry r = registry_of({fixture_dir("abi_v1_2"), fixture_dir("decode")});
  for (const char* name : {"fixture_abi_v1_2", "fixture_decode"}) {
    const auto plugin = r.find(name);
    ASSERT_NE(plugin, nullptr) << r.names();
    for (int64_t v : plugin->info().decode.by_format) EXPECT_EQ(v, 0) << name;
  }
  const DecodeRule& rule = r.find("fixture_decode")->info().decode;
  EXPECT_EQ(rule.limit(MOE_FORMAT_MXFP4), 8);
  EXPECT_EQ(rule.limit(MOE_FORMAT_FP8_BLOCK), 8);
}

TEST(RawDecodeByFormat, LimitsFromATableOfAbi14AreNotBelieved) {
  const Registry r = registry_of({fixture_dir("decode_by_format_as_14")});
  const auto plugin = r.find("fixture_decode_by_format_as_14");
  ASSERT_NE(plugin, nullptr) << r.names();
  EXPECT_EQ(plugin->info().abi_minor, 4u);
  EXPECT_EQ(plugin->info().decode.max_tokens, 8);
  for (int64_t v : plugin->info().decode.by_format) EXPECT_EQ(v, 0);
  EXPECT_EQ(plugin->info().decode.limit(MOE_FORMAT_MXFP4), 8);
}

TEST(RawDecodeByFormat, ALimitBelowMinusOneIsSkippedNamingIt) {
  EXPECT_THAT(skip_reason_of_fixture("decode_by_format_bad", "fixture_decode_by_format_bad"),
              testing::HasSubstr("get_info gave decode_max_tokens_by_format[4]=-2: it must be "
                                 ">= -1"));
}

}  // namespace
}  // namespace moe::test
