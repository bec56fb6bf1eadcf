// The boundary between the nvcc-compiled launcher of the fused layer (fused_launch.cu) and the
// host code that checks and reports (mega_layer.cpp): plain types only, no exceptions, no fmt.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace moe::mega::detail {

// Limits the kernel holds in shared memory (kernels/fused_moe.cuh).
struct KernelLimits {
  int max_slots;    // tokens x top_k of one batch
  int max_experts;  // routed experts of the layer
  int token_chunk;  // an expert's slots per work item
  int weight_rows;  // rows of a weight tile: H is a multiple
};
KernelLimits kernel_limits();

// The TMA descriptors of the two weight stacks (CUtensorMap, opaque here), made once at prepare.
struct alignas(64) WeightMaps {
  unsigned char w13[128];
  unsigned char w2[128];
};
// w13 [rows13 = E * n1, hidden], w2 [rows2 = E * hidden, inter], bf16; nullptr on success.
const char* encode_weight_maps(WeightMaps* maps, const uint16_t* w13, int64_t rows13,
                               int64_t hidden, const uint16_t* w2, int64_t rows2,
                               int64_t inter) noexcept;

struct FusedCall {
  const WeightMaps* maps;
  const uint16_t* hidden;
  const int32_t* ids;
  const float* weights;
  uint16_t* out;
  const uint16_t* w13;
  const uint16_t* w2;
  uint16_t* inter;
  float* y;
  int32_t tokens, width, experts, hidden_dim, inter_dim, n1, activation;
  float limit, alpha;
  int32_t gelu_tanh;
  cudaStream_t stream;
};

// CTAs of one cooperative launch on this device (one per SM when the shared memory allows);
// 0 with `error` set when the kernel cannot be made resident.
int resident_ctas(const char** error) noexcept;

// nullptr on success, else what failed.
const char* launch_fused(const FusedCall& call, int ctas) noexcept;

}  // namespace moe::mega::detail
