// DeviceLayer's workspace, carved from the caller's per run (trtllm_layer.cpp, carve): shared by
// the files that run a layer (trtllm_layer.cpp; fp8_block_run.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "moe_cuda/permute.hpp"
#include "trtllm_layer.hpp"

namespace moe::trtllm {

struct DeviceLayer::Workspace {
  moe::gpu::Permutation perm;
  void* rows;   // [R, H] bf16 (e4m3 for fp8_tensor), the tokens of each group, contiguous
  void* gemm1;  // [R, n1] bf16 (separate activation only)
  void* act;    // [R, P] bf16 (f32 for fp8_tensor, quantised into act_codes next; none for
                //   fp8_tensor_static on the weight-only GEMM, whose GEMM1 writes act_codes)
  void* gemm2;  // [R, H] bf16
  void* gemm_ws;
  size_t gemm_ws_bytes;
  // fp8_tensor only:
  uint8_t* hidden_codes;  // [T, H] e4m3: the hidden states quantised once, gathered from here
  uint8_t* act_codes;     // [R, P] e4m3: the intermediate quantised
  float* scales;          // [3]: hidden states, routed intermediate, shared intermediate
  void* amax_ws;          // the dynamic quantisation's amax scratch
  uint32_t* gemm1_amax;   // fp8_gemm own: [2] GEMM1's intermediate amaxes (routed, shared)
  // fp8_block only (rows: [R, H] e4m3, gemm1: [R, n1] f32, act: [R, P] e4m3):
  float* row_scales;  // [H/128][R] MN-major: rows' scales
  float* act_scales;  // [P/128][R] MN-major: the intermediate's scales
  void* staging;      // the tokens quantised once, then gathered (gpu::Fp8Staging)
};

}  // namespace moe::trtllm
