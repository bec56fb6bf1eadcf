// launch_permute against a CPU model (exact arrays) and against the invariants stated in
// moe_cuda/permute.hpp, checked on the device output alone; every permutation twice, through the
// sort and, where it applies (up to 1024 slots), through the one-launch kernel.
#include <algorithm>
#include <numeric>
#include <vector>

#include "cuda_test_env.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/permute.hpp"

namespace moe::gpu {
namespace {

using test::DeviceBuffer;
using test::kPoisonI32;

// The permutation as moe_cuda/permute.hpp defines it, built the slow way.
struct HostPermutation {
  std::vector<int32_t> counts;                          // [G]
  std::vector<int64_t> offsets;                         // [G + 1]
  std::vector<int32_t> row_token, row_slot, row_group;  // [rows]
  std::vector<int32_t> slot_row;                        // [T*W (+T)]
};

// Group of slot (t, j), or -1: the definition, via moe::local_expert_id.
int64_t group_of(const moe_problem& p, int64_t j, int32_t id) {
  if (j < p.top_k) return local_expert_id(p, id);
  const int64_t s = j - p.top_k;
  return id == p.experts + s ? p.local_experts + s : -1;
}

HostPermutation model(const moe_problem& p, int64_t tokens, const std::vector<int32_t>& ids) {
  const int64_t width = topk_width(p), groups = permutation_groups(p);
  const bool shared = p.shared_intermediate > 0;
  std::vector<std::vector<int32_t>> slots_of(static_cast<size_t>(groups));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < width; ++j) {
      const int64_t g = group_of(p, j, ids[t * width + j]);
      if (g >= 0) slots_of[g].push_back(int32_t(t * width + j));
    }
  if (shared)
    for (int64_t t = 0; t < tokens; ++t)
      slots_of[groups - 1].push_back(int32_t(tokens * width + t));
  HostPermutation m;
  m.slot_row.assign(static_cast<size_t>(tokens * width + (shared ? tokens : 0)), -1);
  m.offsets.push_back(0);
  for (int64_t g = 0; g < groups; ++g) {
    for (int32_t slot : slots_of[g]) {  // already in slot order
      m.slot_row[slot] = int32_t(m.row_slot.size());
      m.row_slot.push_back(slot);
      m.row_group.push_back(int32_t(g));
      m.row_token.push_back(slot < tokens * width ? slot / int32_t(width)
                                                  : slot - int32_t(tokens * width));
    }
    m.counts.push_back(int32_t(slots_of[g].size()));
    m.offsets.push_back(int64_t(m.row_slot.size()));
  }
  return m;
}

class PermuteTest : public test::CudaTest {
 protected:
  // Random distinct routed experts per token (some columns -1), sink columns E+s or -1.
  std::vector<int32_t> random_ids(const moe_problem& p, int64_t tokens, double empty = 0.1) {
    const int64_t width = topk_width(p);
    std::vector<int32_t> ids(static_cast<size_t>(tokens * width));
    std::vector<int32_t> experts(static_cast<size_t>(p.experts));
    std::iota(experts.begin(), experts.end(), 0);
    for (int64_t t = 0; t < tokens; ++t) {
      std::shuffle(experts.begin(), experts.end(), rng_);
      for (int64_t j = 0; j < width; ++j) {
        const bool none = uniform(0.0f, 1.0f) < empty;
        ids[t * width + j] =
            none ? -1 : (j < p.top_k ? experts[j] : int32_t(p.experts + (j - p.top_k)));
      }
    }
    return ids;
  }

  // Permutes on the device (outputs poisoned first), compares with the model exactly and checks
  // the invariants on the device arrays alone: through the sort, then in one launch.
  void expect_permutation(const moe_problem& p, int64_t tokens, const std::vector<int32_t>& ids,
                          int64_t max_tokens = -1, const int32_t* device_map = nullptr) {
    if (max_tokens < 0) max_tokens = tokens;
    for (const int64_t one_launch : {int64_t(0), int64_t(1024)}) {
      SCOPED_TRACE(one_launch ? "one launch" : "sort");
      DeviceBuffer<char> workspace(permutation_workspace_bytes(p, max_tokens));
      workspace.poison(0x7b);
      Permutation perm = carve_permutation(p, max_tokens, workspace.get());
      EXPECT_EQ(perm.one_launch_max_items, 1024);  // the default (moe_cuda/permute.hpp)
      perm.local_of_global = device_map;
      perm.one_launch_max_items = one_launch;
      DeviceBuffer<int32_t> d_ids(ids);
      launch_permute(p, tokens, d_ids.get(), perm, stream_);
      sync();
      check(p, tokens, ids, perm);
    }
  }

  template <class T>
  std::vector<T> read(const T* device, int64_t n) {
    std::vector<T> v(static_cast<size_t>(n));
    MOE_CUDA_CHECK(cudaDeviceSynchronize());
    if (n > 0) MOE_CUDA_CHECK(cudaMemcpy(v.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }

  void check(const moe_problem& p, int64_t tokens, const std::vector<int32_t>& ids,
             const Permutation& perm) {
    const HostPermutation want = model(p, tokens, ids);
    const int64_t groups = perm.groups, rows = want.offsets.back();
    const int64_t slots = int64_t(want.slot_row.size());
    ASSERT_EQ(groups, permutation_groups(p));
    const auto counts = read(perm.group_counts, groups);
    const auto offsets = read(perm.group_offsets, groups + 1);
    EXPECT_EQ(counts, want.counts);
    ASSERT_EQ(offsets, want.offsets);
    EXPECT_EQ(read(perm.row_token, rows), want.row_token);
    EXPECT_EQ(read(perm.row_slot, rows), want.row_slot);
    EXPECT_EQ(read(perm.row_group, rows), want.row_group);
    EXPECT_EQ(read(perm.slot_row, slots), want.slot_row);
    // Past the rows, up to the slots: -1.
    const std::vector<int32_t> none(static_cast<size_t>(slots - rows), -1);
    EXPECT_EQ(read(perm.row_token + rows, slots - rows), none);
    EXPECT_EQ(read(perm.row_slot + rows, slots - rows), none);
    EXPECT_EQ(read(perm.row_group + rows, slots - rows), none);
    expect_invariants(p, tokens, ids, perm, rows, slots);
  }

  // What the header promises, from the device arrays and the ids alone.
  void expect_invariants(const moe_problem& p, int64_t tokens, const std::vector<int32_t>& ids,
                         const Permutation& perm, int64_t rows, int64_t slots) {
    const int64_t width = perm.width, groups = perm.groups;
    const auto counts = read(perm.group_counts, groups);
    const auto offsets = read(perm.group_offsets, groups + 1);
    const auto row_token = read(perm.row_token, rows);
    const auto row_slot = read(perm.row_slot, rows);
    const auto row_group = read(perm.row_group, rows);
    const auto slot_row = read(perm.slot_row, slots);
    std::vector<int64_t> histogram(static_cast<size_t>(groups), 0);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < width; ++j) {
        const int64_t g = group_of(p, j, ids[t * width + j]);
        if (g >= 0) ++histogram[g];
      }
    if (perm.has_shared) histogram[groups - 1] += tokens;
    EXPECT_EQ(offsets[0], 0);
    for (int64_t g = 0; g < groups; ++g) {
      EXPECT_EQ(counts[g], histogram[g]) << "group " << g;
      EXPECT_EQ(offsets[g + 1] - offsets[g], counts[g]) << "group " << g;
    }
    std::vector<int> seen(static_cast<size_t>(slots), 0);
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t slot = row_slot[r];
      ASSERT_TRUE(slot >= 0 && slot < slots) << "row " << r << " slot " << slot;
      ASSERT_TRUE(row_group[r] >= 0 && row_group[r] < groups) << "row " << r;
      ++seen[slot];
      EXPECT_EQ(slot_row[slot], r);
      EXPECT_TRUE(r >= offsets[row_group[r]] && r < offsets[row_group[r] + 1]) << "row " << r;
      if (slot < tokens * width) {
        EXPECT_EQ(row_token[r], slot / width);
        EXPECT_EQ(row_group[r], group_of(p, slot % width, ids[slot]));
      } else {
        EXPECT_EQ(row_token[r], slot - tokens * width);
        EXPECT_EQ(row_group[r], groups - 1);
      }
      if (r > 0 && row_group[r] == row_group[r - 1]) {
        EXPECT_LT(row_slot[r - 1], slot) << "row " << r;
      }
    }
    for (int64_t s = 0; s < slots; ++s) {  // each working slot exactly once, the rest -1
      const bool works = s >= tokens * width || group_of(p, s % width, ids[s]) >= 0;
      EXPECT_EQ(seen[s], works ? 1 : 0) << "slot " << s;
      if (!works) {
        EXPECT_EQ(slot_row[s], -1) << "slot " << s;
      }
    }
  }
};

Problem make(int64_t experts, int64_t top_k) {
  Problem p;
  p.raw().experts = experts;
  p.raw().top_k = top_k;
  p.raw().hidden = 128;
  p.raw().intermediate = 64;
  p.finalize();
  return p;
}

TEST_F(PermuteTest, RandomRoutingSortsIntoContiguousSlotOrderedGroups) {
  const Problem p = make(256, 8);
  expect_permutation(p.c(), 4096, random_ids(p.c(), 4096));
}

// Decode-sized batches, where the one-launch kernel takes over: slot counts around a warp's 32
// and its 1024-slot limit (1032: back to the sort), with sinks and the shared expert, and more
// groups than it takes (2048 experts: the sort).
TEST_F(PermuteTest, SmallBatchesMatchInOneLaunchAndAtItsLimits) {
  const Problem p = make(256, 8);
  for (int64_t tokens : {1, 3, 4, 5, 127, 128, 129}) {
    SCOPED_TRACE(tokens);
    expect_permutation(p.c(), tokens, random_ids(p.c(), tokens), 256);
  }
  Problem s = make(64, 6);
  s.raw().routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  s.raw().sink_experts = 2;
  s.raw().sink_intermediate = 32;
  s.raw().shared_intermediate = 128;
  s.finalize();
  expect_permutation(s.c(), 100, random_ids(s.c(), 100, 0.3));  // 900 slots
  const Problem wide = make(2048, 1);
  expect_permutation(wide.c(), 64, random_ids(wide.c(), 64));
  const Problem one = make(16, 4);
  std::vector<int32_t> ids(static_cast<size_t>(200 * 4), -1);
  for (int64_t t = 0; t < 200; ++t) ids[t * 4 + randint(0, 3)] = 7;  // every token to expert 7
  expect_permutation(one.c(), 200, ids);
}

TEST_F(PermuteTest, FewerTokensThanTheWorkspaceWasSizedForAndReuse) {
  const Problem p = make(64, 6);
  const moe_problem c = p.c();
  DeviceBuffer<char> workspace(permutation_workspace_bytes(c, 1000));
  const Permutation perm = carve_permutation(c, 1000, workspace.get());
  for (int64_t tokens : {1000, 17, 0, 333}) {
    SCOPED_TRACE(tokens);
    workspace.poison(0x7b);
    const std::vector<int32_t> ids = random_ids(c, tokens);
    DeviceBuffer<int32_t> d_ids(ids);
    launch_permute(c, tokens, d_ids.get(), perm, stream_);
    sync();
    check(c, tokens, ids, perm);
  }
}

TEST_F(PermuteTest, ExpertParallelLinearAndRoundRobinKeepOnlyLocalExperts) {
  for (auto placement : {MOE_EP_LINEAR, MOE_EP_ROUND_ROBIN}) {
    for (int32_t rank : {0, 3}) {
      Problem p = make(64, 8);
      p.raw().ep_placement = placement;
      p.raw().ep_size = 4;
      p.raw().ep_rank = rank;
      p.finalize();
      const moe_problem c = p.c();
      SCOPED_TRACE(describe_problem(c));
      const std::vector<int32_t> ids = random_ids(c, 500);
      expect_permutation(c, 500, ids);  // map from placement arithmetic
      DeviceBuffer<int32_t> map(static_cast<size_t>(c.experts));
      upload_expert_map(c, map.get(), stream_);
      expect_permutation(c, 500, ids, 500, map.get());  // map from the device copy
    }
  }
}

TEST_F(PermuteTest, AnExplicitEpMapGoesThroughItsDeviceCopy) {
  Problem p = make(32, 4);
  p.raw().ep_placement = MOE_EP_LINEAR;
  p.raw().ep_size = 2;
  p.finalize();
  moe_problem c = p.c();
  std::vector<int32_t> map(32, -1);  // this rank holds 16 scattered experts in shuffled order
  std::vector<int32_t> held(32);
  std::iota(held.begin(), held.end(), 0);
  std::shuffle(held.begin(), held.end(), rng_);
  for (int32_t l = 0; l < 16; ++l) map[held[l]] = l;
  c.ep_map = map.data();
  DeviceBuffer<int32_t> d_map(static_cast<size_t>(32));
  upload_expert_map(c, d_map.get(), stream_);
  expect_permutation(c, 300, random_ids(c, 300), 300, d_map.get());
}

TEST_F(PermuteTest, SinkExpertsAndTheSharedExpertGetTheirOwnGroups) {
  Problem p = make(64, 6);
  p.raw().routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  p.raw().sink_experts = 2;
  p.raw().sink_intermediate = 32;
  p.raw().shared_intermediate = 128;
  p.finalize();
  const moe_problem c = p.c();
  EXPECT_EQ(permutation_groups(c), 64 + 2 + 1);
  EXPECT_EQ(first_sink_group(c), 64);
  EXPECT_EQ(shared_group(c), 66);
  expect_permutation(c, 1000, random_ids(c, 1000, 0.2));
}

TEST_F(PermuteTest, AllTokensToOneExpertAndExpertsWithNoTokens) {
  const Problem p = make(16, 4);
  const moe_problem c = p.c();
  std::vector<int32_t> one(static_cast<size_t>(2000 * 4), -1);
  for (int64_t t = 0; t < 2000; ++t) one[t * 4 + randint(0, 3)] = 5;
  expect_permutation(c, 2000, one);
  std::vector<int32_t> few = random_ids(c, 700);  // only experts 2, 3, 9, 10 used
  for (auto& id : few)
    if (id >= 0) id = std::vector<int32_t>{2, 3, 9, 10}[id % 4];
  expect_permutation(c, 700, few);
}

TEST_F(PermuteTest, ZeroTokensWritesEmptyGroups) {
  Problem p = make(8, 2);
  p.raw().shared_intermediate = 64;
  p.finalize();
  expect_permutation(p.c(), 0, {}, 16);
}

TEST_F(PermuteTest, InvalidIdsAreTreatedAsNoExpert) {
  Problem p = make(32, 4);
  p.raw().routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  p.raw().sink_experts = 2;
  p.raw().sink_intermediate = 32;
  p.finalize();
  const moe_problem c = p.c();
  std::vector<int32_t> ids = random_ids(c, 400);
  const int32_t bad[] = {32, 33, 1000, -2, INT32_MIN, INT32_MAX};
  for (size_t i = 0; i < ids.size(); i += 3) ids[i] = bad[randint(0, 5)];
  expect_permutation(c, 400, ids);
}

}  // namespace
}  // namespace moe::gpu
