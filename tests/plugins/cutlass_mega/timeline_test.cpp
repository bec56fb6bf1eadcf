// cutlass_mega's timeline (a measurement, src/timeline.hpp) on any machine: the JSON of a run's
// records, with clocks made up here where a GPU would have written them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "../../support/test_env.hpp"
#include "kernels/timeline.hpp"
#include "src/timeline.hpp"

namespace moe::mega {
namespace {

using namespace kernels;

TEST(MegaTimeline, TheJsonHoldsEachCtasBoundariesAndItemsRelativeToTheFirstEntry) {
  TimelineInfo info;
  info.ctas = 2;
  info.items = 3;
  info.format = "mxfp4";
  info.tokens = 8;
  info.steps1 = 32;
  info.steps2 = 6;
  info.step_bytes = 8704;
  info.instance = 12;
  std::vector<unsigned long long> rec(size_t(info.ctas * timeline_record_words(info.items)), 0);
  for (int c = 0; c < 2; ++c)
    for (int ph = 0; ph < kTimelinePhases; ++ph) {
      if (c == 1 && ph == kAtExit) continue;  // a boundary not reached: null
      rec[size_t(timeline_phase_word(c, info.items, ph))] = 1000000 + 100 * c + 10 * ph;
      rec[size_t(timeline_phase_word(c, info.items, ph)) + 1] = 5000 + ph;
    }
  // CTA 0 computed two items (GEMM1 item 4, GEMM2 item 7), CTA 1 four (one past the room for 3).
  rec[size_t(timeline_count_word(0, info.items))] = (3ull << 32) | 2;  // GEMM2 in 3 K parts
  rec[size_t(timeline_count_word(1, info.items))] = 4;
  const unsigned long long items0[][3] = {{(1ull << 32) | 4, 1000025, 6000},
                                          {(2ull << 32) | 7, 1000055, 7000}};
  for (int i = 0; i < 2; ++i)
    for (int w = 0; w < 3; ++w)
      rec[size_t(timeline_item_word(0, info.items, i)) + w] = items0[i][w];
  for (int i = 0; i < 3; ++i) {
    rec[size_t(timeline_item_word(1, info.items, i))] = (1ull << 32) | (10 + i);
    rec[size_t(timeline_item_word(1, info.items, i)) + 1] = 1000130 + i;
  }

  const nlohmann::json j = nlohmann::json::parse(timeline_json(rec, info));
  EXPECT_EQ(j["ctas"], 2);
  EXPECT_EQ(j["format"], "mxfp4");
  EXPECT_EQ(j["step_bytes"], 8704);
  EXPECT_EQ(j["instance"], 12);
  EXPECT_EQ(j["routes_in_launch"], false);
  EXPECT_EQ(j["phases"].size(), size_t(kTimelinePhases));
  EXPECT_EQ(j["phases"][kGemm2Start], "gemm2_start");
  const auto& c0 = j["records"][0];
  EXPECT_EQ(c0["split2"], 3);
  EXPECT_EQ(c0["boundaries"][kAtEntry]["ns"], 0);  // the earliest entry
  EXPECT_EQ(c0["boundaries"][kGemm1Done]["ns"], 30);
  EXPECT_EQ(c0["boundaries"][kGemm1Done]["clock"], 5003);
  ASSERT_EQ(c0["items"].size(), 2u);
  EXPECT_EQ(c0["items"][1]["phase"], 2);
  EXPECT_EQ(c0["items"][1]["u"], 7);
  EXPECT_EQ(c0["items"][1]["ns"], 55);
  EXPECT_EQ(c0["items"][0]["clock"], 6000);
  const auto& c1 = j["records"][1];
  EXPECT_EQ(c1["boundaries"][kAtEntry]["ns"], 100);
  EXPECT_TRUE(c1["boundaries"][kAtExit]["ns"].is_null());
  ASSERT_EQ(c1["items"].size(), 3u);  // the count is capped at the room
  EXPECT_EQ(c1["items"][2]["u"], 12);
}

TEST(MegaTimeline, RecordsTooShortForTheirCtasAreRefusedNamingTheSizes) {
  TimelineInfo info;
  info.ctas = 4;
  info.items = 2;
  test::expect_error([&] { timeline_json(std::vector<unsigned long long>(10), info); },
                     MOE_STATUS_INVALID_ARGUMENT, {"10 words hold fewer than 4 CTAs of 2 items"});
}

}  // namespace
}  // namespace moe::mega
