// launch_gather_rows and launch_finalize on a real permutation, against CPU models: the gather
// bit for bit, the finalize bit for bit against the same fp32 operations in the same order.
#include <cmath>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_env.hpp"
#include "moe/sdk/error.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/permute.hpp"

namespace moe::gpu {
namespace {

using test::DeviceBuffer;

class RowsTest : public test::CudaTest {
 protected:
  // Routed columns: distinct random experts or -1; sink columns: E+s or -1. `none`: share of -1.
  std::vector<int32_t> random_ids(const moe_problem& p, int64_t tokens, float none) {
    const int64_t width = topk_width(p);
    std::vector<int32_t> ids(static_cast<size_t>(tokens * width));
    std::vector<int32_t> experts(static_cast<size_t>(p.experts));
    std::iota(experts.begin(), experts.end(), 0);
    for (int64_t t = 0; t < tokens; ++t) {
      std::shuffle(experts.begin(), experts.end(), rng_);
      for (int64_t j = 0; j < width; ++j)
        ids[t * width + j] = uniform(0, 1) < none ? -1
                             : j < p.top_k        ? experts[j]
                                                  : int32_t(p.experts + j - p.top_k);
    }
    return ids;
  }

  // Workspace and permutation of `ids`, computed on the device.
  struct Permuted {
    DeviceBuffer<char> workspace;
    Permutation perm;
    std::vector<int32_t> slot_row, row_token, row_group;
    int64_t rows = 0;
  };
  Permuted permute(const moe_problem& p, int64_t tokens, const std::vector<int32_t>& ids) {
    Permuted out;
    out.workspace = DeviceBuffer<char>(permutation_workspace_bytes(p, tokens));
    out.perm = carve_permutation(p, tokens, out.workspace.get());
    DeviceBuffer<int32_t> d_ids(ids);
    launch_permute(p, tokens, d_ids.get(), out.perm, stream_);
    sync();
    const int64_t slots = out.perm.max_rows;
    out.slot_row.resize(static_cast<size_t>(slots));
    out.row_token.resize(static_cast<size_t>(slots));
    out.row_group.resize(static_cast<size_t>(slots));
    MOE_CUDA_CHECK(cudaMemcpy(&out.rows, out.perm.group_offsets + out.perm.groups, sizeof(int64_t),
                              cudaMemcpyDeviceToHost));
    if (slots > 0) {
      MOE_CUDA_CHECK(
          cudaMemcpy(out.slot_row.data(), out.perm.slot_row, slots * 4, cudaMemcpyDeviceToHost));
      MOE_CUDA_CHECK(
          cudaMemcpy(out.row_token.data(), out.perm.row_token, slots * 4, cudaMemcpyDeviceToHost));
      MOE_CUDA_CHECK(
          cudaMemcpy(out.row_group.data(), out.perm.row_group, slots * 4, cudaMemcpyDeviceToHost));
    }
    return out;
  }

  // `skip_end > skip_begin`: rows of those groups stay as they were (poison) too.
  void expect_gather(int64_t hidden, int64_t misalign, int32_t skip_begin = 0,
                     int32_t skip_end = 0) {
    Problem problem;
    problem.raw().experts = 32;
    problem.raw().top_k = 4;
    problem.raw().hidden = hidden;
    problem.raw().intermediate = 64;
    problem.raw().shared_intermediate = 64;
    problem.finalize();
    const moe_problem p = problem.c();
    const int64_t tokens = 300;
    Permuted pm = permute(p, tokens, random_ids(p, tokens, 0.2f));
    const std::vector<uint16_t> x = random_bf16(static_cast<size_t>(tokens * hidden));
    std::vector<uint16_t> x_padded(static_cast<size_t>(misalign), 0);
    x_padded.insert(x_padded.end(), x.begin(), x.end());
    DeviceBuffer<uint16_t> d_x(x_padded);
    DeviceBuffer<uint16_t> d_out(static_cast<size_t>(pm.perm.max_rows * hidden + misalign));
    d_out.poison(0xff);
    launch_gather_rows(pm.perm, hidden, d_x.get() + misalign, d_out.get() + misalign, stream_,
                       skip_begin, skip_end);
    sync();
    const std::vector<uint16_t> out = d_out.download();
    int64_t wrong = 0, skipped = 0;
    for (int64_t r = 0; r < pm.perm.max_rows; ++r) {
      const bool skip = r < pm.rows && pm.row_group[r] >= skip_begin && pm.row_group[r] < skip_end;
      skipped += skip;
      for (int64_t c = 0; c < hidden; ++c) {
        const uint16_t want =
            r < pm.rows && !skip ? x[pm.row_token[r] * hidden + c] : uint16_t(0xffff);
        wrong += out[misalign + r * hidden + c] != want;
      }
    }
    EXPECT_EQ(wrong, 0) << "H=" << hidden << " misalign=" << misalign << " rows=" << pm.rows
                        << " skipping [" << skip_begin << ", " << skip_end << ")";
    if (skip_end > skip_begin) {
      EXPECT_GT(skipped, 0) << "the skipped groups should hold rows";
    }
  }

  // The finalize contract in plain float: slot columns in order, fmaf per term, then the shared
  // row, one rounding to bf16. `old` (accumulate): the caller's output, added to the sum last.
  std::vector<uint16_t> finalize_model(const moe_problem& p, int64_t tokens, const Permuted& pm,
                                       const std::vector<uint16_t>& gemm2,
                                       const std::vector<float>& weights,
                                       const std::vector<float>& bias,
                                       const std::vector<uint16_t>& old) {
    const int64_t h = p.hidden, width = topk_width(p);
    std::vector<uint16_t> out(static_cast<size_t>(tokens * h));
    std::vector<float> acc(static_cast<size_t>(h));
    for (int64_t t = 0; t < tokens; ++t) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < width; ++j) {
        const int32_t row = pm.slot_row[t * width + j];
        if (row < 0) continue;
        const int32_t g = pm.row_group[row];
        const float w = weights[t * width + j];
        for (int64_t c = 0; c < h; ++c) {
          float v = bf16_to_float(gemm2[row * h + c]);
          if (!bias.empty() && g < p.local_experts) v = v + bias[g * h + c];
          acc[c] = std::fmaf(w, v, acc[c]);
        }
      }
      if (p.shared_intermediate > 0) {
        const int32_t row = pm.slot_row[tokens * width + t];
        for (int64_t c = 0; c < h; ++c) acc[c] = acc[c] + bf16_to_float(gemm2[row * h + c]);
      }
      if (!old.empty())
        for (int64_t c = 0; c < h; ++c) acc[c] = bf16_to_float(old[t * h + c]) + acc[c];
      for (int64_t c = 0; c < h; ++c) out[t * h + c] = float_to_bf16(acc[c]);
    }
    return out;
  }

  // accumulate: the output starts random and must gain the sum (a token without rows keeps it).
  void expect_finalize(int64_t hidden, bool shared, bool with_bias, bool accumulate = false) {
    Problem problem;
    moe_problem& r = problem.raw();
    r.experts = 32;
    r.top_k = 4;
    r.routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
    r.sink_experts = 2;
    r.sink_intermediate = 32;
    r.hidden = hidden;
    r.intermediate = 64;
    r.shared_intermediate = shared ? 64 : 0;
    problem.finalize();
    const moe_problem p = problem.c();
    SCOPED_TRACE(describe_problem(p));
    const int64_t tokens = 257, width = topk_width(p);
    std::vector<int32_t> ids = random_ids(p, tokens, 0.3f);
    for (int64_t j = 0; j < width; ++j) ids[7 * width + j] = -1;  // token 7 has no expert
    const Permuted pm = permute(p, tokens, ids);
    const std::vector<uint16_t> gemm2 = random_bf16(static_cast<size_t>(pm.perm.max_rows * hidden));
    std::vector<float> weights(static_cast<size_t>(tokens * width)), bias;
    for (auto& w : weights) w = uniform(-1.0f, 1.0f);
    if (with_bias) {
      bias.resize(static_cast<size_t>(p.local_experts * hidden));
      for (auto& b : bias) b = normal(0.5f);
    }
    DeviceBuffer<uint16_t> d_gemm2(gemm2), d_out(static_cast<size_t>(tokens * hidden));
    DeviceBuffer<float> d_weights(weights), d_bias(bias);
    std::vector<uint16_t> old;
    if (accumulate) {
      old = random_bf16(static_cast<size_t>(tokens * hidden));
      d_out.upload(old);
    } else {
      d_out.poison(0xff);
    }
    FinalizeArgs a;
    a.gemm2 = d_gemm2.get();
    a.topk_weights = d_weights.get();
    a.bias = with_bias ? d_bias.get() : nullptr;
    a.out = d_out.get();
    a.accumulate = accumulate;
    launch_finalize(p, tokens, pm.perm, a, stream_);
    sync();
    const std::vector<uint16_t> got = d_out.download();
    const std::vector<uint16_t> want = finalize_model(p, tokens, pm, gemm2, weights, bias, old);
    int64_t wrong = 0;
    for (size_t i = 0; i < want.size(); ++i)
      if (got[i] != want[i] && wrong++ < 5)
        ADD_FAILURE() << "token " << i / hidden << " column " << i % hidden << ": got "
                      << bf16_to_float(got[i]) << " want " << bf16_to_float(want[i]);
    EXPECT_EQ(wrong, 0);
    if (!shared) {  // token 7's row: zero, or the old value untouched
      for (int64_t c = 0; c < hidden; ++c)
        EXPECT_EQ(got[7 * hidden + c], accumulate ? old[7 * hidden + c] : uint16_t(0))
            << "column " << c;
    }
  }
};

TEST_F(RowsTest, GatherCopiesEachRowsTokenAndLeavesUnusedRowsAlone) {
  expect_gather(7168, 0);         // 16-byte vectors
  expect_gather(100, 0);          // H % 8 != 0: scalar
  expect_gather(64, 1);           // misaligned pointers: scalar
  expect_gather(7168, 0, 3, 9);   // groups 3..8 computed apart: their rows untouched
  expect_gather(100, 0, 32, 33);  // the shared expert's group
}

// The gather's skipped range must lie within the permutation's groups (checked before any CUDA
// call, so on any machine).
TEST(GatherArgs, ASkippedRangeOutsideTheGroupsIsRefused) {
  Permutation perm;
  perm.groups = 4;
  int64_t offsets[5] = {};
  perm.group_offsets = offsets;
  for (const auto& [b, e] : {std::pair{2, 1}, std::pair{-1, 0}, std::pair{0, 5}}) try {
      launch_gather_rows(perm, 64, nullptr, nullptr, nullptr, b, e);
      ADD_FAILURE() << "[" << b << ", " << e << ") was taken";
    } catch (const Error& x) {
      EXPECT_EQ(x.status(), MOE_STATUS_INVALID_ARGUMENT);
      EXPECT_NE(std::string(x.what()).find("skipped groups"), std::string::npos) << x.what();
    }
  try {
    launch_gather_rows(perm, 64, nullptr, nullptr, nullptr, 1, 2);  // no row_group to skip by
    ADD_FAILURE() << "a skip without row_group was taken";
  } catch (const Error& x) {
    EXPECT_NE(std::string(x.what()).find("needs the permutation's row_group"), std::string::npos)
        << x.what();
  }
}

TEST_F(RowsTest, FinalizeSumsWeightedRowsInSlotOrderBitForBit) {
  expect_finalize(256, /*shared=*/false, /*bias=*/true);
  expect_finalize(256, /*shared=*/true, /*bias=*/false);
  expect_finalize(100, /*shared=*/true, /*bias=*/true);  // scalar path
  expect_finalize(7168, /*shared=*/false, /*bias=*/false);
}

TEST_F(RowsTest, FinalizeAccumulateAddsTheOldRowOnceBitForBit) {
  expect_finalize(256, /*shared=*/false, /*bias=*/true, /*accumulate=*/true);
  expect_finalize(256, /*shared=*/true, /*bias=*/false, /*accumulate=*/true);
  expect_finalize(100, /*shared=*/false, /*bias=*/false, /*accumulate=*/true);  // scalar path
}

}  // namespace
}  // namespace moe::gpu
