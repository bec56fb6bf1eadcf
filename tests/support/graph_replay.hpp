// A layer's run captured once in a CUDA graph over fixed buffers of `tokens` tokens, for GPU
// tests (include it where cudart is linked). replay() puts a new batch and its routing into
// those buffers, poisons the output, replays the graph and returns the output: one captured run
// serving new inputs and new routing, as an engine's decode loop does.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "test_env.hpp"

namespace moe::test {

class GraphReplay {
 public:
  GraphReplay(const std::shared_ptr<Plugin>& plugin, const Layer& layer, const moe_problem& p,
              int64_t tokens)
      : tokens_(tokens),
        hidden_size_(p.hidden),
        width_(p.top_k + p.sink_experts),
        hidden_(plugin, size_t(tokens * p.hidden * 2)),
        ids_(plugin, size_t(tokens * width_ * 4)),
        weights_(plugin, size_t(tokens * width_ * 4)),
        out_(plugin, size_t(tokens * p.hidden * 2)),
        workspace_(plugin, layer.workspace_size(tokens)) {
    moe_run_args args{};
    args.hidden = make_view(hidden_.data(), MOE_DTYPE_BF16, {tokens, p.hidden});
    args.topk_ids = make_view(ids_.data(), MOE_DTYPE_I32, {tokens, width_});
    args.topk_weights = make_view(weights_.data(), MOE_DTYPE_F32, {tokens, width_});
    args.output = make_view(out_.data(), MOE_DTYPE_BF16, {tokens, p.hidden});
    args.workspace = workspace_.data();
    args.workspace_size = workspace_.size();
    check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    args.stream = stream_;
    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    layer.run(args);
    check(cudaStreamEndCapture(stream_, &graph_), "cudaStreamEndCapture");
    check(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate");
  }
  ~GraphReplay() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  GraphReplay(const GraphReplay&) = delete;
  GraphReplay& operator=(const GraphReplay&) = delete;

  // The layer's output [tokens, H] bf16 for `batch` routed by `routing`, by one graph replay.
  HostTensor replay(const Batch& batch, const Routing& routing) const {
    upload_tensor(hidden_, batch.hidden);
    upload_tensor(ids_, routing.ids);
    upload_tensor(weights_, routing.weights);
    HostTensor out(MOE_DTYPE_BF16, {tokens_, hidden_size_});
    out.fill_bytes(0xFF);  // poison: a row the replay does not write stays NaN
    upload_tensor(out_, out);
    check(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    out_.download(out.raw(), out.bytes());
    return out;
  }

  // One replay of `batch`, routed by `reference`, against `ref_layer` run in fp64 on the same
  // routing: the relative L2 of the output.
  double error_against(const Layer& ref_layer, const Plugin& reference, const moe_problem& p,
                       const Batch& batch) const {
    const Routing routing = route_batch(reference, p, batch);
    const HostTensor got = replay(batch, routing);
    const RunResult ref = run_layer(ref_layer, p, batch.hidden, routing, MOE_DTYPE_F64);
    return relative_l2(got, ref.output);
  }

 private:
  static void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess)
      throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
  }

  int64_t tokens_, hidden_size_, width_;
  Buffer hidden_, ids_, weights_, out_, workspace_;
  cudaStream_t stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace moe::test
