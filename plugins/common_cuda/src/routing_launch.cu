#include <cstdlib>
#include <string_view>

#include "kernels/dependent_launch.cuh"
#include "kernels/routing.cuh"
#include "launch.hpp"
#include "moe_cuda/check.hpp"

namespace moe::gpu::detail {
namespace {

// MOE_ROUTE_CARVEOUT=max (a measurement, bench/NOTES.md session 50): the routing kernel asks for
// the largest shared-memory carveout, the split of the big kernels around it, in case switching
// the SMs' L1 / shared split between them is what a one-warp kernel's ~9 us in a graph pays.
bool carveout_max() {
  static const bool on = [] {
    const char* v = std::getenv("MOE_ROUTE_CARVEOUT");
    return v != nullptr && std::string_view(v) == "max";
  }();
  return on;
}

template <int kSlots>
void launch(const kernels::RouteParams& p, int smem, cudaStream_t stream) {
  constexpr int kDefaultSmem = 48 * 1024;
  if (smem > kDefaultSmem)
    MOE_CUDA_CHECK(cudaFuncSetAttribute(kernels::route_kernel<kSlots>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  if (carveout_max())
    MOE_CUDA_CHECK(cudaFuncSetAttribute(kernels::route_kernel<kSlots>,
                                        cudaFuncAttributePreferredSharedMemoryCarveout,
                                        int(cudaSharedmemCarveoutMaxShared)));
  const int64_t blocks = (p.tokens + p.warps_per_block - 1) / p.warps_per_block;
  MOE_CUDA_CHECK(
      kernels::launch_dependent(kernels::route_kernel<kSlots>, static_cast<unsigned>(blocks),
                                p.warps_per_block * kernels::kWarpSize, smem, stream, p));
  MOE_CUDA_CHECK_LAUNCH();
}

}  // namespace

// Up to kRouteWarpsPerBlock tokens per block; fewer when their shared memory outgrows 48 KB, and
// a raised limit when one token's alone does (E beyond ~2700 with a group per expert, ~5000
// without). Candidates live in registers up to 512 experts (16 per lane).
void launch_route_kernel(kernels::RouteParams p, cudaStream_t stream) {
  constexpr int kDefaultSmem = 48 * 1024;
  const int per_warp = kernels::RouteSmem::bytes(p.experts, p.num_groups);
  int warps = kernels::kRouteWarpsPerBlock;
  while (warps > 1 && warps * per_warp > kDefaultSmem) --warps;
  p.warps_per_block = warps;
  p.warp_smem_bytes = per_warp;
  const int smem = warps * per_warp;
  if (p.experts <= 4 * kernels::kWarpSize)
    launch<4>(p, smem, stream);
  else if (p.experts <= 8 * kernels::kWarpSize)
    launch<8>(p, smem, stream);
  else if (p.experts <= 16 * kernels::kWarpSize)
    launch<16>(p, smem, stream);
  else
    launch<0>(p, smem, stream);
}

}  // namespace moe::gpu::detail
