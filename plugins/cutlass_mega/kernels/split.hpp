// cutlass_mega: how far to split work items along K (plain C++, also compiled for the device, so
// the kernel and the host tests share it).
#pragma once

#include "kernels/host_device.hpp"

namespace moe::mega::kernels {

// How many parts to split each of `items` items of `steps` stages into along K on `ctas` CTAs:
// only where one wave of items leaves SMs idle, the largest split whose parts still fit one wave
// and keep at least two stages each, up to `max_split` (the copies of the results the workspace
// holds). Measured on the H200 (bench/NOTES.md): a split that adds waves (DeepSeek-V3 at T = 1)
// or splits a wave that already fills the SMs costs more than it balances. Every CTA computes
// the same answer.
MOE_MEGA_HD constexpr int k_split(int items, int steps, int ctas, int max_split) {
  int split = 1;
  while (split < max_split && items > 0 && items * (split + 1) <= ctas && steps / (split + 1) >= 2)
    ++split;
  return split;
}

}  // namespace moe::mega::kernels
