// Instantiations of the two grouped GEMM kernels and their launchers (see
// kernels/sm90_bf16_grouped_gemm.cuh). Errors come back as strings; grouped_gemm.cpp reports them.
#include "../kernels/sm90_bf16_grouped_gemm.cuh"
#include "grouped_gemm_launch.hpp"

namespace moe::trtllm::detail {
namespace {

using namespace kernels;

constexpr size_t kAlign = 256;
size_t round_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

template <class G>
size_t arrays_bytes(int groups) {
  const size_t g = size_t(groups);
  return round_up(g * sizeof(typename ProblemShape::UnderlyingProblemShape)) +
         3 * round_up(g * sizeof(void*)) + round_up(g * sizeof(typename G::StrideA)) +
         round_up(g * sizeof(typename G::StrideB)) + round_up(g * sizeof(typename G::StrideD));
}

template <class G>
GroupArrays<G> carve(int groups, uint8_t* ws) {
  const size_t g = size_t(groups);
  GroupArrays<G> a;
  auto take = [&](size_t bytes) {
    uint8_t* p = ws;
    ws += round_up(bytes);
    return p;
  };
  a.shapes = reinterpret_cast<decltype(a.shapes)>(take(g * sizeof(*a.shapes)));
  a.a = reinterpret_cast<const Bf16**>(take(g * sizeof(void*)));
  a.b = reinterpret_cast<const Bf16**>(take(g * sizeof(void*)));
  a.d = reinterpret_cast<Bf16**>(take(g * sizeof(void*)));
  a.stride_a = reinterpret_cast<typename G::StrideA*>(take(g * sizeof(typename G::StrideA)));
  a.stride_b = reinterpret_cast<typename G::StrideB*>(take(g * sizeof(typename G::StrideB)));
  a.stride_d = reinterpret_cast<typename G::StrideD*>(take(g * sizeof(typename G::StrideD)));
  return a;
}

template <class G>
typename G::Gemm::Arguments arguments(int groups, const GroupArrays<G>& a, int sm_count) {
  cutlass::KernelHardwareInfo hw;
  hw.device_id = 0;
  hw.sm_count = sm_count;
  typename G::Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGrouped,
                                   {groups, a.shapes, nullptr},
                                   {a.a, a.stride_a, a.b, a.stride_b},
                                   {{}, nullptr, a.stride_d, a.d, a.stride_d},
                                   hw};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  return args;
}

template <class G>
size_t workspace_of(int groups, int sm_count) {
  const GroupArrays<G> none{};
  return arrays_bytes<G>(groups) +
         round_up(G::Gemm::get_workspace_size(arguments<G>(groups, none, sm_count)));
}

template <class G, bool kSwapAB>
LaunchResult launch(int groups, const int64_t* offsets, int n, int k, const void* rows,
                    const void* const* weights, void* out, void* workspace, int sm_count,
                    cudaStream_t stream) noexcept {
  auto* ws = static_cast<uint8_t*>(workspace);
  const GroupArrays<G> a = carve<G>(groups, ws);
  setup_groups<G, kSwapAB><<<(groups + 127) / 128, 128, 0, stream>>>(
      groups, offsets, n, k, static_cast<const Bf16*>(rows),
      reinterpret_cast<const Bf16* const*>(weights), static_cast<Bf16*>(out), a);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return {"setup", cudaGetErrorString(e)};
  typename G::Gemm gemm;
  auto args = arguments<G>(groups, a, sm_count);
  if (auto s = gemm.can_implement(args); s != cutlass::Status::kSuccess)
    return {"can_implement", cutlassGetStatusString(s)};
  if (auto s = gemm.initialize(args, ws + arrays_bytes<G>(groups), stream);
      s != cutlass::Status::kSuccess)
    return {"initialize", cutlassGetStatusString(s)};
  if (auto s = gemm.run(stream); s != cutlass::Status::kSuccess)
    return {"run", cutlassGetStatusString(s)};
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return {"launch", cudaGetErrorString(e)};
  return {};
}

}  // namespace

size_t token_tiles_workspace(int groups, int sm_count) {
  return workspace_of<TokenTiles>(groups, sm_count);
}
size_t weight_tiles_workspace(int groups, int sm_count) {
  return workspace_of<WeightTiles>(groups, sm_count);
}

LaunchResult launch_token_tiles(int groups, const int64_t* offsets, int n, int k, const void* rows,
                                const void* const* weights, void* out, void* workspace,
                                int sm_count, cudaStream_t stream) noexcept {
  return launch<TokenTiles, false>(groups, offsets, n, k, rows, weights, out, workspace, sm_count,
                                   stream);
}

LaunchResult launch_weight_tiles(int groups, const int64_t* offsets, int n, int k,
                                 const void* rows, const void* const* weights, void* out,
                                 void* workspace, int sm_count, cudaStream_t stream) noexcept {
  return launch<WeightTiles, true>(groups, offsets, n, k, rows, weights, out, workspace, sm_count,
                                   stream);
}

}  // namespace moe::trtllm::detail
