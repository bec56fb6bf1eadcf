// One call of a CUTLASS device GEMM (GemmUniversalAdapter) on a stream, its failure as a stage and
// a message: the GEMM launchers (common_cuda's blockwise ones, trtllm_style's) hand these strings
// across their nvcc/host boundary, where the host side reports them. Include only where CUTLASS is.
#pragma once

#include <cuda_runtime_api.h>

#include "cutlass/cutlass.h"

namespace moe::gpu {

struct StageError {
  const char* stage = nullptr;    // "can_implement", "initialize", "run", "launch"; null if ok
  const char* message = nullptr;  // cutlassGetStatusString / cudaGetErrorString
};

template <class Gemm>
StageError run_cutlass_gemm(const typename Gemm::Arguments& args, void* workspace,
                            cudaStream_t stream) noexcept {
  Gemm gemm;
  if (auto s = gemm.can_implement(args); s != cutlass::Status::kSuccess)
    return {"can_implement", cutlassGetStatusString(s)};
  if (auto s = gemm.initialize(args, workspace, stream); s != cutlass::Status::kSuccess)
    return {"initialize", cutlassGetStatusString(s)};
  if (auto s = gemm.run(stream); s != cutlass::Status::kSuccess)
    return {"run", cutlassGetStatusString(s)};
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return {"launch", cudaGetErrorString(e)};
  return {};
}

}  // namespace moe::gpu
