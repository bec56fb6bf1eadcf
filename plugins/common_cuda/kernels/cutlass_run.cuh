// One call of a CUTLASS device GEMM (GemmUniversalAdapter) on a stream, its failure as a stage and
// a message: the GEMM launchers (common_cuda's blockwise ones, trtllm_style's) hand these strings
// across their nvcc/host boundary, where the host side reports them. Include only where CUTLASS is.
#pragma once

#include <cuda_runtime_api.h>

#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "moe_cuda/smem_opt_in.hpp"

namespace moe::gpu {

struct StageError {
  const char* stage = nullptr;    // "can_implement", "initialize", "run", "launch"; null if ok
  const char* message = nullptr;  // cutlassGetStatusString / cudaGetErrorString
};

// The adapter's initialize() sets the kernel's shared-memory attribute on every call (a host
// call per launch, suspected of blocking behind queued work: bench/NOTES.md, "Host time"); here
// it is set once per kernel and device (smem_opt_in.hpp), and the launch goes through the static
// params path.
template <class Gemm>
StageError run_cutlass_gemm(const typename Gemm::Arguments& args, void* workspace,
                            cudaStream_t stream) noexcept {
  using Kernel = typename Gemm::GemmKernel;
  if (auto s = Gemm::can_implement(args); s != cutlass::Status::kSuccess)
    return {"can_implement", cutlassGetStatusString(s)};
  if (auto s = Kernel::initialize_workspace(args, workspace, stream, nullptr);
      s != cutlass::Status::kSuccess)
    return {"initialize", cutlassGetStatusString(s)};
  const cudaError_t opt_in =
      int(Kernel::SharedStorageSize) >= (48 << 10)
          ? opt_in_dynamic_smem(cutlass::device_kernel<Kernel>, int(Kernel::SharedStorageSize))
          : cudaSuccess;
  if (opt_in != cudaSuccess) return {"initialize", cudaGetErrorString(opt_in)};
  typename Gemm::Params params = Kernel::to_underlying_arguments(args, workspace);
  if (auto s = Gemm::run(params, stream); s != cutlass::Status::kSuccess)
    return {"run", cutlassGetStatusString(s)};
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return {"launch", cudaGetErrorString(e)};
  return {};
}

}  // namespace moe::gpu
