// Launcher of deepgemm_style's own grouped fp8 GEMM with swapped operands
// (kernels/sm90_fp8_grouped_gemm_swapab.cuh): the two TMA descriptors (16-row token boxes,
// 128-row weight boxes), the shared-memory opt-in, one CTA per SM.
#include <cuda.h>

#include "../kernels/sm90_fp8_grouped_gemm_swapab.cuh"
#include "fp8_gemm_launch.hpp"
#include "fp8_gemm_params.cuh"
#include "kernels/persistent_launch.cuh"
#include "moe_cuda/tensor_map.hpp"

namespace moe::deepgemm::detail {
namespace {

template <class Out>
LaunchResult launch_typed(const GemmCall& c) noexcept {
  namespace k = kernels::swapab;
  auto* kernel = k::grouped_gemm<Out>;
  static const cudaError_t opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(k::kSmemBytes));
  if (opt_in != cudaSuccess) return {"shared memory opt-in", cudaGetErrorString(opt_in)};
  kernels::ffma::Params p;
  if (!gpu::encode_tensor_map_2d(&p.rows_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, c.rows, c.scale_ld,
                                 c.k, 1, k::kTokens, k::kBlockK) ||
      !gpu::encode_tensor_map_2d(&p.weights_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, c.weight_stack,
                                 int64_t(c.groups) * c.n, c.k, 1, k::kBlockN, k::kBlockK))
    return {"tensor map", "cuTensorMapEncodeTiled failed (or the driver lacks it)"};
  set_operands(p, c);
  if (cudaError_t e = gpu::kernels::launch_persistent_clusters<k::grouped_gemm<Out>>(
          p, 1, k::kThreads, k::kSmemBytes, c.sm_count, INT64_MAX, c.stream);
      e != cudaSuccess)
    return {"launch", cudaGetErrorString(e)};
  return {};
}

}  // namespace

LaunchResult launch_swapab(const GemmCall& c) noexcept {
  if (c.fused != nullptr || c.split_k || c.timeline.records != nullptr)
    return {"setup",
            "the swapped-operand kernel fuses no epilogue, splits no K, keeps no timeline"};
  return c.f32_out ? launch_typed<float>(c) : launch_typed<__nv_bfloat16>(c);
}

}  // namespace moe::deepgemm::detail
