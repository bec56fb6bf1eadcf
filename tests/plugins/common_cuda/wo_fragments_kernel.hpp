// Test launchers for the fragment readers of the weight-only GEMM and cutlass_mega
// (kernels/mxfp8_fragments.cuh, kernels/fp4_fragments.cuh): one block of 256 threads (two
// warpgroups of 64 chunk rows) decodes a prepared chunk into the A fragments a wgmma m64nNk16
// consumer would hold, and writes them out.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace moe::gpu::test {

// out[((t * 8) + j) * 4 + i]: thread t's register i of K step j (t = 128 half + 32 warp + lane).
cudaError_t decode_mx8_fragments(const uint8_t* chunk, uint32_t* out, cudaStream_t stream);
// The same for a 4-bit chunk: mxfp4 (`mx`) or nvfp4.
cudaError_t decode_fp4_fragments(bool mx, const uint8_t* chunk, uint32_t* out, cudaStream_t stream);

}  // namespace moe::gpu::test
