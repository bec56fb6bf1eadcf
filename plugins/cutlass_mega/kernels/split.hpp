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

// GEMM2's split (within_wave, the default since session 55; without it MOE_MEGA_SPLIT2=waves, a
// measurement): as k_split within one wave; past one wave, the split
// whose waves take the least time, counted as ceil(items s / ctas) waves of 1 / s of an item's time
// each, taken over a smaller split only where it saves more than 5 %, each part keeping at least
// `min_steps` stages (kSplitMinSteps). Mixtral at T = 8 has 224 GEMM2 items of 56 or 112
// stages on 132 CTAs: 1.7 waves, 40 CTAs idle through the second; four parts, 896 on 7 waves, idle
// 3 % (bench/NOTES.md, session 47). Few stages a part pay each item's pipeline fill more often.
// within_wave: the same model also where the items fit one wave but no split of them does
// (Mixtral at T = 2: 96 items, 36 CTAs idle; four parts, 384 on 3 waves of a quarter), starting
// from k_split's answer. H200 (session 55): Mixtral bf16 0.95-0.99x k_split's time at T = 2-8,
// mxfp4 0.89-0.97x at T = 2-5, DeepSeek-V3 bf16 unchanged.
constexpr int kSplitMinSteps = 8;
MOE_MEGA_HD constexpr int k_split_waves(int items, int steps, int ctas, int max_split,
                                        int min_steps, bool within_wave = false) {
  if (items <= 0 || ctas <= 0 || (items <= ctas && !within_wave))
    return k_split(items, steps, ctas, max_split);
  // The best time so far as the fraction best_num / best_den of an item's time (integers only).
  int best = items <= ctas ? k_split(items, steps, ctas, max_split) : 1;
  long long best_num = (static_cast<long long>(items) * best + ctas - 1) / ctas,
            best_den = best;  // waves / split
  for (int s = best + 1; s <= max_split && steps / s >= min_steps; ++s) {
    const long long waves = (static_cast<long long>(items) * s + ctas - 1) / ctas;
    // waves / s < best_num / best_den by more than 5 %: waves * best_den * 100 < 95 * best_num * s
    if (waves * best_den * 100 < 95 * best_num * s) best = s, best_num = waves, best_den = s;
  }
  return best;
}

}  // namespace moe::mega::kernels
