// Grouped bf16 GEMMs over permuted token segments on CUTLASS 3 / sm90 (TMA loads,
// warp-specialised wgmma, persistent group tile scheduler). One GEMM per group g:
//   D_g[M_g, N] = A_g[M_g, K] * W_g[N, K]^T
// where A_g is rows [offset_g, offset_g+1) of the permuted activations [R, K], W_g the group's
// weights [N, K] (K contiguous) and D_g the same rows of the output [R, N]. M_g comes from the
// device-side offsets: nothing is read back to the host.
//
// Two kernel shapes:
//   TokenTiles   M = tokens (128-row tiles), N = features: prefill, many tokens per expert.
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

namespace moe::trtllm::kernels {

using namespace cute;

using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;  // (M, N, K) per group
using Bf16 = cutlass::bfloat16_t;

template <class TileShape, class ClusterShape, class MainloopSchedule, class EpilogueSchedule,
          class LayoutA, class LayoutB, class LayoutD>
struct GroupedGemm {
  static constexpr int kAlign = 8;  // 16 bytes of bf16: TMA's alignment for every stride

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlign, Bf16,
      LayoutD*, kAlign, EpilogueSchedule,
      cutlass::epilogue::fusion::LinearCombination<Bf16, float, void>>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf16, LayoutA*, kAlign, Bf16, LayoutB*,
      kAlign, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
};

using TokenTiles =
    GroupedGemm<Shape<_128, _128, _64>, Shape<_1, _1, _1>,
                cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative, cutlass::layout::RowMajor,
                cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;

using WeightTiles =
    GroupedGemm<Shape<_128, _32, _64>, Shape<_1, _1, _1>,
                cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative, cutlass::layout::RowMajor,
                cutlass::layout::ColumnMajor, cutlass::layout::ColumnMajor>;

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

// Fills the group arrays from the permutation's offsets. `weights[g]` is group g's [N, K].
template <class G, bool kSwapAB>
__global__ void setup_groups(int groups, const int64_t* offsets /* [groups + 1] */, int n, int k,
                             const Bf16* rows /* [R, K] */, const Bf16* const* weights,
                             Bf16* out /* [R, N] */, GroupArrays<G> arrays) {
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  const int64_t begin = offsets[g];
  const int m = static_cast<int>(offsets[g + 1] - begin);
  const Bf16* tokens = rows + begin * k;
  Bf16* d = out + begin * n;
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
