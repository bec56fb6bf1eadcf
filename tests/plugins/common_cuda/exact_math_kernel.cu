// Test kernels for kernels/exact_math.cuh and activate_batch (exact_math_kernel.hpp).
#include "exact_math_kernel.hpp"

#include "kernels/activation.cuh"
#include "kernels/exact_math.cuh"
#include "kernels/quantize.cuh"

namespace moe::gpu::test {
namespace {

__global__ void exact_math_mismatches(unsigned long long* counts) {
  unsigned long long fast = 0, rcp_wrong = 0, scale_wrong = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < (1ull << 32);
       i += stride) {
    const float y = __uint_as_float(uint32_t(i));
    bool slow = false;
    const float r = kernels::rcp_rn_fast(y, slow);
    if (!slow) {
      ++fast;
      rcp_wrong += __float_as_uint(r) != __float_as_uint(1.0f / y);
    }
    const double a = double(y);
    const float want = float((a < 1e-10 ? 1e-10 : a) / 448.0);
    const float got = kernels::fp8_scale_from_amax(y);
    // NaN in, NaN out (its payload aside).
    scale_wrong += y != y ? got == got : __float_as_uint(got) != __float_as_uint(want);
  }
  atomicAdd(&counts[0], fast);
  atomicAdd(&counts[1], rcp_wrong);
  atomicAdd(&counts[2], scale_wrong);
}

template <int32_t kAct>
__global__ void activate_both(kernels::ActivationParams p, const float* g, const float* u,
                              float* out, int64_t n) {
  constexpr int kN = 16;
  const int64_t first = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * kN;
  if (first >= n) return;
  float gb[kN], ub[kN];
#pragma unroll
  for (int i = 0; i < kN; ++i) gb[i] = g[first + i], ub[i] = u[first + i];
  kernels::activate_batch<kAct>(p, gb, ub);
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    out[first + i] = gb[i];
    out[n + first + i] = kernels::activate(p, kAct, g[first + i], u[first + i]);
  }
}

}  // namespace

cudaError_t count_exact_math_mismatches(unsigned long long* counts, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(counts, 0, 3 * sizeof(unsigned long long), stream);
  if (e != cudaSuccess) return e;
  exact_math_mismatches<<<1024, 256, 0, stream>>>(counts);
  return cudaGetLastError();
}

cudaError_t activate_both_ways(int32_t act, float alpha, float limit, const float* g,
                               const float* u, float* out, int64_t n, cudaStream_t stream) {
  if (n % 16 != 0) return cudaErrorInvalidValue;
  kernels::ActivationParams p{};
  p.alpha = alpha;
  p.limit = limit;
  const int64_t threads = n / 16;
  const unsigned blocks = unsigned((threads + 127) / 128);
  if (blocks == 0) return cudaSuccess;
  switch (act) {
    case kernels::kSiluMul:
      activate_both<kernels::kSiluMul><<<blocks, 128, 0, stream>>>(p, g, u, out, n);
      break;
    case kernels::kSiluMulClamp:
      activate_both<kernels::kSiluMulClamp><<<blocks, 128, 0, stream>>>(p, g, u, out, n);
      break;
    case kernels::kSwigluOai:
      activate_both<kernels::kSwigluOai><<<blocks, 128, 0, stream>>>(p, g, u, out, n);
      break;
    case kernels::kRelu2:
      activate_both<kernels::kRelu2><<<blocks, 128, 0, stream>>>(p, g, u, out, n);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace moe::gpu::test
