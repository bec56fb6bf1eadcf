// Launcher of the fused layer (kernels/fused_moe.cuh): shared-memory opt-in, residency, one
// cooperative launch on the caller's stream.
#include <cstring>

#include "../kernels/fused_moe.cuh"
#include "fused_launch.hpp"
#include "moe_cuda/tensor_map.hpp"

namespace moe::mega::detail {
namespace {

// [rows, cols] bf16, row-major, read as 64-row x 64-column boxes.
bool encode(CUtensorMap* map, const uint16_t* base, int64_t rows, int64_t cols) {
  return gpu::encode_tensor_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, base, rows, cols, 2,
                                   kernels::kBoxRows, kernels::kK);
}

}  // namespace

const char* encode_weight_maps(WeightMaps* maps, const uint16_t* w13, int64_t rows13,
                               int64_t hidden, const uint16_t* w2, int64_t rows2,
                               int64_t inter) noexcept {
  static_assert(sizeof(CUtensorMap) == sizeof(maps->w13));
  CUtensorMap a, b;
  if (!encode(&a, w13, rows13, hidden) || !encode(&b, w2, rows2, inter))
    return "cuTensorMapEncodeTiled failed (or the driver lacks it)";
  std::memcpy(maps->w13, &a, sizeof(a));
  std::memcpy(maps->w2, &b, sizeof(b));
  return nullptr;
}

KernelLimits kernel_limits() {
  using namespace kernels;
  return {kMaxSlots, kMaxExperts, kTok, kRows};
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
  std::memcpy(&p.w13_map, c.maps->w13, sizeof(p.w13_map));
  std::memcpy(&p.w2_map, c.maps->w2, sizeof(p.w2_map));
  p.hidden = c.hidden;
  p.ids = c.ids;
  p.weights = c.weights;
  p.out = c.out;
  p.w13 = c.w13;
  p.w2 = c.w2;
  p.inter = c.inter;
  p.y = c.y;
  p.tokens = c.tokens;
  p.width = c.width;
  p.experts = c.experts;
  p.hidden_dim = c.hidden_dim;
  p.inter_dim = c.inter_dim;
  p.n1 = c.n1;
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
