// The launch templates of the weight-only grouped GEMM (kernels/sm90_wo_grouped_gemm.cuh),
// included by one translation unit per weight format (wo_gemm_launch_<format>.cu) so the four
// compile in parallel: the token rows' TMA descriptor, the shared-memory opt-in, one CTA per SM
// (fewer when there are fewer tiles), the kernel instance for a token width.
#pragma once

#include <cuda.h>

#include <algorithm>

#include "kernels/persistent_launch.cuh"
#include "kernels/sm90_wo_grouped_gemm.cuh"
#include "moe_cuda/smem_opt_in.hpp"
#include "moe_cuda/tensor_map.hpp"
#include "wo_gemm_launch.hpp"

// Internal linkage, as each format's translation unit instantiates only its own.
namespace moe::gpu::detail::wo_launch {
namespace {

template <int kW, int N, int kCluster, int kMB = 1>
WoLaunchResult launch_typed(const moe_problem& prob, const WoGemmArgs& a,
                            cudaStream_t stream) noexcept {
  using namespace kernels::wo;
  using G = Geometry<kW, N, kMB>;
  auto* kernel = grouped_gemm<kW, N, kCluster, kMB>;
  const cudaError_t opt_in = opt_in_dynamic_smem(kernel, int(G::kSmemBytes));
  if (opt_in != cudaSuccess) return {"shared memory opt-in", cudaGetErrorString(opt_in)};
  Params p;
  // Token rows and weight tiles in boxes of 128 bytes of K: 64 bf16 or 128 e4m3 elements.
  constexpr bool kE4 = kW == kE4m3;
  constexpr auto kDtype = kE4 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  constexpr int kElem = kE4 ? 1 : 2, kBoxK = 128 / kElem;
  // Each CTA of a cluster loads N / kCluster of the tile's token rows.
  if (!encode_tensor_map_2d(&p.rows_map, kDtype, a.rows, a.max_rows, a.k, kElem, N / kCluster,
                            kBoxK))
    return {"tensor map", "cuTensorMapEncodeTiled failed (or the driver lacks it)"};
  // Narrow last blocks: the same rows in 16-row boxes (bf16 on 128-row CTA tiles).
  p.narrow = kNarrowable<kW, N, kCluster, kMB> && a.narrow_last_blocks;
  if (p.narrow && !encode_tensor_map_2d(&p.rows_map_narrow, kDtype, a.rows, a.max_rows, a.k, kElem,
                                        kNarrowBoxRows, kBoxK))
    return {"tensor map", "cuTensorMapEncodeTiled failed for the narrow token boxes"};
  // bf16, e4m3: the weight rows of every tile, one box of a tile's 128 rows a stage; TensorRT-
  // LLM's interleaved w13 read as pairs, up rows first (Params::weights_map).
  if (kSmemA<kW> && !encode_wo_weights_map(&p.weights_map, a))
    return {"tensor map", "cuTensorMapEncodeTiled failed for the weight rows"};
  const WoWeightView view = wo_weight_view(a);
  p.weight_group_rows = int32_t(view.group_rows);
  p.up_first = view.up_first;
  p.bias_col_stride = view.up_first ? 2 : 1;
  p.gate_offset = view.up_first ? 1 : 0;
  p.chunks = a.chunks;
  p.chunk_bytes = kSmemA<kW> ? 0 : int32_t(wo_chunk_bytes(a.weights));
  p.groups = a.groups;
  p.n_tiles = a.n_tiles;
  p.k_stages = a.k_stages * (128 / kStageK<kW>);  // the host counts 128-K chunks
  p.offsets = a.offsets;
  p.skip_begin = a.skip_begin;
  p.skip_end = a.skip_end;
  p.scale_2 = a.scale_2;
  p.act_scale = a.act_scale;
  p.act_scale_shared = a.act_scale_shared;
  p.shared_group = a.shared_group;
  // mxfp8's products are exact as they are, bf16's and e4m3's are the weights themselves.
  p.unfold = kW == kMxfp8 || kSmemA<kW> ? 1.0f : float(1 << kFp4Unfold);
  p.bias = a.bias;
  p.bias_groups = a.bias_groups;
  p.bias_ld = a.bias_ld;
  p.up_offset = int32_t(a.up_offset);
  p.epilogue = a.epilogue == WoEpilogue::kGated ? kGated : kPlain;
  p.plain_relu2 = a.epilogue == WoEpilogue::kPlainRelu2;
  p.activation = int32_t(prob.activation);
  p.act = {};
  p.act.activation = int32_t(prob.activation);
  p.act.gelu_tanh = prob.gelu_tanh;
  p.act.alpha = prob.activation_alpha;
  p.act.limit = prob.activation_limit;
  p.out = a.out;
  p.out_f32 = a.out_f32;
  p.out_amax = a.out_amax;
  p.out_e4m3 = a.out_e4m3;
  p.out_e4m3_scale = a.out_e4m3_scale;
  p.out_ld = a.out_ld;
  p.out_cols = int32_t(a.out_cols);

  // At most one cluster per unit of work: groups + rows / N token blocks, each n_tiles /
  // (kCluster kMB) units.
  const int64_t units = (a.max_rows / N + a.groups) * int64_t(a.n_tiles / (kCluster * kMB));
  if (cudaError_t e = kernels::launch_persistent_clusters<grouped_gemm<kW, N, kCluster, kMB>>(
          p, kCluster, kThreads, G::kSmemBytes, a.sm_count, units, stream);
      e != cudaSuccess)
    return {"launch", cudaGetErrorString(e)};
  return {};
}

// Token tiles pair their CTAs as wo_pairs_ctas says (wo_narrow_width follows the same rule).
template <int kW>
WoLaunchResult launch_width(const moe_problem& prob, const WoGemmArgs& a, int n,
                            cudaStream_t stream) noexcept {
  const bool pairs = wo_pairs_ctas(n, a.n_tiles);  // (16 and 32 below never read it)
  // bf16 tall tiles (two prepared weight tiles a CTA tile), in pairs where they come in pairs.
  if constexpr (kW == kernels::wo::kBf16) {
    if (wo_tall_tiles(a, n)) {
      const bool tall_pairs = a.n_tiles % 4 == 0;
      if (n == 64)
        return tall_pairs ? launch_typed<kW, 64, 2, 2>(prob, a, stream)
                          : launch_typed<kW, 64, 1, 2>(prob, a, stream);
      return tall_pairs ? launch_typed<kW, 128, 2, 2>(prob, a, stream)
                        : launch_typed<kW, 128, 1, 2>(prob, a, stream);
    }
  }
  switch (n) {
    case 16:
      return launch_typed<kW, 16, 1>(prob, a, stream);
    case 32:
      return launch_typed<kW, 32, 1>(prob, a, stream);
    case 192:
      return pairs ? launch_typed<kW, 192, 2>(prob, a, stream)
                   : launch_typed<kW, 192, 1>(prob, a, stream);
    case 256:
      if constexpr (kW == kernels::wo::kBf16)
        return pairs ? launch_typed<kW, 256, 2>(prob, a, stream)
                     : launch_typed<kW, 256, 1>(prob, a, stream);
      else
        return {"launch", "256 tokens a tile are for bf16 weights only"};
    case 64:
      return pairs ? launch_typed<kW, 64, 2>(prob, a, stream)
                   : launch_typed<kW, 64, 1>(prob, a, stream);
    case 96:
      return pairs ? launch_typed<kW, 96, 2>(prob, a, stream)
                   : launch_typed<kW, 96, 1>(prob, a, stream);
    default:
      return pairs ? launch_typed<kW, 128, 2>(prob, a, stream)
                   : launch_typed<kW, 128, 1>(prob, a, stream);
  }
}

}  // namespace
}  // namespace moe::gpu::detail::wo_launch
