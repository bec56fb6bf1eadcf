#include "kernels/fp4_fragments.cuh"
#include "kernels/mxfp8_fragments.cuh"
#include "wo_fragments_kernel.hpp"

namespace moe::gpu::test {
namespace {

template <class Rows>
__global__ void fragments_kernel(const uint8_t* chunk, uint32_t* out) {
  const int t = int(threadIdx.x), half = t / 128, warp = (t % 128) / 32, lane = t % 32;
  const Rows rows(chunk, half * 64 + warp * 16 + lane / 4, lane % 4);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    uint32_t a[4];
    rows.fragments(j, a);
    for (int i = 0; i < 4; ++i) out[(t * 8 + j) * 4 + i] = a[i];
  }
}

}  // namespace

cudaError_t decode_mx8_fragments(const uint8_t* chunk, uint32_t* out, cudaStream_t stream) {
  fragments_kernel<kernels::Mx8Rows><<<1, 256, 0, stream>>>(chunk, out);
  return cudaGetLastError();
}

cudaError_t decode_fp4_fragments(bool mx, const uint8_t* chunk, uint32_t* out,
                                 cudaStream_t stream) {
  if (mx)
    fragments_kernel<kernels::Fp4Rows<true>><<<1, 256, 0, stream>>>(chunk, out);
  else
    fragments_kernel<kernels::Fp4Rows<false>><<<1, 256, 0, stream>>>(chunk, out);
  return cudaGetLastError();
}

}  // namespace moe::gpu::test
