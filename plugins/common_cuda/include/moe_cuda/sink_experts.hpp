// Sink experts run apart from a quantised layer's grouped GEMMs (deepgemm_style, docs/design.md
// §12; trtllm_style's weight-only layers, §6): bf16 weights on the bf16 hidden states, silu_mul,
// never quantised, so they cannot join the e4m3 or weight-only grouped GEMMs. They run densely on
// every token of the batch (cuBLAS bf16 GEMMs with f32 accumulation: the row count is the batch
// size, known on the host), and each result is scattered into the permuted row that the
// permutation gave its sink slot, so the combine weighs it by the slot's gamma like any other
// slot. In Inkling-like routing every token but padding uses every sink: the dense form computes
// nothing that is not used. Graph-capturable: cuBLAS gets its workspace from the caller's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "moe/abi/moe_abi.h"
#include "moe_cuda/device.hpp"
#include "moe_cuda/permute.hpp"

namespace moe::gpu {

class SinkExperts {
 public:
  // Uploads sink_w13 [S, 2Is, H] and sink_w2 [S, H, Is] (bf16, checked by check_weights) and
  // makes the cuBLAS handle. `p` must have sink_experts >= 1.
  SinkExperts(const moe_problem& p, const moe_weights& w);
  ~SinkExperts();
  SinkExperts(const SinkExperts&) = delete;
  SinkExperts& operator=(const SinkExperts&) = delete;

  // Workspace for a batch of `tokens`: the GEMM1 output, the intermediate, the results, and
  // cuBLAS's own.
  size_t workspace_bytes(int64_t tokens) const;

  // gemm2 rows of the sink slots (columns top_k .. top_k + S - 1 of perm) = each sink's MLP of
  // its token's hidden states [tokens, H] bf16. `workspace`: workspace_bytes(tokens), 256-byte
  // aligned.
  void run(int64_t tokens, const uint16_t* hidden, const Permutation& perm, uint16_t* gemm2,
           void* workspace, cudaStream_t stream) const;

 private:
  struct Handle;
  moe_problem p_;
  DeviceBuffer w13_, w2_;
  std::unique_ptr<Handle> handle_;
  mutable std::mutex mutex_;  // one cuBLAS handle: its stream and workspace are set per run
};

}  // namespace moe::gpu
