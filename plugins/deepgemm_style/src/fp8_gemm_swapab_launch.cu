// Launcher of deepgemm_style's own grouped fp8 GEMM with swapped operands
// (kernels/sm90_fp8_grouped_gemm_swapab.cuh): the two TMA descriptors (16-row token boxes,
// 128-row weight boxes), the shared-memory opt-in, one CTA per SM (split K: clusters of two).
#include <cuda.h>

#include "../kernels/sm90_fp8_grouped_gemm_swapab.cuh"
#include "fp8_gemm_launch.hpp"
#include "fp8_gemm_params.cuh"
#include "kernels/persistent_launch.cuh"
#include "moe_cuda/smem_opt_in.hpp"
#include "moe_cuda/tensor_map.hpp"

namespace moe::deepgemm::detail {
namespace {

template <class Out, bool kSplit>
LaunchResult launch_typed(const GemmCall& c) noexcept {
  namespace k = kernels::swapab;
  constexpr size_t kSmem = k::Geometry<kSplit>::kSmemBytes;
  auto* kernel = k::grouped_gemm<Out, kSplit>;
  const cudaError_t opt_in = gpu::opt_in_dynamic_smem(kernel, int(kSmem));
  if (opt_in != cudaSuccess) return {"shared memory opt-in", cudaGetErrorString(opt_in)};
  kernels::ffma::Params p;
  if (!gpu::encode_tensor_map_2d(&p.rows_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, c.rows, c.scale_ld,
                                 c.k, 1, k::kTokens, k::kBlockK) ||
      !gpu::encode_tensor_map_2d(&p.weights_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, c.weight_stack,
                                 int64_t(c.groups) * c.n, c.k, 1, k::kBlockN, k::kBlockK))
    return {"tensor map", "cuTensorMapEncodeTiled failed (or the driver lacks it)"};
  set_operands(p, c);
  p.early_weights = c.groups_settled ? 1 : 0;
  if (cudaError_t e = gpu::kernels::launch_persistent_clusters<k::grouped_gemm<Out, kSplit>>(
          p, kSplit ? 2 : 1, k::kThreads, kSmem, c.sm_count, INT64_MAX, c.stream);
      e != cudaSuccess)
    return {"launch", cudaGetErrorString(e)};
  return {};
}

}  // namespace

LaunchResult launch_swapab(const GemmCall& c) noexcept {
  if (c.fused != nullptr || c.timeline.records != nullptr)
    return {"setup", "the swapped-operand kernel fuses no epilogue and keeps no timeline"};
  if (c.split_k) {  // a CTA pair a tile, a half of K each
    if (c.k < 2 * kernels::swapab::kBlockK) return {"setup", "split K needs K of 2 blocks or more"};
    return c.f32_out ? launch_typed<float, true>(c) : launch_typed<__nv_bfloat16, true>(c);
  }
  return c.f32_out ? launch_typed<float, false>(c) : launch_typed<__nv_bfloat16, false>(c);
}

}  // namespace moe::deepgemm::detail
