// Launcher of deepgemm_style's own grouped fp8 GEMM (kernels/sm90_fp8_grouped_gemm_ffma.cuh):
// the two TMA descriptors, the shared-memory opt-in, one CTA per SM; 128- or 192-row tiles, K
// split over a CTA pair where asked, and GEMM1 with its activation and quantisation fused
// (uint8_t out).
#include <cuda.h>

#include <algorithm>
#include <type_traits>

#include "../kernels/sm90_fp8_grouped_gemm_ffma.cuh"
#include "fp8_gemm_launch.hpp"
#include "fp8_gemm_params.cuh"
#include "kernels/persistent_launch.cuh"
#include "moe_cuda/smem_opt_in.hpp"
#include "moe_cuda/tensor_map.hpp"

namespace moe::deepgemm::detail {
namespace {

// [rows, k] e4m3, K contiguous, loaded as box_rows x 128 boxes.
bool encode(CUtensorMap* map, const void* base, int64_t rows, int k, int box_rows) {
  return gpu::encode_tensor_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, base, rows, k, 1, box_rows,
                                   128);
}

template <class Out, int kCluster, int kWgs, int kAct = 0, bool kSplit = false>
LaunchResult launch_typed(const GemmCall& c) noexcept {
  using namespace kernels::ffma;
  using T = Tile<kWgs, kSplit>;
  auto* kernel = grouped_gemm<Out, kCluster, kWgs, kAct, kSplit>;
  const cudaError_t opt_in = gpu::opt_in_dynamic_smem(kernel, int(T::kSmemBytes));
  if (opt_in != cudaSuccess) return {"shared memory opt-in", cudaGetErrorString(opt_in)};
  Params p;
  constexpr bool kFused = std::is_same_v<Out, uint8_t>;  // 64 gate rows + 64 up rows a tile
  if (!encode(&p.rows_map, c.rows, c.scale_ld, c.k, kWgRows) ||
      !encode(&p.weights_map, c.weight_stack, int64_t(c.groups) * c.n, c.k,
              kFused ? kBlockN / 2 : kBlockN))
    return {"tensor map", "cuTensorMapEncodeTiled failed (or the driver lacks it)"};
  set_operands(p, c);
  static_assert(kernels::ffma::kTimelineWords == Fp8Timeline::kWords, "timeline record");
  p.timeline = c.timeline.records;
  p.timeline_tiles = c.timeline.tiles;
  if constexpr (kFused) {
    const Fp8FusedGemm1& f = *c.fused;
    p.code_scales = f.scales;
    p.code_scale_ld = f.scale_ld;
    p.bias = f.bias;
    p.bias_groups = f.bias_groups;
    p.bias_ld = f.bias_ld;
    p.act.alpha = f.alpha;
    p.act.limit = f.limit;
    p.act.gelu_tanh = f.gelu_tanh;
  }

  if (cudaError_t e =
          gpu::kernels::launch_persistent_clusters<grouped_gemm<Out, kCluster, kWgs, kAct, kSplit>>(
              p, kCluster, T::kThreads, T::kSmemBytes, c.sm_count, INT64_MAX, c.stream);
      e != cudaSuccess)
    return {"launch", cudaGetErrorString(e)};
  return {};
}

}  // namespace

int ffma_max_groups() {
  return kernels::ffma::kMaxGroups;
}

// A fused GEMM1's instance: one per gated activation (fp8_gemm.cpp admits these four; the
// kernels' kinds are moe_activation's values).
template <int kWgs>
LaunchResult launch_fused(const GemmCall& c) noexcept {
  namespace k = gpu::kernels;
  switch (c.fused->activation) {
    case k::kSiluMul:
      return launch_typed<uint8_t, 2, kWgs, k::kSiluMul>(c);
    case k::kSiluMulClamp:
      return launch_typed<uint8_t, 2, kWgs, k::kSiluMulClamp>(c);
    case k::kSwigluOai:
      return launch_typed<uint8_t, 2, kWgs, k::kSwigluOai>(c);
    case k::kGeluMul:
      return launch_typed<uint8_t, 2, kWgs, k::kGeluMul>(c);
    default:
      return {"setup", "a fused GEMM1 takes silu_mul, silu_mul_clamp, swiglu_oai or gelu_mul"};
  }
}

template <int kWgs>
LaunchResult launch_rows(const GemmCall& c) noexcept {
  // Fused GEMM1: the pair's two tiles are one 128-channel scale block (N / 128 is even).
  if (c.fused != nullptr)
    return (c.n / kernels::ffma::kBlockN) % 2 == 0
               ? launch_fused<kWgs>(c)
               : LaunchResult{"setup", "a fused GEMM1 needs an even number of 128-row tiles"};
  // Pairs of N tiles share the row tile when N holds an even number of them.
  if ((c.n / kernels::ffma::kBlockN) % 2 == 0)
    return c.f32_out ? launch_typed<float, 2, kWgs>(c) : launch_typed<__nv_bfloat16, 2, kWgs>(c);
  return c.f32_out ? launch_typed<float, 1, kWgs>(c) : launch_typed<__nv_bfloat16, 1, kWgs>(c);
}

LaunchResult launch_ffma(const GemmCall& c) noexcept {
  if (c.split_k) {  // a CTA pair a tile, a half of K each
    if (c.block_m != 128 || c.fused != nullptr || c.k < 2 * kernels::ffma::kBlockK)
      return {"setup", "split K takes 128-row tiles, no fused epilogue and K of 2 blocks or more"};
    return c.f32_out ? launch_typed<float, 2, 2, 0, true>(c)
                     : launch_typed<__nv_bfloat16, 2, 2, 0, true>(c);
  }
  if (c.block_m == 192) return launch_rows<3>(c);
  if (c.block_m == 128) return launch_rows<2>(c);
  return {"setup", "the own kernel's row tile is 128 or 192 rows"};
}

}  // namespace moe::deepgemm::detail
