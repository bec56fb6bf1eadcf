// Instantiations of the grouped GEMM kernels and their launchers (see
// kernels/sm90_bf16_grouped_gemm.cuh). Errors come back as strings; grouped_gemm.cpp reports them.
#include "../kernels/sm90_bf16_grouped_gemm.cuh"
#include "grouped_gemm_launch.hpp"
#include "moe_cuda/workspace.hpp"

namespace moe::trtllm::detail {
namespace {

using namespace kernels;

// Carves the group arrays out of `ws` (null: only counts the bytes); returns the bytes used.
template <class G>
size_t carve(int groups, uint8_t* ws, GroupArrays<G>* out) {
  const size_t g = size_t(groups);
  gpu::WorkspaceCarver c(ws);
  GroupArrays<G> a{};
  a.shapes = c.take<typename ProblemShape::UnderlyingProblemShape>(g);
  a.a = c.take<const Bf16*>(g);
  a.b = c.take<const Bf16*>(g);
  a.d = c.take<Bf16*>(g);
  a.stride_a = c.take<typename G::StrideA>(g);
  a.stride_b = c.take<typename G::StrideB>(g);
  a.stride_d = c.take<typename G::StrideD>(g);
  if (out) *out = a;
  return c.used();
}

template <class G>
size_t arrays_bytes(int groups) {
  return carve<G>(groups, nullptr, nullptr);
}

// The epilogue's arguments: the TMA store's (pointers and strides of D), or the activation's.
template <class G>
typename G::Epilogue::Arguments epilogue_arguments(const GroupArrays<G>& a,
                                                   const FusedActivation& act) {
  if constexpr (requires(typename G::Epilogue::Arguments e) { e.fused; }) {
    return {act, a.d, a.stride_d};
  } else {
    typename G::Epilogue::Arguments e{{}, nullptr, a.stride_d, a.d, a.stride_d};
    e.thread.alpha = 1.0f;
    e.thread.beta = 0.0f;
    return e;
  }
}

template <class G>
typename G::Gemm::Arguments arguments(int groups, const GroupArrays<G>& a, int sm_count,
                                      const FusedActivation& act) {
  cutlass::KernelHardwareInfo hw;
  hw.device_id = 0;
  hw.sm_count = sm_count;
  return typename G::Gemm::Arguments{cutlass::gemm::GemmUniversalMode::kGrouped,
                                     {groups, a.shapes, nullptr},
                                     {a.a, a.stride_a, a.b, a.stride_b},
                                     epilogue_arguments<G>(a, act),
                                     hw};
}

template <class G>
size_t workspace_of(int groups, int sm_count) {
  const GroupArrays<G> none{};
  FusedActivation act{};
  act.out_ld = 1;
  return arrays_bytes<G>(groups) + gpu::workspace_round_up(G::Gemm::get_workspace_size(
                                       arguments<G>(groups, none, sm_count, act)));
}

template <class G, bool kSwapAB>
LaunchResult launch_one(const GemmCall& c, const FusedActivation& act, int64_t out_ld) noexcept {
  auto* ws = static_cast<uint8_t*>(c.workspace);
  GroupArrays<G> a;
  carve<G>(c.groups, ws, &a);
  setup_groups<G, kSwapAB><<<(c.groups + 127) / 128, 128, 0, c.stream>>>(
      c.groups, c.offsets, c.n, c.k, static_cast<const Bf16*>(c.rows),
      reinterpret_cast<const Bf16* const*>(c.weights), static_cast<Bf16*>(c.out), out_ld, a);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return {"setup", cudaGetErrorString(e)};
  typename G::Gemm gemm;
  auto args = arguments<G>(c.groups, a, c.sm_count, act);
  if (auto s = gemm.can_implement(args); s != cutlass::Status::kSuccess)
    return {"can_implement", cutlassGetStatusString(s)};
  if (auto s = gemm.initialize(args, ws + arrays_bytes<G>(c.groups), c.stream);
      s != cutlass::Status::kSuccess)
    return {"initialize", cutlassGetStatusString(s)};
  if (auto s = gemm.run(c.stream); s != cutlass::Status::kSuccess)
    return {"run", cutlassGetStatusString(s)};
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return {"launch", cudaGetErrorString(e)};
  return {};
}

}  // namespace

size_t kernel_workspace(Kernel kernel, int groups, int sm_count) {
  switch (kernel) {
    case Kernel::kTokens:
      return workspace_of<TokenTiles>(groups, sm_count);
    case Kernel::kWide:
      return workspace_of<WideTiles>(groups, sm_count);
    case Kernel::kWeights:
      return workspace_of<WeightTiles>(groups, sm_count);
    case Kernel::kTokensAct:
      return workspace_of<TokenTilesAct>(groups, sm_count);
    case Kernel::kWeightsAct:
      return workspace_of<WeightTilesAct>(groups, sm_count);
  }
  return 0;
}

LaunchResult launch(Kernel kernel, const GemmCall& c, const FusedActivation& act) noexcept {
  switch (kernel) {
    case Kernel::kTokens:
      return launch_one<TokenTiles, false>(c, act, c.n);
    case Kernel::kWide:
      return launch_one<WideTiles, false>(c, act, c.n);
    case Kernel::kWeights:
      return launch_one<WeightTiles, true>(c, act, c.n);
    case Kernel::kTokensAct:
      return launch_one<TokenTilesAct, false>(c, act, act.out_ld);
    case Kernel::kWeightsAct:
      return launch_one<WeightTilesAct, true>(c, act, act.out_ld);
  }
  return {"dispatch", "unknown kernel"};
}

}  // namespace moe::trtllm::detail
