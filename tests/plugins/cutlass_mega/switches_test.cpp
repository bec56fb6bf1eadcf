// cutlass_mega's measurement switches on any machine (src/switches.hpp): every value the code reads
// is accepted, a MOE_MEGA_ name that is no switch or a value a switch does not know is named with
// what it takes, other variables are left alone, and asking the table for a pair it does not hold
// is an internal error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../support/test_env.hpp"
#include "moe/sdk/error.hpp"
#include "src/switches.hpp"

namespace moe::mega {
namespace {

std::string error_of(std::vector<const char*> env) {
  env.push_back(nullptr);
  return switch_error(env.data());
}

TEST(MegaSwitches, EveryValueTheLayerReadsIsAccepted) {
  for (const char* entry : {"MOE_MEGA_BF16_STAGE=64",
                            "MOE_MEGA_CHUNKS=1",
                            "MOE_MEGA_FP4_STAGE=128",
                            "MOE_MEGA_FP4_STAGE=256",
                            "MOE_MEGA_FP4_STAGE=512",
                            "MOE_MEGA_FP4_WGMMA=1",
                            "MOE_MEGA_FP8_OWN_ROWS=0",
                            "MOE_MEGA_FP8_OWN_ROWS=1",
                            "MOE_MEGA_FP8_PREFETCH=late",
                            "MOE_MEGA_FP8_PREFETCH=late0",
                            "MOE_MEGA_FP8_PREFETCH=late1",
                            "MOE_MEGA_FP8_STAGE=128",
                            "MOE_MEGA_FP8_STAGE=256",
                            "MOE_MEGA_FP8_TOKENS=e4m3",
                            "MOE_MEGA_FP8_WGMMA=0",
                            "MOE_MEGA_FP8_WGMMA=1",
                            "MOE_MEGA_FP8_WGMMA=2",
                            "MOE_MEGA_GEMM2=early",
                            "MOE_MEGA_LAUNCH=pdl",
                            "MOE_MEGA_ROUTE=apart",
                            "MOE_MEGA_ROUTE=fused",
                            "MOE_MEGA_ROUTE=fused64",
                            "MOE_MEGA_SINKS=apart",
                            "MOE_MEGA_SPLIT2=fill",
                            "MOE_MEGA_SPLIT2=fit",
                            "MOE_MEGA_SPLIT2=waves",
                            "MOE_MEGA_TIMELINE=/tmp/timeline.json"})
    EXPECT_EQ(error_of({"PATH=/usr/bin", entry, "HOME=/root"}), "") << entry;
  EXPECT_EQ(error_of({}), "");
  EXPECT_EQ(switch_error(nullptr), "");
  // Names that only start alike, and other plugins' variables, are not cutlass_mega's.
  EXPECT_EQ(error_of({"MOE_MEGAX=1", "MOE_LOG_LEVEL=debug", "XMOE_MEGA_GEMM2=x"}), "");
}

TEST(MegaSwitches, AnUnknownNameOrValueIsNamedWithWhatItTakes) {
  std::string e = error_of({"PATH=/usr/bin", "MOE_MEGA_GEMM2=Early"});
  EXPECT_NE(e.find("MOE_MEGA_GEMM2=\"Early\""), std::string::npos) << e;
  EXPECT_NE(e.find("it takes early"), std::string::npos) << e;
  e = error_of({"MOE_MEGA_FP4_STAGE=64"});
  EXPECT_NE(e.find("it takes 128, 256, 512"), std::string::npos) << e;
  e = error_of({"MOE_MEGA_SPLIT2="});
  EXPECT_NE(e.find("MOE_MEGA_SPLIT2=\"\""), std::string::npos) << e;
  e = error_of({"MOE_MEGA_TIMELINE="});
  EXPECT_NE(e.find("it takes a file path"), std::string::npos) << e;
  e = error_of({"MOE_MEGA_GEMM=early"});
  EXPECT_NE(e.find("sets MOE_MEGA_GEMM=early, which is not a cutlass_mega switch"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("MOE_MEGA_GEMM2"), std::string::npos) << e;  // the list of switches
  e = error_of({"MOE_MEGA_HAND_OFF"});  // no '=' at all (a retired switch, too)
  EXPECT_NE(e.find("MOE_MEGA_HAND_OFF, which is not a cutlass_mega switch"), std::string::npos)
      << e;
  // The first offending entry is the one named.
  e = error_of({"MOE_MEGA_CHUNKS=1", "MOE_MEGA_LAUNCH=eager", "MOE_MEGA_K_STAGGER=1"});
  EXPECT_NE(e.find("MOE_MEGA_LAUNCH=\"eager\""), std::string::npos) << e;
}

TEST(MegaSwitches, APairOutsideTheTableIsAnInternalError) {
  test::expect_error([] { env_is("MOE_MEGA_GEMM2", "late"); }, MOE_STATUS_INTERNAL,
                     {"MOE_MEGA_GEMM2=late", "switch table"});
  test::expect_error([] { env_is("MOE_MEGA_NOTHING", "1"); }, MOE_STATUS_INTERNAL,
                     {"MOE_MEGA_NOTHING=1"});
}

}  // namespace
}  // namespace moe::mega
