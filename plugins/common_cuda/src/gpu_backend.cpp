#include "moe_cuda/gpu_backend.hpp"

#include <cuda_runtime_api.h>

#include "moe_cuda/bench.hpp"
#include "moe_cuda/routing.hpp"

namespace moe::gpu {

sdk::Verdict GpuBackend::can_route(const moe_problem& p) const {
  return route_limits(p);
}

void GpuBackend::route(const moe_problem& p, const moe_route_args& a, int64_t tokens) const {
  launch_route(
      p, tokens, static_cast<const float*>(a.logits.data), static_cast<const float*>(a.bias.data),
      static_cast<const uint8_t*>(a.is_padding.data), static_cast<int32_t*>(a.topk_ids.data),
      static_cast<float*>(a.topk_weights.data), static_cast<cudaStream_t>(a.stream));
}

void GpuBackend::benchmark(const moe_bench_args& a, const sdk::RunFn& run) const {
  gpu::benchmark(a, run);
}

}  // namespace moe::gpu
