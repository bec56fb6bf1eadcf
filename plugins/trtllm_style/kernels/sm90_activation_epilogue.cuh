// GEMM1's epilogue with the activation of docs/design.md §5 fused in: the fp32 accumulators of a
// tile, times the group's scale when there is one (e4m3 operands), become
// act(gate + b_gate, up + b_up), rounded once to bf16 and stored to the [rows, I]
// intermediate. The GEMM1 output (2I wide) never reaches memory.
//
// The weights are TensorRT-LLM's w31 + gated interleave (column 2i = up_i, 2i+1 = gate_i), so a
// feature's up and gate are neighbours along GEMM1's feature axis. Where they land in wgmma's
// accumulator fragment (m64nNk16, fp32: thread t of a warp holds rows t/4 and t/4 + 8 of its
// 16-row slab, columns 2(t%4) + {0, 1} of every 8-column block):
//   token tiles (M = tokens, N = features): columns 2i and 2i+1 are the two halves of one
//     register pair of the same thread (the fragment's innermost mode, size 2);
//   weight tiles ("swap AB", M = features, N = tokens): rows 2i and 2i+1 belong to lanes l and
//     l ^ 4 at the same register index, so one shfl_xor(4) brings the partner's value over; the
//     even-row lane finishes the pair's first token, the odd-row lane the second.
// relu2 (not gated) is elementwise: every accumulator is one output, stored straight from
// registers.
//
// Gated outputs are staged through shared memory, token-major like the output, and leave in
// 16-byte row-contiguous stores: a first version stored each bf16 from registers (a warp's store
// touched 8 rows, 8 bytes each) and made GEMM1 slower at T >= 512 than GEMM1 plus a separate
// activation kernel (bench/NOTES.md).
//
// The class has the interface of CUTLASS's operator-style epilogues (DefaultEpilogueArray) and is
// used through Sm90TmaWarpSpecializedAdapter, as the PtrArrayNoSmemWarpSpecialized schedule does:
// no TMA store; its shared memory is the staging tile only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/cutlass.h"
#include "cutlass/detail/layout.hpp"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "fused_activation.hpp"
#include "kernels/activation.cuh"

namespace moe::trtllm::kernels {

// TileShape: the CTA tile (M, N, K); kSwapAB: M is features, N tokens; Out: the output element,
// bf16 (stored as its bits) or float (e4m3 layers: the intermediate is quantised next, from
// unrounded values as the reference does).
template <class TileShape, bool kSwapAB, class Out = cutlass::bfloat16_t>
class ActivationEpilogue {
  static constexpr bool kF32 = std::is_same_v<Out, float>;
  using Bits = std::conditional_t<kF32, float, uint16_t>;  // what the tile and the stores hold
 public:
  using EpilogueSchedule = cutlass::epilogue::PtrArrayNoSmemWarpSpecialized;
  using DispatchPolicy = EpilogueSchedule;
  using ThreadEpilogueOp = void;  // the device adapter names it; the op is operator() below
  using ElementAccumulator = float;
  using ElementCompute = float;
  using ElementScalar = float;
  using ElementOutput = Out;
  using ElementC = void;  // no source
  using ElementD = Out;
  using InternalStrideD = cutlass::detail::TagToStrideC_t<cutlass::layout::RowMajor>;
  using StrideD = InternalStrideD*;
  using InternalStrideC = InternalStrideD;
  using StrideC = StrideD;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;

  // The staging tile: a CTA tile's gated outputs, [tokens][features], rows padded by 16 bytes so
  // the 8 rows one warp store touches fall in different banks and rows stay 16-byte aligned.
  static constexpr int kTileTokens = cute::size < kSwapAB ? 1 : 0 > (TileShape{});
  static constexpr int kTileFeatures = cute::size < kSwapAB ? 0 : 1 > (TileShape{}) / 2;
  static constexpr int kPerChunk = 16 / int(sizeof(Bits));  // elements per 16-byte chunk
  static constexpr int kRowStride = kTileFeatures + kPerChunk;
  static constexpr int kChunksPerRow = kTileFeatures / kPerChunk;
  static_assert(kTileFeatures % kPerChunk == 0, "tile features must fill 16-byte chunks");

  struct SharedStorage {
    alignas(16) Bits tile[kTileTokens * kRowStride];
  };
  using TensorMapStorage = SharedStorage;

  struct Arguments {
    FusedActivation fused{};
    ElementD** ptr_D = nullptr;  // [groups]: group g's first output row
    StrideD dD = nullptr;        // unused (rows are out_ld apart); kept for the kernel's checks
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args,
                                                  void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&, int) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*,
                                              cudaStream_t, cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.ptr_D != nullptr && args.fused.out_ld > 0 && args.fused.out_ld % kPerChunk == 0;
  }

  CUTLASS_HOST_DEVICE explicit ActivationEpilogue(Params const& params) : params_(params) {}

  CUTLASS_DEVICE bool is_source_needed() { return false; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine,
            class FrgLayout, class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_mnk,
                                 BlockCoordMNKL blk_coord_mnkl,
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc, TiledMma tiled_mma,
                                 ResidueMNK, int thread_idx, char* smem) {
    using namespace cute;
    static_assert(is_static<FrgLayout>::value, "accumulator layout must be static");
    // The innermost fragment mode is wgmma's column pair; the shuffle partner is 4 lanes away.
    static_assert(size<0, 0>(FrgLayout{}) == 2, "expected wgmma's fp32 accumulator fragment");

    const int m_size = get<0>(problem_shape_mnkl);
    const int n_size = get<1>(problem_shape_mnkl);
    const auto [m_coord, n_coord, k_coord, l_coord] = blk_coord_mnkl;
    const int group = int(l_coord);
    const FusedActivation& f = params_.fused;

    Tensor c_mn = make_identity_tensor(make_shape(m_size, n_size));
    Tensor c_tile = local_tile(c_mn, take<0, 2>(blk_shape_mnk), make_coord(m_coord, n_coord));
    Tensor coords = tiled_mma.get_thread_slice(thread_idx).partition_C(c_tile);
    static_assert(decltype(size(coords))::value == decltype(size(acc))::value);

    Bits* out = reinterpret_cast<Bits*>(params_.ptr_D[group]);
    // The stored form of an fp32 result: rounded once to bf16, or kept.
    auto store_form = [](float v) -> Bits {
      if constexpr (kF32)
        return v;
      else
        return moe::gpu::kernels::float_to_bf16(v);
    };
    const float* bias = (f.bias != nullptr && group < f.bias_groups)
                            ? f.bias + int64_t(group) * f.bias_stride
                            : nullptr;
    const float scale = f.group_scale != nullptr ? f.group_scale[group] : 1.0f;
    const int32_t act = (group >= f.silu_begin && group < f.silu_end)
                            ? int32_t(moe::gpu::kernels::kSiluMul)
                            : f.act.activation;
    using moe::gpu::kernels::activate;

    if (!f.gated) {  // relu2: one output per accumulator
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(acc); ++i) {
        const int m = get<0>(coords(i)), n = get<1>(coords(i));
        if (m >= m_size || n >= n_size) continue;
        const int feature = kSwapAB ? m : n, token = kSwapAB ? n : m;
        const float x = acc(i) * scale + (bias ? bias[feature] : 0.0f);
        out[int64_t(token) * f.out_ld + feature] = store_form(activate<true>(f.act, act, x, 0.f));
      }
      return;
    }

    // 1. Activate each (up, gate) pair into the staging tile (tile-local token, feature).
    const int m0 = int(m_coord) * int(size<0>(blk_shape_mnk));
    const int n0 = int(n_coord) * int(size<1>(blk_shape_mnk));
    Bits* tile = reinterpret_cast<SharedStorage*>(smem)->tile;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc); i += 2) {  // i, i + 1: the two columns of one pair
      const float v0 = acc(i) * scale, v1 = acc(i + 1) * scale;
      const int m = get<0>(coords(i)), n = get<1>(coords(i));
      float up, gate;
      int feature, token;  // in the tile
      if constexpr (kSwapAB) {
        const float p0 = __shfl_xor_sync(0xffffffffu, v0, 4);
        const float p1 = __shfl_xor_sync(0xffffffffu, v1, 4);
        const bool even_row = (m & 1) == 0;  // up row; the partner holds gate
        up = even_row ? v0 : p1;
        gate = even_row ? p0 : v1;
        feature = (m - m0) >> 1;
        token = (n - n0) + (even_row ? 0 : 1);
      } else {
        up = v0;  // column n = 2i (even), n + 1 = 2i + 1
        gate = v1;
        feature = (n - n0) >> 1;
        token = m - m0;
      }
      if (bias != nullptr) {  // rows past the problem read no bias: they are never stored
        const int global_feature = ((kSwapAB ? m0 : n0) >> 1) + feature;
        if (2 * global_feature + 1 < (kSwapAB ? m_size : n_size)) {
          up += bias[2 * global_feature];
          gate += bias[2 * global_feature + 1];
        }
      }
      tile[token * kRowStride + feature] = store_form(activate<true>(f.act, act, gate, up));
    }
    // The math threads on this tile: both warpgroups of the cooperative kernel. Every one of
    // them reaches both barriers: the grouped-GEMM scheduler never splits a tile's K (no
    // stream-K, so compute_epilogue is always true and both warpgroups are always valid).
    const uint32_t threads = uint32_t(size(tiled_mma));
    cutlass::arch::NamedBarrier::sync(threads, 0);

    // 2. Row-contiguous 16-byte stores of the tokens and features inside the problem.
    const int tokens = (kSwapAB ? n_size - n0 : m_size - m0);
    const int features = ((kSwapAB ? m_size - m0 : n_size - n0)) >> 1;
    const int64_t token0 = kSwapAB ? n0 : m0;
    const int64_t feature0 = (kSwapAB ? m0 : n0) >> 1;
    for (int c = thread_idx; c < kTileTokens * kChunksPerRow; c += int(threads)) {
      const int t = c / kChunksPerRow, x = (c % kChunksPerRow) * kPerChunk;
      if (t >= tokens || x >= features) continue;
      const uint4 v = *reinterpret_cast<const uint4*>(tile + t * kRowStride + x);
      *reinterpret_cast<uint4*>(out + (token0 + t) * f.out_ld + feature0 + x) = v;
    }
    cutlass::arch::NamedBarrier::sync(threads, 0);  // the tile is free for the next work tile
  }

 private:
  Params params_;
};

// Sm90TmaWarpSpecializedAdapter, except that the kernel's tensor-map storage (which the adapter
// types as the epilogue's SharedStorage, unused) is empty: otherwise the staging tile would be
// reserved twice and the mainloop would lose a stage to it.
template <class Op>
class StagedEpilogueAdapter
    : public cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<Op> {
  using Base = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<Op>;

 public:
  struct TensorMapStorage {};

  CUTLASS_HOST_DEVICE StagedEpilogueAdapter(typename Op::Params const& params,
                                            typename Base::TensorStorage& tensors)
      : Base(params, tensors) {}

  CUTLASS_DEVICE auto load_init(typename Op::Params const&, TensorMapStorage&, int32_t, int32_t) {
    return cute::make_tuple(nullptr);
  }
  CUTLASS_DEVICE auto store_init(typename Op::Params const&, TensorMapStorage&, int32_t, int32_t,
                                 int32_t) {
    return cute::make_tuple(nullptr);
  }
  template <bool IsLoad, class ProblemShapeMNKL>
  CUTLASS_DEVICE void tensormaps_perform_update(TensorMapStorage&, typename Op::Params const&,
                                                cute::TmaDescriptor const*, ProblemShapeMNKL,
                                                int32_t, int32_t) {}
  template <bool IsLoad>
  CUTLASS_DEVICE void tensormaps_cp_fence_release(TensorMapStorage&, cute::TmaDescriptor const*,
                                                  int32_t) {}
};

}  // namespace moe::trtllm::kernels
