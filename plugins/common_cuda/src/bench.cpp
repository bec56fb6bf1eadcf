#include "moe_cuda/bench.hpp"

#include <cuda_runtime_api.h>

#include <vector>

#include "moe/sdk/error.hpp"
#include "moe_cuda/device.hpp"

namespace moe::gpu {
namespace {

// Owns the CUDA objects of one benchmark, released on every path out.
struct Resources {
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;
  std::vector<cudaGraph_t> graphs;
  std::vector<cudaGraphExec_t> execs;
  ~Resources() {
    for (auto e : execs) cudaGraphExecDestroy(e);
    for (auto g : graphs) cudaGraphDestroy(g);
    for (auto e : events) cudaEventDestroy(e);
    if (stream) cudaStreamDestroy(stream);
  }
};

}  // namespace

void benchmark(const moe_bench_args& a, const std::function<void(const moe_run_args&)>& run) {
  MOE_CHECK(a.runs != nullptr && a.num_runs >= 1 && a.iterations >= 1 && a.warmup >= 0 &&
                a.times_ms != nullptr,
            MOE_STATUS_INVALID_ARGUMENT,
            "benchmark needs run sets, iterations >= 1 and a times_ms buffer (num_runs={}, "
            "iterations={}, warmup={})",
            a.num_runs, a.iterations, a.warmup);
  Resources r;
  check_cuda(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  std::vector<moe_run_args> runs(a.runs, a.runs + a.num_runs);
  for (auto& run_args : runs) run_args.stream = r.stream;
  if (a.use_graph) {
    for (const auto& run_args : runs) {
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      check_cuda(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal),
                 "cudaStreamBeginCapture");
      try {
        run(run_args);
      } catch (...) {
        cudaStreamEndCapture(r.stream, &graph);
        if (graph) cudaGraphDestroy(graph);
        throw;
      }
      check_cuda(cudaStreamEndCapture(r.stream, &graph), "cudaStreamEndCapture");
      r.graphs.push_back(graph);
      check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
      r.execs.push_back(exec);
    }
  }
  auto launch = [&](int64_t i) {
    const size_t k = size_t(i % a.num_runs);
    if (a.use_graph)
      check_cuda(cudaGraphLaunch(r.execs[k], r.stream), "cudaGraphLaunch");
    else
      run(runs[k]);
  };
  for (int32_t i = 0; i < a.warmup; ++i) launch(i);
  r.events.resize(size_t(a.iterations) + 1);
  for (auto& e : r.events) check_cuda(cudaEventCreate(&e), "cudaEventCreate");
  check_cuda(cudaEventRecord(r.events[0], r.stream), "cudaEventRecord");
  for (int32_t i = 0; i < a.iterations; ++i) {
    launch(a.warmup + i);
    check_cuda(cudaEventRecord(r.events[size_t(i) + 1], r.stream), "cudaEventRecord");
  }
  check_cuda(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize");
  for (int32_t i = 0; i < a.iterations; ++i) {
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, r.events[size_t(i)], r.events[size_t(i) + 1]),
               "cudaEventElapsedTime");
    a.times_ms[i] = ms;
  }
}

}  // namespace moe::gpu
