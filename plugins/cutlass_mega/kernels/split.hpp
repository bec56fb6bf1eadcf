// cutlass_mega: how far to split work items along K, and the order an item walks its K steps
// (plain C++, also compiled for the device, so the kernel and the host tests share them).
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

// Where item `u` of a phase starts among its `len` K steps (it then wraps around): 0 in order;
// staggered, items on neighbouring CTAs start at different K (u x 5 mod len), so the CTAs'
// concurrent weight reads are not all the same 128-byte column of rows one row stride apart.
// A function of the item alone, so the result does not depend on which CTA ran it.
MOE_MEGA_HD constexpr int k_shift(int u, int len, bool staggered) {
  return staggered ? (u % len) * 5 % len : 0;
}

// The K step an item computes i-th (i in [0, len)) of its steps [ks0, ks0 + len), from `shift`.
MOE_MEGA_HD constexpr int k_step(int i, int ks0, int len, int shift) {
  return ks0 + (i + shift) % len;
}

}  // namespace moe::mega::kernels
