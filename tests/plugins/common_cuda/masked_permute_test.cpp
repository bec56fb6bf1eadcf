// launch_permute_masked against the definition in moe_cuda/permute.hpp: each live slot has one
// row inside its group's max_m rows, the group's count says how many, rows map back to their
// token, group and slot, and every other row of the buffer is dead (row_token -1).
#include <set>
#include <vector>

#include "cuda_test_env.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/permute.hpp"

namespace moe::gpu {
namespace {

using test::DeviceBuffer;

class MaskedPermuteTest : public test::CudaTest {
 protected:
  // 12 experts, top-3, a shared expert (a group every token reaches).
  static moe_problem problem() {
    moe_problem p = default_problem();
    p.experts = 12;
    p.local_experts = 12;
    p.top_k = 3;
    p.hidden = 128;
    p.intermediate = 128;
    p.shared_intermediate = 128;
    return p;
  }

  // Routes `tokens` random tokens (token 0 to experts 4, 5, 6) in a buffer of `max_tokens`
  // rows a group and checks every output against the definition.
  void check(int64_t max_tokens, int64_t tokens);
};

TEST_F(MaskedPermuteTest, EveryLiveSlotGetsOneRowOfItsGroupAndTheRestAreDead) {
  check(9, 7);  // one block (decode)
}

TEST_F(MaskedPermuteTest, PastOneBlocksRowsTheClearsAndTheGridKernelGiveTheSame) {
  // 13 x 1400 rows, more than one block clears (kernels/permute.cuh kMaskedOneBlockRows).
  check(1400, 1300);
}

void MaskedPermuteTest::check(int64_t max_tokens, int64_t tokens) {
  const moe_problem p = problem();
  const int64_t width = topk_width(p);
  const int64_t groups = permutation_groups(p);
  ASSERT_EQ(groups, p.experts + 1);
  std::vector<int32_t> ids(static_cast<size_t>(tokens * width));
  for (int64_t t = 0; t < tokens; ++t) {
    std::set<int32_t> used;
    for (int64_t j = 0; j < width; ++j) {
      int32_t e;
      do e = int32_t(randint(-1, p.experts - 1));
      while (e >= 0 && used.count(e));
      used.insert(e);
      ids[t * width + j] = t == 0 ? int32_t(4 + j) : e;  // token 0: experts 4, 5, 6
    }
  }
  DeviceBuffer<int32_t> d_ids(ids);
  DeviceBuffer<char> ws(masked_permutation_workspace_bytes(p, max_tokens));
  ws.poison(0x7b);
  const Permutation perm = carve_masked_permutation(p, max_tokens, ws.get());
  ASSERT_EQ(perm.max_m, max_tokens);
  ASSERT_EQ(perm.max_rows, groups * max_tokens);
  launch_permute_masked(p, tokens, d_ids.get(), perm, stream_);
  sync();
  auto download = [&](const int32_t* d, int64_t n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    MOE_CUDA_CHECK(cudaMemcpy(v.data(), d, size_t(n) * 4, cudaMemcpyDeviceToHost));
    return v;
  };
  const auto counts = download(perm.group_counts, groups);
  const auto slot_row = download(perm.slot_row, tokens * width + tokens);
  const auto row_token = download(perm.row_token, perm.max_rows);
  const auto row_group = download(perm.row_group, perm.max_rows);
  const auto row_slot = download(perm.row_slot, perm.max_rows);

  std::vector<int32_t> want_counts(size_t(groups), 0);
  std::set<int32_t> rows_used;
  for (int64_t s = 0; s < tokens * width + tokens; ++s) {
    const bool shared = s >= tokens * width;
    const int64_t t = shared ? s - tokens * width : s / width;
    const int64_t g = shared ? groups - 1 : (ids[s] >= 0 ? ids[s] : -1);
    if (g < 0) {
      EXPECT_EQ(slot_row[s], -1) << "slot " << s;
      continue;
    }
    ++want_counts[g];
    const int32_t r = slot_row[s];
    ASSERT_GE(r, g * max_tokens) << "slot " << s;
    ASSERT_LT(r, (g + 1) * max_tokens) << "slot " << s;
    EXPECT_TRUE(rows_used.insert(r).second) << "row " << r << " taken twice";
    EXPECT_EQ(row_token[r], t);
    EXPECT_EQ(row_group[r], g);
    EXPECT_EQ(row_slot[r], s);
  }
  EXPECT_EQ(counts, want_counts);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t i = counts[g]; i < max_tokens; ++i)
      EXPECT_EQ(row_token[g * max_tokens + i], -1) << "group " << g << " row " << i;
}

TEST_F(MaskedPermuteTest, AContiguousCarveIsRefused) {
  const moe_problem p = problem();
  DeviceBuffer<char> ws(permutation_workspace_bytes(p, 4));
  const Permutation perm = carve_permutation(p, 4, ws.get());
  EXPECT_THROW(launch_permute_masked(p, 1, nullptr, perm, stream_), moe::Error);
}

}  // namespace
}  // namespace moe::gpu
