// route -> permute -> gather -> finalize captured once in a CUDA graph and replayed on new inputs:
// nothing in the chain allocates or synchronises, and every replay recomputes from the inputs.
// The experts are identities (GEMM2's output := the gathered rows), so the layer's output is
// known on the CPU: sum_j w_j * (x_t + b2[g_j]) over the routed and sink columns, + x_t (shared).
#include <cmath>
#include <vector>

#include "cuda_test_env.hpp"
#include "moe/sdk/problem.hpp"
#include "moe_cuda/permute.hpp"
#include "moe_cuda/routing.hpp"
#include "routing.hpp"  // plugins/reference

namespace moe::gpu {
namespace {

using test::DeviceBuffer;

class GraphTest : public test::CudaTest {};

TEST_F(GraphTest, RoutePermuteGatherFinalizeReplayOnNewInputs) {
  Problem problem;
  moe_problem& r = problem.raw();
  r.experts = 64;
  r.top_k = 6;
  r.routing = MOE_ROUTING_SIGMOID_BIAS_SINK;
  r.routing_bias = 1;
  r.sink_experts = 2;
  r.sink_intermediate = 32;
  r.shared_intermediate = 64;
  r.hidden = 256;
  r.intermediate = 64;
  r.route_scale = 1.5f;
  r.max_tokens = 160;
  problem.finalize();
  const moe_problem p = problem.c();
  const int64_t tokens = 150, h = p.hidden, width = topk_width(p), in_width = p.experts + 2;

  DeviceBuffer<float> logits(static_cast<size_t>(tokens * in_width)),
      bias(static_cast<size_t>(p.experts));
  DeviceBuffer<float> b2(static_cast<size_t>(p.local_experts * h)),
      weights(static_cast<size_t>(tokens * width));
  DeviceBuffer<uint16_t> hidden(static_cast<size_t>(tokens * h)),
      out(static_cast<size_t>(tokens * h));
  DeviceBuffer<int32_t> ids(static_cast<size_t>(tokens * width));
  DeviceBuffer<char> workspace(permutation_workspace_bytes(p, p.max_tokens));
  const Permutation perm = carve_permutation(p, p.max_tokens, workspace.get());
  DeviceBuffer<uint16_t> rows(static_cast<size_t>(perm.max_rows * h));

  cudaGraph_t graph = nullptr;
  MOE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  launch_route(p, tokens, logits.get(), bias.get(), nullptr, ids.get(), weights.get(), stream_);
  launch_permute(p, tokens, ids.get(), perm, stream_);
  launch_gather_rows(perm, h, hidden.get(), rows.get(), stream_);
  FinalizeArgs a;
  a.gemm2 = rows.get();  // identity experts
  a.topk_weights = weights.get();
  a.bias = b2.get();
  a.out = out.get();
  launch_finalize(p, tokens, perm, a, stream_);
  MOE_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  MOE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  for (int replay = 0; replay < 3; ++replay) {
    SCOPED_TRACE(replay);
    std::vector<float> h_logits(logits.size()), h_bias(bias.size()), h_b2(b2.size());
    for (auto& x : h_logits) x = normal(1.5f);
    for (auto& x : h_bias) x = normal(0.05f);
    for (auto& x : h_b2) x = normal(0.5f);
    const std::vector<uint16_t> x = random_bf16(hidden.size());
    logits.upload(h_logits);
    bias.upload(h_bias);
    b2.upload(h_b2);
    hidden.upload(x);
    ids.poison(0x7b);
    weights.poison(0xff);
    out.poison(0xff);
    workspace.poison(0x7b);
    rows.poison(0xff);
    MOE_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
    sync();

    std::vector<int32_t> want_ids(ids.size());
    std::vector<float> want_w(weights.size());
    reference::route(p, tokens, h_logits.data(), h_bias.data(), nullptr, want_ids.data(),
                     want_w.data());
    const std::vector<float> w = weights.download();
    EXPECT_EQ(ids.download(), want_ids);
    for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(w[i], want_w[i], 1e-6) << "slot " << i;

    // The layer's output in the finalize's float order (slot columns, then the shared row).
    const std::vector<uint16_t> got = out.download();
    int64_t wrong = 0;
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t c = 0; c < h; ++c) {
        const float xv = bf16_to_float(x[t * h + c]);
        float acc = 0.0f;
        for (int64_t j = 0; j < width; ++j) {
          const int32_t id = want_ids[t * width + j];
          if (id < 0) continue;
          const float v = j < p.top_k ? xv + h_b2[id * h + c] : xv;  // sinks take no bias
          acc = std::fmaf(w[t * width + j], v, acc);
        }
        acc = acc + xv;
        wrong += got[t * h + c] != float_to_bf16(acc);
      }
    EXPECT_EQ(wrong, 0);
  }
  MOE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  MOE_CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace
}  // namespace moe::gpu
