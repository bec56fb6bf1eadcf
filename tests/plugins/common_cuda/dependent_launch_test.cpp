// Programmatic dependent launches (kernels/dependent_launch.cuh) must not change a bit: a chain of
// common_cuda's kernels, each reading what the one before it wrote (route -> permute -> gather
// and 1x128 quantisation -> gather -> finalize with identity experts), run without PDL and then
// with it, launched one by one and replayed from a graph. A kernel that touched memory before its
// wait would read a half-written buffer here and differ.
#include <cstring>
#include <vector>

#include "cuda_test_env.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/dependent_launch.hpp"
#include "moe_cuda/permute.hpp"
#include "moe_cuda/quantize.hpp"
#include "moe_cuda/routing.hpp"

namespace moe::gpu {
namespace {

using test::DeviceBuffer;

// Restores the switch a test changed.
class PdlSwitch {
 public:
  PdlSwitch() : was_(dependent_launch_enabled()) {}
  ~PdlSwitch() { set_dependent_launch(was_); }

 private:
  bool was_;
};

TEST(DependentLaunchSwitch, FollowsSetDependentLaunch) {
  const PdlSwitch restore;
  set_dependent_launch(true);
  EXPECT_TRUE(dependent_launch_enabled());
  set_dependent_launch(false);
  EXPECT_FALSE(dependent_launch_enabled());
}

// MOE_PDL turns dependent launches off with 0, off or false; unset or anything else leaves them on
// (where the device is sm90).
TEST(DependentLaunchSwitch, MoePdlTurnsThemOffWithZeroOffOrFalse) {
  EXPECT_TRUE(dependent_launch_allowed(nullptr));
  EXPECT_TRUE(dependent_launch_allowed(""));
  EXPECT_TRUE(dependent_launch_allowed("1"));
  EXPECT_TRUE(dependent_launch_allowed("on"));
  EXPECT_FALSE(dependent_launch_allowed("0"));
  EXPECT_FALSE(dependent_launch_allowed("off"));
  EXPECT_FALSE(dependent_launch_allowed("false"));
}

class DependentLaunchTest : public test::CudaTest {};

TEST_F(DependentLaunchTest, AChainGivesTheSameBitsWithAndWithoutPdl) {
  const PdlSwitch restore;
  Problem problem;
  moe_problem& r = problem.raw();
  r.experts = 64;
  r.top_k = 6;
  r.routing = MOE_ROUTING_SOFTMAX_TOPK;
  r.renormalize = 1;
  r.hidden = 1024;
  r.intermediate = 128;
  r.max_tokens = 200;
  problem.finalize();
  const moe_problem p = problem.c();
  const int64_t tokens = 190, h = p.hidden, width = topk_width(p);

  DeviceBuffer<float> logits(size_t(tokens * p.experts)), weights(size_t(tokens * width));
  DeviceBuffer<uint16_t> hidden(size_t(tokens * h)), out(size_t(tokens * h));
  DeviceBuffer<int32_t> ids(size_t(tokens * width));
  DeviceBuffer<char> workspace(permutation_workspace_bytes(p, p.max_tokens));
  const Permutation perm = carve_permutation(p, p.max_tokens, workspace.get());
  DeviceBuffer<uint16_t> rows(size_t(perm.max_rows * h));
  DeviceBuffer<uint8_t> codes(size_t(perm.max_rows * h));
  DeviceBuffer<float> scales(size_t(perm.max_rows * (h / 128)));

  std::vector<float> h_logits(logits.size());
  for (auto& x : h_logits) x = normal(1.5f);
  logits.upload(h_logits);
  hidden.upload(random_bf16(hidden.size()));

  auto chain = [&] {
    launch_route(p, tokens, logits.get(), nullptr, nullptr, ids.get(), weights.get(), stream_);
    launch_permute(p, tokens, ids.get(), perm, stream_);
    const RowRange live{perm.max_rows, nullptr, perm.group_offsets + perm.groups};
    launch_gather_quantize_fp8_1x128(hidden.get(), h, perm.row_token, live, codes.get(),
                                     {scales.get()}, stream_);
    launch_gather_rows(perm, h, hidden.get(), rows.get(), stream_);
    FinalizeArgs a;
    a.gemm2 = rows.get();  // identity experts
    a.topk_weights = weights.get();
    a.out = out.get();
    launch_finalize(p, tokens, perm, a, stream_);
  };
  auto poison = [&] {
    ids.poison(0x7b);
    weights.poison(0xff);
    rows.poison(0xff);
    codes.poison(0x7f);
    scales.poison(0xff);
    out.poison(0xff);
  };
  struct Result {
    std::vector<int32_t> ids;
    std::vector<float> weights, scales;
    std::vector<uint16_t> out;
    std::vector<uint8_t> codes;
  };
  auto result = [&] {
    return Result{ids.download(), weights.download(), scales.download(), out.download(),
                  codes.download()};
  };
  auto same = [](const Result& a, const Result& b) {
    auto bits = [](const auto& x, const auto& y) {
      return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0;
    };
    return a.ids == b.ids && bits(a.weights, b.weights) && bits(a.scales, b.scales) &&
           a.out == b.out && a.codes == b.codes;
  };

  set_dependent_launch(false);
  poison();
  chain();
  sync();
  const Result plain = result();

  set_dependent_launch(true);
  for (int run = 0; run < 5; ++run) {
    poison();
    chain();
    sync();
    EXPECT_TRUE(same(result(), plain)) << "eager run " << run;
  }
  cudaGraph_t graph = nullptr;
  MOE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  chain();
  MOE_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  MOE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 20; ++replay) {
    poison();
    MOE_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
    sync();
    EXPECT_TRUE(same(result(), plain)) << "replay " << replay;
  }
  MOE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  MOE_CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace
}  // namespace moe::gpu
