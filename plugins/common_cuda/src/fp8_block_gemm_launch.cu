// Instantiations of the grouped fp8 block-scale GEMMs and their launchers (see
// kernels/sm90_fp8_block_grouped_gemm.cuh). Errors come back as strings; fp8_block_gemm.cpp
// reports them.
#include "fp8_block_gemm_launch.hpp"
#include "kernels/cutlass_run.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/sm90_fp8_block_grouped_gemm.cuh"
#include "moe_cuda/workspace.hpp"

namespace moe::gpu::detail {
namespace {

using namespace kernels::block_gemm;

// Carves the group arrays out of `ws` (null: only counts the bytes); returns the bytes used.
template <class G>
size_t carve(int groups, uint8_t* ws, GroupArrays<G>* out) {
  const size_t g = size_t(groups);
  gpu::WorkspaceCarver c(ws);
  GroupArrays<G> a{};
  a.shapes = c.take<typename ProblemShape::UnderlyingProblemShape>(g);
  a.a = c.take<const Fp8*>(g);
  a.b = c.take<const Fp8*>(g);
  a.sfa = c.take<const float*>(g);
  a.sfb = c.take<const float*>(g);
  a.d = c.take<typename G::ElementD*>(g);
  a.stride_a = c.take<typename G::StrideA>(g);
  a.stride_b = c.take<typename G::StrideB>(g);
  a.stride_d = c.take<typename G::StrideD>(g);
  a.layout_sfa = c.take<typename G::LayoutSFA>(g);
  a.layout_sfb = c.take<typename G::LayoutSFB>(g);
  if (out) *out = a;
  return c.used();
}

template <class G>
typename G::Gemm::Arguments arguments(int groups, const GroupArrays<G>& a, int sm_count) {
  cutlass::KernelHardwareInfo hw;
  hw.device_id = 0;
  hw.sm_count = sm_count;
  typename G::Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGrouped,
      {groups, a.shapes, nullptr},
      {a.a, a.stride_a, a.b, a.stride_b, a.sfa, a.layout_sfa, a.sfb, a.layout_sfb},
      {{}, nullptr, a.stride_d, a.d, a.stride_d},
      hw};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  return args;
}

template <class G>
size_t workspace_of(int groups, int sm_count) {
  const GroupArrays<G> none{};
  return carve<G>(groups, nullptr, nullptr) +
         gpu::workspace_round_up(G::Gemm::get_workspace_size(arguments<G>(groups, none, sm_count)));
}

template <class G, bool kSwapAB>
BlockGemmResult launch_one(const Fp8BlockGemmArgs& c, cudaStream_t stream) noexcept {
  auto* ws = static_cast<uint8_t*>(c.workspace);
  GroupArrays<G> a;
  const size_t arrays_bytes = carve<G>(c.groups, ws, &a);
  const GroupRows where{c.offsets, c.counts, c.max_m, c.skip_begin, c.skip_end};
  const GroupOperands op{c.n,
                         c.k,
                         reinterpret_cast<const Fp8*>(c.rows),
                         c.row_scales,
                         static_cast<int32_t>(c.scale_ld),
                         reinterpret_cast<const Fp8* const*>(c.weights),
                         c.w_scales,
                         c.out};
  if (cudaError_t e = kernels::launch_dependent(setup_groups<G, kSwapAB>, (c.groups + 127) / 128,
                                                128, 0, stream, c.groups, where, op, a);
      e != cudaSuccess)
    return {"setup", cudaGetErrorString(e)};
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return {"setup", cudaGetErrorString(e)};
  const StageError e = run_cutlass_gemm<typename G::Gemm>(arguments<G>(c.groups, a, c.sm_count),
                                                          ws + arrays_bytes, stream);
  return {e.stage, e.message};
}

}  // namespace

size_t fp8_block_kernel_workspace(Fp8BlockTiles tiles, bool f32_out, int groups, int sm_count) {
  switch (tiles) {
    case Fp8BlockTiles::kTokens:
      return f32_out ? workspace_of<TokenTiles<float>>(groups, sm_count)
                     : workspace_of<TokenTiles<Bf16>>(groups, sm_count);
    case Fp8BlockTiles::kWeights:
      return f32_out ? workspace_of<WeightTiles<float>>(groups, sm_count)
                     : workspace_of<WeightTiles<Bf16>>(groups, sm_count);
    case Fp8BlockTiles::kTokensPaired:
      return f32_out ? workspace_of<PairedTokenTiles<float>>(groups, sm_count)
                     : workspace_of<PairedTokenTiles<Bf16>>(groups, sm_count);
  }
  return 0;
}

BlockGemmResult launch_fp8_block_gemm(Fp8BlockTiles tiles, const Fp8BlockGemmArgs& c,
                                      cudaStream_t stream) noexcept {
  switch (tiles) {
    case Fp8BlockTiles::kTokens:
      return c.f32_out ? launch_one<TokenTiles<float>, false>(c, stream)
                       : launch_one<TokenTiles<Bf16>, false>(c, stream);
    case Fp8BlockTiles::kWeights:
      return c.f32_out ? launch_one<WeightTiles<float>, true>(c, stream)
                       : launch_one<WeightTiles<Bf16>, true>(c, stream);
    case Fp8BlockTiles::kTokensPaired:
      return c.f32_out ? launch_one<PairedTokenTiles<float>, false>(c, stream)
                       : launch_one<PairedTokenTiles<Bf16>, false>(c, stream);
  }
  return {"dispatch", "unknown tiles"};
}

}  // namespace moe::gpu::detail
