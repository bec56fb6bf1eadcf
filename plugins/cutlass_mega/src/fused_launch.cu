// Launcher of the fused layer (kernels/fused_moe.cuh): shared-memory opt-in, residency, one
// cooperative launch on the caller's stream.
#include "../kernels/fused_moe.cuh"
#include "fused_launch.hpp"

namespace moe::mega::detail {

KernelLimits kernel_limits() {
  using namespace kernels;
  return {kMaxSlots, kMaxExperts, kTok, kK, kRows, kSmemBytes};
}

int resident_ctas(const char** error) noexcept {
  static const cudaError_t opt_in = cudaFuncSetAttribute(
      kernels::fused_moe, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kernels::kSmemBytes));
  if (opt_in != cudaSuccess) {
    *error = cudaGetErrorString(opt_in);
    return 0;
  }
  int device = 0, sms = 0, per_sm = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess)
    return *error = cudaGetErrorString(e), 0;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      e != cudaSuccess)
    return *error = cudaGetErrorString(e), 0;
  if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &per_sm, kernels::fused_moe, kernels::kThreads, kernels::kSmemBytes);
      e != cudaSuccess)
    return *error = cudaGetErrorString(e), 0;
  if (per_sm < 1) return *error = "the kernel's shared memory does not fit one SM", 0;
  return sms;  // one CTA per SM: each streams its own weight tiles
}

const char* launch_fused(const FusedCall& c, int ctas) noexcept {
  kernels::Params p{};
  p.hidden = c.hidden;
  p.ids = c.ids;
  p.weights = c.weights;
  p.out = c.out;
  p.w13 = c.w13;
  p.w2 = c.w2;
  p.inter = c.inter;
  p.parts = c.parts;
  p.tokens = c.tokens;
  p.width = c.width;
  p.experts = c.experts;
  p.hidden_dim = c.hidden_dim;
  p.inter_dim = c.inter_dim;
  p.n1 = c.n1;
  p.splits = c.splits;
  p.activation = c.activation;
  p.act.limit = c.limit;
  p.act.alpha = c.alpha;
  p.act.gelu_tanh = c.gelu_tanh;
  void* args[] = {&p};
  const cudaError_t e =
      cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernels::fused_moe), dim3(ctas),
                                  dim3(kernels::kThreads), args, kernels::kSmemBytes, c.stream);
  if (e != cudaSuccess) return cudaGetErrorString(e);
  return nullptr;
}

}  // namespace moe::mega::detail
