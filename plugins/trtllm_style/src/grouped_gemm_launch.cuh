// The launchers of kernels/sm90_grouped_gemm.cuh for one operand type, included by
// grouped_gemm_launch_bf16.cu and grouped_gemm_launch_fp8.cu (one instantiation each). Errors
// come back as strings; grouped_gemm.cpp reports them.
#pragma once

#include "../kernels/sm90_grouped_gemm.cuh"
#include "grouped_gemm_launch.hpp"
#include "kernels/cutlass_run.cuh"  // common_cuda's
#include "moe_cuda/workspace.hpp"

namespace moe::trtllm::detail {

template <class Element>
struct Launchers {
  using K = kernels::Kernels<Element>;
  template <class G>
  using Arrays = kernels::GroupArrays<G>;

  // Carves the group arrays out of `ws` (null: only counts the bytes); returns the bytes used.
  template <class G>
  static size_t carve(int groups, uint8_t* ws, Arrays<G>* out) {
    const size_t g = size_t(groups);
    gpu::WorkspaceCarver c(ws);
    Arrays<G> a{};
    a.shapes = c.take<typename kernels::ProblemShape::UnderlyingProblemShape>(g);
    a.a = c.take<const Element*>(g);
    a.b = c.take<const Element*>(g);
    a.d = c.take<typename G::ElementOut*>(g);
    a.stride_a = c.take<typename G::StrideA>(g);
    a.stride_b = c.take<typename G::StrideB>(g);
    a.stride_d = c.take<typename G::StrideD>(g);
    a.alpha = c.take<float>(g);
    if (out) *out = a;
    return c.used();
  }

  // The epilogue's arguments: the TMA store's (pointers and strides of D, alpha per group), or
  // the activation's (alpha per group as its group_scale).
  template <class G>
  static typename G::Epilogue::Arguments epilogue_arguments(const Arrays<G>& a,
                                                            kernels::FusedActivation act,
                                                            bool scaled) {
    if constexpr (requires(typename G::Epilogue::Arguments e) { e.fused; }) {
      act.group_scale = scaled ? a.alpha : nullptr;
      return {act, a.d, a.stride_d};
    } else {
      typename G::Epilogue::Arguments e{{}, nullptr, a.stride_d, a.d, a.stride_d};
      e.thread.alpha = 1.0f;
      e.thread.beta = 0.0f;
      if (scaled) {
        e.thread.alpha_ptr = a.alpha;
        e.thread.dAlpha = {cute::_0{}, cute::_0{}, 1};
      }
      return e;
    }
  }

  template <class G>
  static typename G::Gemm::Arguments arguments(int groups, const Arrays<G>& a, int sm_count,
                                               const kernels::FusedActivation& act, bool scaled) {
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    hw.sm_count = sm_count;
    return typename G::Gemm::Arguments{cutlass::gemm::GemmUniversalMode::kGrouped,
                                       {groups, a.shapes, nullptr},
                                       {a.a, a.stride_a, a.b, a.stride_b},
                                       epilogue_arguments<G>(a, act, scaled),
                                       hw};
  }

  template <class G>
  static size_t workspace_of(int groups, int sm_count) {
    const Arrays<G> none{};
    kernels::FusedActivation act{};
    act.out_ld = 1;
    return carve<G>(groups, nullptr, nullptr) +
           gpu::workspace_round_up(
               G::Gemm::get_workspace_size(arguments<G>(groups, none, sm_count, act, false)));
  }

  template <class G, bool kSwapAB>
  static LaunchResult launch_one(const GemmCall& c, const kernels::FusedActivation& act,
                                 int64_t out_ld) noexcept {
    auto* ws = static_cast<uint8_t*>(c.workspace);
    Arrays<G> a;
    const size_t arrays_bytes = carve<G>(c.groups, ws, &a);
    const kernels::GroupScales scales{c.scales.act, c.scales.act_shared, c.scales.weight,
                                      c.scales.shared_group};
    kernels::setup_groups<G, kSwapAB><<<(c.groups + 127) / 128, 128, 0, c.stream>>>(
        c.groups, c.offsets, c.n, c.k, static_cast<const Element*>(c.rows),
        reinterpret_cast<const Element* const*>(c.weights),
        static_cast<typename G::ElementOut*>(c.out), out_ld, scales, a);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
      return {"setup", cudaGetErrorString(e)};
    const gpu::StageError e = gpu::run_cutlass_gemm<typename G::Gemm>(
        arguments<G>(c.groups, a, c.sm_count, act, c.scales.weight != nullptr), ws + arrays_bytes,
        c.stream);
    return {e.stage, e.message};
  }

  static size_t workspace(Kernel kernel, int groups, int sm_count) {
    switch (kernel) {
      case Kernel::kTokens:
        return workspace_of<typename K::TokenTiles>(groups, sm_count);
      case Kernel::kWide:
        if constexpr (K::kHasWide) return workspace_of<typename K::WideTiles>(groups, sm_count);
        return 0;
      case Kernel::kWeights:
        return workspace_of<typename K::WeightTiles>(groups, sm_count);
      case Kernel::kTokensAct:
        return workspace_of<typename K::TokenTilesAct>(groups, sm_count);
      case Kernel::kWideAct:
        if constexpr (K::kHasWide) return workspace_of<typename K::WideTilesAct>(groups, sm_count);
        return 0;
      case Kernel::kWeightsAct:
        return workspace_of<typename K::WeightTilesAct>(groups, sm_count);
    }
    return 0;
  }

  static LaunchResult launch(Kernel kernel, const GemmCall& c,
                             const kernels::FusedActivation& act) noexcept {
    switch (kernel) {
      case Kernel::kTokens:
        return launch_one<typename K::TokenTiles, false>(c, act, c.n);
      case Kernel::kWide:
        if constexpr (K::kHasWide) return launch_one<typename K::WideTiles, false>(c, act, c.n);
        return {"dispatch", "128x256 tiles are bf16 only"};
      case Kernel::kWeights:
        return launch_one<typename K::WeightTiles, true>(c, act, c.n);
      case Kernel::kTokensAct:
        return launch_one<typename K::TokenTilesAct, false>(c, act, act.out_ld);
      case Kernel::kWideAct:
        if constexpr (K::kHasWide)
          return launch_one<typename K::WideTilesAct, false>(c, act, act.out_ld);
        return {"dispatch", "128x256 tiles are bf16 only"};
      case Kernel::kWeightsAct:
        return launch_one<typename K::WeightTilesAct, true>(c, act, act.out_ld);
    }
    return {"dispatch", "unknown kernel"};
  }
};

}  // namespace moe::trtllm::detail
