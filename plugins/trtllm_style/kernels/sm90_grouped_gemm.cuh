// Grouped GEMMs over permuted token segments on CUTLASS 3 / sm90 (TMA loads, warp-specialised
// wgmma, persistent group tile scheduler), for bf16 and for e4m3 (fp8_tensor) operands. One GEMM
// per group g:
//   D_g[M_g, N] = alpha_g * A_g[M_g, K] * W_g[N, K]^T
// where A_g is rows [offset_g, offset_g+1) of the permuted activations [R, K], W_g the group's
// weights [N, K] (K contiguous) and D_g the same rows of the bf16 output [R, N]. M_g comes from
// the device-side offsets: nothing is read back to the host. alpha_g is 1 for bf16; for e4m3 it is
// the activation scale times the group's weight scale, multiplied on the device (setup_groups)
// because a dynamic activation scale is itself computed on the device.
//
// Kernel shapes:
//   TokenTiles   M = tokens (128-row tiles), N = features: prefill, many tokens per expert.
//   WideTiles    the same with 256-wide N tiles: experts with >= ~1024 rows (bf16 only).
//   WeightTiles  "swap AB": M = features, N = tokens (32-wide tiles), so the weight rows fill
//                the 64-row wgmma M operand when an expert sees few tokens (decode).
// The K tile is 128 bytes of a row: 64 bf16 or 128 e4m3 elements.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "sm90_activation_epilogue.cuh"

namespace moe::trtllm::kernels {

using namespace cute;

using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;  // (M, N, K) per group
using Bf16 = cutlass::bfloat16_t;
using Fp8 = cutlass::float_e4m3_t;

constexpr int kOutAlign = 8;  // 16 bytes of bf16 output: TMA's alignment for every stride

// What differs between the operand types: the K tile (128 bytes of a row) and the mainloop.
// e4m3 uses CUTLASS's promoting mainloop: the tensor cores' fp8 partial sums go into a separate
// fp32 accumulator after every 128-deep K tile. Measured on the H200 (bench/NOTES.md, session 15):
// fast accumulation (never promoted) put the layer 2.1-3.7e-2 from the reference, over the 2e-2
// tolerance, because its GEMM1 noise moves intermediate codes across their rounding midpoints;
// promoted, 4.7e-3 to 9.1e-3, for 4-6% more time at T = 4096 on 128x128 tiles. The second
// accumulator is why e4m3 has no 128x256 tiles: 256 accumulator registers per thread spill
// (measured 2x slower than 128x128).
template <class Element>
struct OperandTraits;
template <>
struct OperandTraits<Bf16> {
  using TileK = _64;
  using Schedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
};
template <>
struct OperandTraits<Fp8> {
  using TileK = _128;
  using Schedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
};

// D = alpha * A * B^T stored as bf16 through CUTLASS's TMA epilogue; alpha per group from a
// device array (dAlpha steps one float per group), or 1.
template <class TileShape, class ClusterShape, class EpilogueSchedule, class LayoutD>
using StoreEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kOutAlign, Bf16,
    LayoutD*, kOutAlign, EpilogueSchedule,
    cutlass::epilogue::fusion::LinearCombination<Bf16, float, void>>::CollectiveOp;

// act(alpha * A * B^T) stored from registers (sm90_activation_epilogue.cuh), as bf16 or (Out =
// float) unrounded for the quantisation that follows it in e4m3 layers.
template <class TileShape, bool kSwapAB, class Out = Bf16>
using FusedEpilogue = StagedEpilogueAdapter<ActivationEpilogue<TileShape, kSwapAB, Out>>;

template <class Element_, class TileShape, class ClusterShape, class Epilogue_, class LayoutA,
          class LayoutB>
struct GroupedGemm {
  using Element = Element_;
  using Epilogue = Epilogue_;
  using ElementOut = typename Epilogue::ElementD;  // bf16, or float from an e4m3 GEMM1's activation
  static constexpr int kAlign = 16 / int(sizeof(Element));  // 16-byte TMA strides

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA*, kAlign, Element,
      LayoutB*, kAlign, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      typename OperandTraits<Element>::Schedule>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
};

using Cluster = Shape<_1, _1, _1>;
using TmaStore = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
using RowMajor = cutlass::layout::RowMajor;
using ColumnMajor = cutlass::layout::ColumnMajor;

// The five kernels of one operand type.
template <class Element>
struct Kernels {
  using TileK = typename OperandTraits<Element>::TileK;
  static constexpr bool kHasWide = std::is_same_v<Element, Bf16>;  // see OperandTraits
  using TokenTileShape = Shape<_128, _128, TileK>;
  using WideTileShape = Shape<_128, _256, TileK>;
  using WeightTileShape = Shape<_128, _32, TileK>;

  // Plain D (GEMM2, and GEMM1 when the activation runs as its own kernel).
  using TokenTiles = GroupedGemm<Element, TokenTileShape, Cluster,
                                 StoreEpilogue<TokenTileShape, Cluster, TmaStore, RowMajor>,
                                 RowMajor, ColumnMajor>;
  // 128x256 token tiles for large groups (mixtral-sized experts at T >= 4096): half the A
  // reloads per output of the 128x128 tiles.
  using WideTiles =
      GroupedGemm<Element, WideTileShape, Cluster,
                  StoreEpilogue<WideTileShape, Cluster, TmaStore, RowMajor>, RowMajor, ColumnMajor>;
  using WeightTiles = GroupedGemm<Element, WeightTileShape, Cluster,
                                  StoreEpilogue<WeightTileShape, Cluster, TmaStore, ColumnMajor>,
                                  RowMajor, ColumnMajor>;

  // GEMM1 with the activation in the epilogue, its output bf16 (bf16 layers) or float (e4m3
  // layers quantise it next). (Ping-pong token tiles, which would overlap one warpgroup's
  // epilogue with the other's wgmma, measured 1.3-1.8x slower: bench/NOTES.md.)
  using ActOut = std::conditional_t<std::is_same_v<Element, Fp8>, float, Bf16>;
  using TokenTilesAct =
      GroupedGemm<Element, TokenTileShape, Cluster, FusedEpilogue<TokenTileShape, false, ActOut>,
                  RowMajor, ColumnMajor>;
  // 128x256 with the activation: half the A reloads of 128x128 at large T (a 128 x 128-feature
  // staging tile of 34 KB taken from the mainloop's stages; bf16 only).
  using WideTilesAct =
      GroupedGemm<Element, WideTileShape, Cluster, FusedEpilogue<WideTileShape, false, ActOut>,
                  RowMajor, ColumnMajor>;
  using WeightTilesAct =
      GroupedGemm<Element, WeightTileShape, Cluster, FusedEpilogue<WeightTileShape, true, ActOut>,
                  RowMajor, ColumnMajor>;
};

// Where alpha_g comes from (e4m3 only; all null for bf16): alpha_g = act * weight[g], with
// act = *act_shared for the shared expert's group (its intermediate has its own scale) and
// *act for every other group.
struct GroupScales {
  const float* act = nullptr;         // device f32 [1]
  const float* act_shared = nullptr;  // device f32 [1]; null = act
  const float* weight = nullptr;      // device f32 [groups]
  int32_t shared_group = -1;          // -1: none
};

// Per-group arguments, written on the device by setup_groups (one thread per group).
template <class G>
struct GroupArrays {
  using E = typename G::Element;
  typename ProblemShape::UnderlyingProblemShape* shapes;  // [groups]
  const E** a;                                            // [groups]
  const E** b;                                            // [groups]
  typename G::ElementOut** d;                             // [groups]
  typename G::StrideA* stride_a;                          // [groups]
  typename G::StrideB* stride_b;                          // [groups]
  typename G::StrideD* stride_d;                          // [groups]
  float* alpha;                                           // [groups]
};

// Fills the group arrays from the permutation's offsets. `weights[g]` is group g's [N, K]; the
// output rows are out_ld elements apart (N, or I when the activation halves a gated row).
template <class G, bool kSwapAB>
__global__ void setup_groups(int groups, const int64_t* offsets /* [groups + 1] */, int n, int k,
                             const typename G::Element* rows /* [R, K] */,
                             const typename G::Element* const* weights,
                             typename G::ElementOut* out /* [R, out_ld] */, int64_t out_ld,
                             GroupScales scales, GroupArrays<G> arrays) {
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  const int64_t begin = offsets[g];
  const int m = static_cast<int>(offsets[g + 1] - begin);
  const auto* tokens = rows + begin * k;
  auto* d = out + begin * out_ld;
  if constexpr (kSwapAB) {
    // D^T[N, m] = W[N, K] * tokens[m, K]^T: weights are A, tokens are B (K contiguous),
    // D column-major (N, m) is the same memory as row-major [m, N].
    arrays.shapes[g] = {n, m, k};
    arrays.a[g] = weights[g];
    arrays.b[g] = tokens;
    arrays.stride_a[g] = cutlass::make_cute_packed_stride(typename G::StrideA{}, {n, k, 1});
    arrays.stride_b[g] = cutlass::make_cute_packed_stride(typename G::StrideB{}, {m, k, 1});
    arrays.stride_d[g] = cutlass::make_cute_packed_stride(typename G::StrideD{}, {n, m, 1});
  } else {
    arrays.shapes[g] = {m, n, k};
    arrays.a[g] = tokens;
    arrays.b[g] = weights[g];
    arrays.stride_a[g] = cutlass::make_cute_packed_stride(typename G::StrideA{}, {m, k, 1});
    arrays.stride_b[g] = cutlass::make_cute_packed_stride(typename G::StrideB{}, {n, k, 1});
    arrays.stride_d[g] = cutlass::make_cute_packed_stride(typename G::StrideD{}, {m, n, 1});
  }
  arrays.d[g] = d;
  if (scales.weight != nullptr) {
    const float* act =
        (g == scales.shared_group && scales.act_shared) ? scales.act_shared : scales.act;
    arrays.alpha[g] = *act * scales.weight[g];
  } else {
    arrays.alpha[g] = 1.0f;
  }
}

}  // namespace moe::trtllm::kernels
