// Paths and small builders shared by the tests that load plugins.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "moe/moe.hpp"

namespace moe::test {

// The build's directories, compiled in; MOE_TEST_BUILD_DIR / MOE_TEST_SOURCE_DIR override them
// when the binaries run from a copy of the build (on a GPU machine).
inline std::string from_env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}
inline std::string build_plugin_dir() {
  return from_env("MOE_TEST_BUILD_DIR", MOE_BUILD_DIR) + "/plugins";
}
// The example third-party plugin (examples/third_party_plugin), built apart from build/plugins.
inline std::string example_plugin_dir() {
  return from_env("MOE_TEST_BUILD_DIR", MOE_BUILD_DIR) + "/example_plugin";
}
inline std::string fixture_dir(const std::string& variant) {
  return from_env("MOE_TEST_BUILD_DIR", MOE_BUILD_DIR) + "/test_plugins/" + variant;
}
inline std::string source_path(const std::string& rel) {
  return from_env("MOE_TEST_SOURCE_DIR", MOE_SOURCE_DIR) + "/" + rel;
}

// A registry over exactly these directories (no MOE_PLUGIN_PATH, no default directories).
inline Registry registry_of(std::vector<std::string> dirs) {
  DiscoveryOptions o;
  o.config_dirs = std::move(dirs);
  o.use_env = false;
  o.use_default = false;
  return Registry::discover(o);
}

// Why discovery skipped fixture `variant`'s library (a registry of that directory alone must keep
// no plugin `name` and skip exactly one library).
inline std::string skip_reason_of_fixture(const std::string& variant, const std::string& name) {
  const Registry r = registry_of({fixture_dir(variant)});
  EXPECT_EQ(r.find(name), nullptr) << r.names();
  EXPECT_EQ(r.skipped().size(), 1u) << r.names();
  return r.skipped().empty() ? std::string() : r.skipped()[0].reason;
}

// A host tensor's bytes into an existing plugin buffer (device memory for a GPU plugin).
inline void upload_tensor(const Buffer& b, const HostTensor& t) {
  b.upload(t.raw(), t.bytes());
}

// E=4 k=2 H=64 I=32 bf16 silu_mul softmax_topk, normalised and valid.
inline Problem small_problem(moe_format format = MOE_FORMAT_BF16) {
  Problem p;
  moe_problem& r = p.raw();
  r.experts = 4;
  r.top_k = 2;
  r.hidden = 64;
  r.intermediate = 32;
  r.format = format;
  r.max_tokens = 64;
  p.finalize();
  validate_problem(p.c());
  return p;
}

// E=8 k=2 H=64 I=32 bf16, linear expert parallelism: rank `rank` of `world`.
// A routing's two halves for sink experts' home pass: `routed` with the sink columns -1, `home`
// with the routed columns -1; `sink_slots`: the sink ids that were not -1.
struct SinkSplit {
  Routing routed, home;
  int64_t sink_slots = 0;
};
inline SinkSplit split_sink_columns(const moe_problem& p, const Routing& routing) {
  SinkSplit s{routing, routing, 0};
  const int64_t tokens = routing.ids.shape()[0], w = topk_width(p);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < w; ++j) {
      (j < p.top_k ? s.home : s.routed).ids.data<int32_t>()[t * w + j] = -1;
      s.sink_slots += j >= p.top_k && routing.ids.data<int32_t>()[t * w + j] >= 0;
    }
  return s;
}

inline Problem small_ep_problem(int32_t world, int32_t rank) {
  Problem p;
  moe_problem& r = p.raw();
  r.experts = 8;
  r.top_k = 2;
  r.hidden = 64;
  r.intermediate = 32;
  r.max_tokens = 64;
  r.ep_placement = MOE_EP_LINEAR;
  r.ep_size = world;
  r.ep_rank = rank;
  p.finalize();
  validate_problem(p.c());
  return p;
}

// Runs `fn`, expects a moe::Error with `status` whose message contains every `parts`.
template <class Fn>
void expect_error(Fn&& fn, moe_status status, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected moe::Error(" << status_name(status) << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    for (const auto& part : parts) EXPECT_THAT(e.what(), testing::HasSubstr(part));
  }
}

// `layer` against the reference's fp64 `ref_layer` on fresh batches of each token count, with
// random routing, padding tokens and one expert (the last local one) taking every token (the
// reference's routing, seeded seed + tokens): relative L2 within `tolerance`.
inline void expect_matches_reference(const Layer& layer, const Layer& ref_layer,
                                     const Plugin& reference, const moe_problem& p,
                                     std::initializer_list<int64_t> token_counts, uint64_t seed,
                                     double tolerance) {
  for (int64_t tokens : token_counts)
    for (Scenario scenario : {Scenario::kRandom, Scenario::kPadding, Scenario::kOneExpert}) {
      const Batch batch = random_batch(p, tokens, seed + uint64_t(tokens), scenario);
      const Routing routing = scenario_routing(reference, p, batch, scenario);
      const RunResult out = run_layer(layer, p, batch.hidden, routing, MOE_DTYPE_BF16);
      const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
      EXPECT_LT(relative_l2(out.output, ref.output), tolerance)
          << tokens << " tokens, scenario " << int(scenario);
    }
}

}  // namespace moe::test
