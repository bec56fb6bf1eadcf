// The own kernels' parameters that both launchers (fp8_gemm_ffma_launch.cu,
// fp8_gemm_swapab_launch.cu) fill alike from a GemmCall: the group rows, operands and output
// (the tensor maps and each kernel's extras are the launcher's).
#pragma once

#include "../kernels/sm90_fp8_grouped_gemm_ffma.cuh"
#include "fp8_gemm_launch.hpp"

namespace moe::deepgemm::detail {

inline void set_operands(kernels::ffma::Params& p, const GemmCall& c) {
  p.groups = c.groups;
  p.n = c.n;
  p.k = c.k;
  p.offsets = c.offsets;
  p.counts = c.counts;
  p.max_m = c.max_m;
  p.row_scales = c.row_scales;
  p.scale_ld = c.scale_ld;
  p.w_scales = c.w_scale_stack;
  p.out = c.out;
}

}  // namespace moe::deepgemm::detail
