// Grouped bf16 GEMMs over permuted token segments on CUTLASS 3 / sm90 (TMA loads,
// warp-specialised wgmma, persistent group tile scheduler). One GEMM per group g:
//   D_g[M_g, N] = A_g[M_g, K] * W_g[N, K]^T
// where A_g is rows [offset_g, offset_g+1) of the permuted activations [R, K], W_g the group's
// weights [N, K] (K contiguous) and D_g the same rows of the output [R, N]. M_g comes from the
// device-side offsets: nothing is read back to the host.
//
// Kernel shapes:
//   TokenTiles   M = tokens (128-row tiles), N = features: prefill, many tokens per expert.
//   WideTiles    the same with 256-wide N tiles: experts with >= ~1024 rows.
//   WeightTiles  "swap AB": M = features, N = tokens (32-wide tiles), so the weight rows fill
//                the 64-row wgmma M operand when an expert sees few tokens (decode).
#pragma once

#include <cuda_runtime.h>

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

constexpr int kTmaAlign = 8;  // 16 bytes of bf16: TMA's alignment for every stride

// D = A * B^T stored as bf16 through CUTLASS's TMA epilogue.
template <class TileShape, class ClusterShape, class EpilogueSchedule, class LayoutD>
using StoreEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kTmaAlign, Bf16,
    LayoutD*, kTmaAlign, EpilogueSchedule,
    cutlass::epilogue::fusion::LinearCombination<Bf16, float, void>>::CollectiveOp;

// act(A * B^T) stored as bf16 from registers (sm90_activation_epilogue.cuh).
template <class TileShape, bool kSwapAB>
using FusedEpilogue = StagedEpilogueAdapter<ActivationEpilogue<TileShape, kSwapAB>>;

template <class TileShape, class ClusterShape, class MainloopSchedule, class Epilogue_,
          class LayoutA, class LayoutB>
struct GroupedGemm {
  using Epilogue = Epilogue_;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf16, LayoutA*, kTmaAlign, Bf16,
      LayoutB*, kTmaAlign, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
};

using TokenTileShape = Shape<_128, _128, _64>;
using WideTileShape = Shape<_128, _256, _64>;
using WeightTileShape = Shape<_128, _32, _64>;
using Cluster = Shape<_1, _1, _1>;
using Cooperative = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
using TmaStore = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
using RowMajor = cutlass::layout::RowMajor;
using ColumnMajor = cutlass::layout::ColumnMajor;

// Plain D (GEMM2, and GEMM1 when the activation runs as its own kernel).
using TokenTiles =
    GroupedGemm<TokenTileShape, Cluster, Cooperative,
                StoreEpilogue<TokenTileShape, Cluster, TmaStore, RowMajor>, RowMajor, ColumnMajor>;
// 128x256 token tiles for large groups (mixtral-sized experts at T >= 4096): half the A reloads
// per output of the 128x128 tiles.
using WideTiles =
    GroupedGemm<WideTileShape, Cluster, Cooperative,
                StoreEpilogue<WideTileShape, Cluster, TmaStore, RowMajor>, RowMajor, ColumnMajor>;
using WeightTiles = GroupedGemm<WeightTileShape, Cluster, Cooperative,
                                StoreEpilogue<WeightTileShape, Cluster, TmaStore, ColumnMajor>,
                                RowMajor, ColumnMajor>;

// GEMM1 with the activation in the epilogue. (Ping-pong token tiles, which would overlap one
// warpgroup's epilogue with the other's wgmma, measured 1.3-1.8x slower: bench/NOTES.md.)
using TokenTilesAct = GroupedGemm<TokenTileShape, Cluster, Cooperative,
                                  FusedEpilogue<TokenTileShape, false>, RowMajor, ColumnMajor>;
using WeightTilesAct = GroupedGemm<WeightTileShape, Cluster, Cooperative,
                                   FusedEpilogue<WeightTileShape, true>, RowMajor, ColumnMajor>;

// Per-group arguments, written on the device by setup_groups (one thread per group).
template <class G>
struct GroupArrays {
  typename ProblemShape::UnderlyingProblemShape* shapes;  // [groups]
  const Bf16** a;                                         // [groups]
  const Bf16** b;                                         // [groups]
  Bf16** d;                                               // [groups]
  typename G::StrideA* stride_a;                          // [groups]
  typename G::StrideB* stride_b;                          // [groups]
  typename G::StrideD* stride_d;                          // [groups]
};

// Fills the group arrays from the permutation's offsets. `weights[g]` is group g's [N, K]; the
// output rows are out_ld elements apart (N, or I when the activation halves a gated row).
template <class G, bool kSwapAB>
__global__ void setup_groups(int groups, const int64_t* offsets /* [groups + 1] */, int n, int k,
                             const Bf16* rows /* [R, K] */, const Bf16* const* weights,
                             Bf16* out /* [R, out_ld] */, int64_t out_ld, GroupArrays<G> arrays) {
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  const int64_t begin = offsets[g];
  const int m = static_cast<int>(offsets[g + 1] - begin);
  const Bf16* tokens = rows + begin * k;
  Bf16* d = out + begin * out_ld;
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
}

}  // namespace moe::trtllm::kernels
