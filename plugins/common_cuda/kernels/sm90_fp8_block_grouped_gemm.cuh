// Grouped e4m3 GEMMs with 128x128 weight block scales and 1x128 activation scales, on CUTLASS's
// sm90 blockwise-scaling mainloop: TMA loads into a multi-stage pipeline, a producer warp and two
// consumer warpgroups, wgmma e4m3 x e4m3 whose partial sums are promoted into an fp32
// accumulator once per 128-wide K block with both scales applied, a persistent scheduler over
// the groups, bf16 output. One GEMM per group g:
//   D_g[M_g, N] = (A_g[M_g, K] * sa) * (W_g[N, K] * sw)^T
// A_g: the group's activation rows, e4m3, K contiguous; sa: their scales, MN-major
// ([K/128][ld] floats, ld >= the rows of the buffer: row r of block kb at kb * ld + r).
// W_g: e4m3 [N, K], K contiguous; sw: MN-major [K/128][N/128].
//
// Rows of a group come from one of two layouts (docs/design.md §12):
//   contiguous  rows [offsets[g], offsets[g+1]) of one [R, K] buffer (prefill);
//   masked      rows [g * max_m, g * max_m + counts[g]) of an [G * max_m, K] buffer (decode).
// Either way M_g is read on the device: nothing goes back to the host.
//
// Kernel shapes:
//   TokenTiles   M = tokens (128-row tiles), N = features (128): many tokens per expert.
//   WeightTiles  swap AB: M = weight rows (128), N = tokens (32-wide tiles), so an expert with
//                few tokens fills the wgmma M operand with weights (decode).
#pragma once

#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/detail/blockwise_scale_layout.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "dependent_launch.cuh"

namespace moe::gpu::kernels::block_gemm {

using namespace cute;

using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;  // (M, N, K)
using Fp8 = cutlass::float_e4m3_t;
using Bf16 = cutlass::bfloat16_t;

constexpr int kBlockK = 128;        // scale block along K, and the K tile
constexpr int kFp8Align = 16;       // TMA: 16-byte strides, 16 e4m3 elements
constexpr int kBf16Align = 8;       // 16 bytes of bf16
constexpr int kWeightBlockN = 128;  // weight scale block along N

using RowMajor = cutlass::layout::RowMajor;
using ColumnMajor = cutlass::layout::ColumnMajor;

// CUTLASS's grouped blockwise mainloop rebuilds each group's scale layouts from its problem
// shape (packed: a group's [K/128][M_g] scales M_g apart), ignoring the per-group layouts it is
// given. This one reads them (GroupArrays::layout_sfa/sfb), so one MN-major scale matrix of the
// whole row buffer serves every group: the quantisation kernels write [K/128][R] once, whatever
// the groups turn out to be on the device.
template <class Base>
struct PerGroupScaleLayouts : Base {
  template <class ProblemShapeMNKL>
  CUTLASS_DEVICE auto load_init(ProblemShapeMNKL const& shape, typename Base::Params const& params,
                                float const* sfa = nullptr, float const* sfb = nullptr,
                                int32_t group = 0) const {
    auto [a, b, base_sfa, base_sfb] = Base::load_init(shape, params, sfa, sfb);
    return cute::make_tuple(a, b, make_tensor(make_gmem_ptr(sfa), params.layout_SFA[group]),
                            make_tensor(make_gmem_ptr(sfb), params.layout_SFB[group]));
  }

  template <class InputTensors, class ProblemShapeMNKL>
  CUTLASS_DEVICE InputTensors tensors_perform_update(InputTensors const&,
                                                     typename Base::Params const& params,
                                                     ProblemShapeMNKL shape, int32_t group) {
    return load_init(shape, params, params.ptr_SFA[group], params.ptr_SFB[group], group);
  }
};

// kGranM x kGranN: the scale granularity of A's rows and B's rows (1 = a scale per row).
// ElementD: bf16, or float where the next step quantises the output again.
template <class TileShape, class ClusterShape, int kGranM, int kGranN, class MainloopSchedule,
          class EpilogueSchedule, class LayoutD, class ElementD_>
struct BlockScaledGemm {
  using ElementD = ElementD_;
  static constexpr int kAlignD = 16 / int(sizeof(ElementD));
  using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<kGranM, kGranN, kBlockK>;
  using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
  using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlignD,
      ElementD, LayoutD*, kAlignD, EpilogueSchedule,
      cutlass::epilogue::fusion::LinearCombination<ElementD, float, void>>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Fp8, cute::tuple<RowMajor*, LayoutSFA*>,
      kFp8Align, Fp8, cute::tuple<ColumnMajor*, LayoutSFB*>, kFp8Align, float, TileShape,
      ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;

  using Kernel =
      cutlass::gemm::kernel::GemmUniversal<ProblemShape, PerGroupScaleLayouts<Mainloop>, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
};

using Cluster = Shape<_1, _1, _1>;
using Cooperative = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise;
using TmaStore = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;

using TokenTileShape = Shape<_128, _128, Int<kBlockK>>;
using WeightTileShape = Shape<_128, _32, Int<kBlockK>>;

// A = tokens (a scale per row), B = weights (a scale per 128 rows); D row-major [R, N].
template <class ElementD>
using TokenTiles = BlockScaledGemm<TokenTileShape, Cluster, 1, kWeightBlockN, Cooperative, TmaStore,
                                   RowMajor, ElementD>;
// TokenTiles in 1x2 clusters: the two CTAs take neighbouring N tiles of one row block, and the
// row tile is multicast to both (half the row tile's L2 reads).
template <class ElementD>
using PairedTokenTiles = BlockScaledGemm<TokenTileShape, Shape<_1, _2, _1>, 1, kWeightBlockN,
                                         Cooperative, TmaStore, RowMajor, ElementD>;
// A = weights, B = tokens; D^T column-major (N, m) is the same memory as row-major [m, N].
template <class ElementD>
using WeightTiles = BlockScaledGemm<WeightTileShape, Cluster, kWeightBlockN, 1, Cooperative,
                                    TmaStore, ColumnMajor, ElementD>;

// Per-group arguments, written on the device by setup_groups (one thread per group).
template <class G>
struct GroupArrays {
  typename ProblemShape::UnderlyingProblemShape* shapes;  // [groups]
  const Fp8** a;                                          // [groups]
  const Fp8** b;                                          // [groups]
  const float** sfa;                                      // [groups]
  const float** sfb;                                      // [groups]
  typename G::ElementD** d;                               // [groups]
  typename G::StrideA* stride_a;                          // [groups]
  typename G::StrideB* stride_b;                          // [groups]
  typename G::StrideD* stride_d;                          // [groups]
  typename G::LayoutSFA* layout_sfa;                      // [groups]
  typename G::LayoutSFB* layout_sfb;                      // [groups]
};

// Where group g's rows live (see the layouts above).
struct GroupRows {
  const int64_t* offsets = nullptr;      // contiguous: [groups + 1]
  const int32_t* counts = nullptr;       // masked: [groups]; non-null selects the masked layout
  int64_t max_m = 0;                     // masked: rows reserved per group
  int32_t skip_begin = 0, skip_end = 0;  // groups [begin, end) run no rows (sink experts)
};

struct GroupOperands {
  int n = 0, k = 0;
  const Fp8* rows = nullptr;               // [R, K]
  const float* row_scales = nullptr;       // [K/128][scale_ld]
  int32_t scale_ld = 0;                    // >= R
  const Fp8* const* weights = nullptr;     // [groups] -> [N, K]
  const float* const* w_scales = nullptr;  // [groups] -> [K/128][N/128]
  void* out = nullptr;                     // [R, N] ElementD
};

// Scales of `rows` tokens starting at `first` (MN-major, ld apart), as a layout with a scale per
// row: ((1, rows), (128, K/128), 1) : ((0, 1), (0, ld), 0).
template <class Layout>
__device__ Layout token_scale_layout(int rows, int k_blocks, int32_t ld) {
  return make_layout(make_shape(make_shape(_1{}, rows), make_shape(Int<kBlockK>{}, k_blocks), 1),
                     make_stride(make_stride(_0{}, _1{}), make_stride(_0{}, ld), 0));
}

template <class G, bool kSwapAB>
__global__ void setup_groups(int groups, GroupRows where, GroupOperands op, GroupArrays<G> arrays) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  const int64_t begin = where.counts ? int64_t(g) * where.max_m : where.offsets[g];
  const bool skipped = g >= where.skip_begin && g < where.skip_end;
  const int m = skipped        ? 0
                : where.counts ? min(where.counts[g], static_cast<int32_t>(where.max_m))
                               : static_cast<int>(where.offsets[g + 1] - begin);
  const int n = op.n, k = op.k, k_blocks = k / kBlockK;
  const Fp8* tokens = op.rows + begin * k;
  const float* token_scales = op.row_scales + begin;
  arrays.d[g] = static_cast<typename G::ElementD*>(op.out) + begin * n;
  if constexpr (kSwapAB) {
    // D^T[N, m] = W[N, K] * tokens[m, K]^T: weights are A (a scale per 128 rows), tokens B.
    arrays.shapes[g] = {n, m, k};
    arrays.a[g] = op.weights[g];
    arrays.b[g] = tokens;
    arrays.sfa[g] = op.w_scales[g];
    arrays.sfb[g] = token_scales;
    arrays.stride_a[g] = cutlass::make_cute_packed_stride(typename G::StrideA{}, {n, k, 1});
    arrays.stride_b[g] = cutlass::make_cute_packed_stride(typename G::StrideB{}, {m, k, 1});
    arrays.stride_d[g] = cutlass::make_cute_packed_stride(typename G::StrideD{}, {n, m, 1});
    arrays.layout_sfa[g] = G::ScaleConfig::tile_atom_to_shape_SFA(make_shape(n, m, k, 1));
    arrays.layout_sfb[g] = token_scale_layout<typename G::LayoutSFB>(m, k_blocks, op.scale_ld);
  } else {
    arrays.shapes[g] = {m, n, k};
    arrays.a[g] = tokens;
    arrays.b[g] = op.weights[g];
    arrays.sfa[g] = token_scales;
    arrays.sfb[g] = op.w_scales[g];
    arrays.stride_a[g] = cutlass::make_cute_packed_stride(typename G::StrideA{}, {m, k, 1});
    arrays.stride_b[g] = cutlass::make_cute_packed_stride(typename G::StrideB{}, {n, k, 1});
    arrays.stride_d[g] = cutlass::make_cute_packed_stride(typename G::StrideD{}, {m, n, 1});
    arrays.layout_sfa[g] = token_scale_layout<typename G::LayoutSFA>(m, k_blocks, op.scale_ld);
    arrays.layout_sfb[g] = G::ScaleConfig::tile_atom_to_shape_SFB(make_shape(m, n, k, 1));
  }
}

}  // namespace moe::gpu::kernels::block_gemm
