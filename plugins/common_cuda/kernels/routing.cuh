// Routing of docs/design.md §4 on the device: one warp per token, every score in double, mirroring
// plugins/reference/routing.cpp operation for operation.
//
// NOTES: why the ids match the reference bit for bit.
//  - Every comparison is the reference's `better` (NaN below every number) with ties to the lower
//    index, in every top-k (experts, groups, the top-2 inside a group). Scores are kept as
//    order-preserving uint64 keys (score_key) so that `better` is one integer compare: NaN -> 0,
//    -0 -> +0, equal scores -> equal keys. A warp argmax under that total order returns exactly
//    what the reference's sequential scan returns.
//  - Scores are computed with the same expressions in the same order: sigmoid 1/(1+exp(-x)),
//    softmax exp(x - max) summed left to right by one lane (as the reference's loop), then
//    divided, then the bias added; group scores 0.0 + best (+ second). Only the order of
//    independent work differs (lanes share a group's top-2 search; loads are hoisted), never
//    the order of a sum. No fused multiply-add can form: nothing multiplies and then adds.
//  - The one difference left is exp/log1p themselves: CUDA's double exp is within 1 ulp, glibc's
//    is (almost always) correctly rounded, so a score may differ by 1 ulp of double. Both are
//    monotone and deterministic, so the order of the scores, and equal logits giving equal
//    scores (ties), are preserved; only two biased scores closer than ~1e-16 relative could
//    order differently, which random or grid-valued inputs do not produce. Weights therefore
//    agree to ~1e-16 before rounding to float.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "dependent_launch.cuh"
#include "device_utils.cuh"
#include "params.hpp"

namespace moe::gpu::kernels {

constexpr int kRouteWarpsPerBlock = 4;
constexpr int kRouteThreads = kRouteWarpsPerBlock * kWarpSize;

// Shared memory of one warp: score keys and flags for E experts and G groups, 16-byte aligned.
struct RouteSmem {
  uint64_t* key;    // (E) selection score as a key: s, or s + bias
  uint64_t* gkey;   // (G) group scores as keys
  uint8_t* taken;   // (E) 1 = not a candidate (chosen, or in a masked group)
  uint8_t* gtaken;  // (G) 1 = group chosen (kept)

  __host__ __device__ static int bytes(int experts, int groups) {
    const int raw = 8 * (experts + groups) + experts + groups;
    return (raw + 15) / 16 * 16;
  }
  __device__ RouteSmem(unsigned char* base, int experts, int groups)
      : key(reinterpret_cast<uint64_t*>(base)),
        gkey(key + experts),
        taken(reinterpret_cast<uint8_t*>(gkey + groups)),
        gtaken(taken + experts) {}
};

// An integer that orders like the reference's `better`: a > b as numbers <=> key(a) > key(b);
// every NaN -> 0, below every number (-inf -> 0x000f...f); -0 and +0 -> one key (they tie).
__device__ __forceinline__ uint64_t score_key(double x) {
  if (isnan(x)) return 0;
  const uint64_t bits = static_cast<uint64_t>(__double_as_longlong(x == 0.0 ? 0.0 : x));
  return (bits >> 63) ? ~bits : bits | (uint64_t(1) << 63);
}
// Inverse of score_key (NaN comes back as a NaN).
__device__ __forceinline__ double key_score(uint64_t key) {
  const uint64_t bits = (key >> 63) ? key & ~(uint64_t(1) << 63) : ~key;
  return __longlong_as_double(static_cast<long long>(bits));
}

// (ka, ia) ranks before (kb, ib): a larger key, or an equal key at a lower index. Index -1 is
// "no candidate" and ranks last.
__device__ __forceinline__ bool ranks_before(uint64_t ka, int ia, uint64_t kb, int ib) {
  return ia >= 0 && (ib < 0 || ka > kb || (ka == kb && ia < ib));
}

// A lane's best remaining candidate (index -1: none).
struct LaneBest {
  uint64_t key = 0;
  int idx = -1;
  __device__ __forceinline__ void offer(uint64_t k, int i) {  // ascending i: ties keep the lowest
    if (idx < 0 || k > key) key = k, idx = i;
  }
};

// The best of the lanes' bests, on every lane; -1 if no lane has a candidate. Three warp
// reductions: the largest key (high word, then low word), then the lowest index holding it.
__device__ __forceinline__ int warp_pick(const LaneBest& b) {
  const uint32_t hi = static_cast<uint32_t>(b.key >> 32), lo = static_cast<uint32_t>(b.key);
  const uint32_t max_hi = __reduce_max_sync(kFullMask, b.idx >= 0 ? hi : 0u);
  const uint32_t max_lo = __reduce_max_sync(kFullMask, b.idx >= 0 && hi == max_hi ? lo : 0u);
  const bool holds = b.idx >= 0 && hi == max_hi && lo == max_lo;  // NaN (key 0) still counts
  const uint32_t winner = __reduce_min_sync(kFullMask, holds ? uint32_t(b.idx) : 0xffffffffu);
  return winner == 0xffffffffu ? -1 : static_cast<int>(winner);
}

// Candidates i = lane (mod 32) of keys[0, n) in shared memory, flag 1 = not a candidate. Each
// lane touches only its own indices' flags, so they need no warp synchronisation.
struct SharedCandidates {
  const uint64_t* keys;
  uint8_t* flags;
  int n;
  __device__ LaneBest best(int lane) const {
    LaneBest b;
    for (int i = lane; i < n; i += kWarpSize)
      if (!flags[i]) b.offer(keys[i], i);
    return b;
  }
  __device__ void take(int i) { flags[i] = 1; }
};

// The same in registers for n <= 32 * kSlots: slot m holds expert lane + 32 m, bit m of `live`
// says it is still a candidate. Fully unrolled, so the arrays never leave registers.
template <int kSlots>
struct RegisterCandidates {
  uint64_t key[kSlots];
  uint32_t live = 0;
  __device__ LaneBest best(int lane) const {
    LaneBest b;
#pragma unroll
    for (int m = 0; m < kSlots; ++m)
      if (live >> m & 1u) b.offer(key[m], lane + m * kWarpSize);
    return b;
  }
  __device__ void take(int i) {
    live &= ~(1u << (i / kWarpSize));
  }
};

// The k best candidates, best first: lane j returns the j-th (-1 past the candidates). Chosen
// candidates are taken out of `set`.
template <class Set>
__device__ int warp_top_k(Set& set, int k, int lane) {
  int mine = -1;
  for (int j = 0; j < k; ++j) {
    const int w = warp_pick(set.best(lane));
    if (lane == j) mine = w;
    if (w >= 0 && w % kWarpSize == lane) set.take(w);
  }
  return mine;
}

// Adds (k, i) to the sorted pair (k1, i1) > (k2, i2).
__device__ __forceinline__ void top2_insert(uint64_t k, int i, uint64_t& k1, int& i1, uint64_t& k2,
                                            int& i2) {
  if (ranks_before(k, i, k1, i1)) {
    k2 = k1, i2 = i1;
    k1 = k, i1 = i;
  } else if (ranks_before(k, i, k2, i2)) {
    k2 = k, i2 = i;
  }
}

// The reference's group scores: top-2 (with a bias) or top-1 of each group's keys, the scores
// summed in selection order from 0.0. L = 32/G lanes (rounded down to a power of two) share a
// group, each scanning every L-th member, then merge their top-2 pairs by shuffles; the top-2
// under the total order is unique, so the split cannot change it.
__device__ inline void group_scores(const RouteParams& p, const RouteSmem& sm, int lane) {
  const int groups = p.num_groups, per_group = p.experts / groups;
  int lanes = 1;  // per group
  while (lanes * 2 * groups <= kWarpSize) lanes *= 2;
  const int groups_per_step = kWarpSize / lanes, sub = lane % lanes;
  for (int g0 = 0; g0 < groups; g0 += groups_per_step) {  // uniform: every lane shuffles
    const int g = g0 + lane / lanes;
    uint64_t k1 = 0, k2 = 0;
    int i1 = -1, i2 = -1;
    if (g < groups)
#pragma unroll 8
      for (int m = sub; m < per_group; m += lanes)
        top2_insert(sm.key[g * per_group + m], m, k1, i1, k2, i2);
    for (int offset = lanes / 2; offset > 0; offset /= 2) {
      const uint64_t o1 = __shfl_xor_sync(kFullMask, k1, offset);
      const uint64_t o2 = __shfl_xor_sync(kFullMask, k2, offset);
      const int j1 = __shfl_xor_sync(kFullMask, i1, offset);
      const int j2 = __shfl_xor_sync(kFullMask, i2, offset);
      top2_insert(o1, j1, k1, i1, k2, i2);
      top2_insert(o2, j2, k1, i1, k2, i2);
    }
    if (g < groups && sub == 0) {
      double score = 0.0 + key_score(k1);
      if (p.bias != nullptr) score += key_score(k2);
      sm.gkey[g] = score_key(score);
      sm.gtaken[g] = 0;
    }
  }
  __syncwarp();
}

// The reference's log_sigmoid: min(a, 0) - log1p(exp(-|a|)), std::min's NaN behaviour included.
__device__ __forceinline__ double log_sigmoid(double a) {
  const double lo = (0.0 < a) ? 0.0 : a;
  return lo - log1p(exp(-fabs(a)));
}

// Softmax normaliser of one token's logits: max (std::max from x[0]) and the sum of
// exp(x - max) in index order. Leaves exp(x_i - max) in p[i].
__device__ inline void softmax_normaliser(const float* x, int n, int lane, double* p, double& max,
                                          double& sum) {
  max = x[0];
  for (int i = lane; i < n; i += kWarpSize) {
    const double v = x[i];
    max = (max < v) ? v : max;
  }
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const double o = __shfl_xor_sync(kFullMask, max, offset);
    max = (max < o) ? o : max;  // NaN aside, exact; with any NaN every score is NaN anyway
  }
  for (int i = lane; i < n; i += kWarpSize) p[i] = exp(static_cast<double>(x[i]) - max);
  __syncwarp();
  sum = 0.0;
  if (lane == 0)
    for (int i = 0; i < n; ++i) sum += p[i];  // the reference's order, one lane
  sum = __shfl_sync(kFullMask, sum, 0);
}

// Chooses the best topk_group groups (grouped_topk): afterwards gtaken[g] = 1 for kept groups.
__device__ inline void choose_groups(const RouteParams& p, const RouteSmem& sm, int lane) {
  group_scores(p, sm, lane);
  SharedCandidates groups{sm.gkey, sm.gtaken, p.num_groups};
  warp_top_k(groups, p.topk_group, lane);
  __syncwarp();  // each gtaken[g] was written by the lane owning g; every lane reads them next
}

// Lane j < W ends with column j's weight; the serial loops keep the reference's order.
__device__ inline double sink_weight(const RouteParams& p, const float* x, int my_id, int lane) {
  const int width = p.top_k + p.sinks;
  const double lp = lane < width ? log_sigmoid(x[my_id]) : 0.0;  // sink ids index their column
  double max = __shfl_sync(kFullMask, lp, 0);
  for (int j = 1; j < width; ++j) {
    const double v = __shfl_sync(kFullMask, lp, j);
    max = (max < v) ? v : max;
  }
  const double e = exp(lp - max);
  double sum = 0.0;
  for (int j = 0; j < width; ++j) sum += __shfl_sync(kFullMask, e, j);
  return e / sum * p.scale;
}

// Unbiased score s from v = the softmax numerator exp(x - max), or v = exp(-x) for sigmoid; and
// the key selection ranks it by: s, or s + bias. The reference's expressions, step for step.
__device__ __forceinline__ double unbiased_score(const RouteParams& p, double v, double sum) {
  return p.softmax ? v / sum : 1.0 / (1.0 + v);
}
__device__ __forceinline__ uint64_t selection_key(const RouteParams& p, double s, float bias) {
  return score_key(p.bias != nullptr ? s + static_cast<double>(bias) : s);
}

// The k choices of one token, best first (lane j returns choice j). kSlots > 0: candidates in
// registers (E <= 32 kSlots); 0: in shared memory (any E). Softmax numerators arrive in sm.key.
template <int kSlots>
__device__ int choose_experts(const RouteParams& p, const RouteSmem& sm, const float* x, double sum,
                              int lane) {
  const int E = p.experts;
  const double* numerators = reinterpret_cast<const double*>(sm.key);  // softmax only
  if constexpr (kSlots > 0) {
    // Every load first, then every exp, then every division: the double exp and division end
    // in branches, which would otherwise hold each slot's loads behind the previous slot's math.
    RegisterCandidates<kSlots> set;
    double v[kSlots];
    float bias[kSlots];
#pragma unroll
    for (int m = 0; m < kSlots; ++m) {
      const int i = lane + m * kWarpSize;
      v[m] = i >= E ? 0.0 : p.softmax ? numerators[i] : -static_cast<double>(x[i]);
      bias[m] = i < E && p.bias != nullptr ? p.bias[i] : 0.0f;
    }
    if (!p.softmax) {
#pragma unroll
      for (int m = 0; m < kSlots; ++m) v[m] = exp(v[m]);
    }
#pragma unroll
    for (int m = 0; m < kSlots; ++m) {
      const bool here = lane + m * kWarpSize < E;
      set.key[m] = here ? selection_key(p, unbiased_score(p, v[m], sum), bias[m]) : 0;
      if (here) set.live |= 1u << m;
    }
    if (p.method == kRouteGrouped) {
#pragma unroll
      for (int m = 0; m < kSlots; ++m) {
        const int i = lane + m * kWarpSize;
        if (i < E) sm.key[i] = set.key[m];  // over this lane's own numerator
      }
      __syncwarp();
      choose_groups(p, sm, lane);
      const int per_group = E / p.num_groups;
#pragma unroll
      for (int m = 0; m < kSlots; ++m) {
        const int i = lane + m * kWarpSize;
        if (i < E && !sm.gtaken[i / per_group]) set.live &= ~(1u << m);
      }
    }
    return warp_top_k(set, p.top_k, lane);
  } else {
    for (int i = lane; i < E; i += kWarpSize) {
      const double v = p.softmax ? numerators[i] : exp(-static_cast<double>(x[i]));
      const float bias = p.bias != nullptr ? p.bias[i] : 0.0f;
      sm.key[i] = selection_key(p, unbiased_score(p, v, sum), bias);  // over its own numerator
      sm.taken[i] = 0;
    }
    __syncwarp();
    if (p.method == kRouteGrouped) {
      choose_groups(p, sm, lane);
      const int per_group = E / p.num_groups;
      for (int i = lane; i < E; i += kWarpSize) sm.taken[i] = sm.gtaken[i / per_group] ? 0 : 1;
    }
    SharedCandidates set{sm.key, sm.taken, E};
    return warp_top_k(set, p.top_k, lane);
  }
}

// One token's routing by one warp (all 32 lanes, full-mask shuffles): lane j < k + S ends with
// column j's id and weight; a padding token's are -1 and 0. `warp_smem`: this warp's
// RouteSmem::bytes(E, G) bytes of shared memory, 16-byte aligned. Used by route_kernel and by
// kernels that route inside their own launch (cutlass_mega, docs/design.md §13).
template <int kSlots>
__device__ __forceinline__ void route_token(const RouteParams& p, unsigned char* warp_smem,
                                            int64_t t, int lane, int& id, float& weight) {
  const int E = p.experts, k = p.top_k, width = p.top_k + p.sinks;
  if (p.is_padding != nullptr && p.is_padding[t] != 0) {
    id = -1;
    weight = 0.0f;
    return;
  }
  const float* x = p.logits + t * (E + p.sinks);  // (E + S)
  const RouteSmem sm(warp_smem, E, p.num_groups);

  // Softmax numerators borrow the key array (same bytes, same owner lane) until keys replace them.
  double max = 0.0, sum = 1.0;
  if (p.softmax) softmax_normaliser(x, E, lane, reinterpret_cast<double*>(sm.key), max, sum);
  int my_id = choose_experts<kSlots>(p, sm, x, sum, lane);
  if (p.method == kRouteSink && lane >= k && lane < width) my_id = E + (lane - k);

  // Weights from the unbiased score, recomputed with the same expressions as the keys.
  double w;
  if (p.method == kRouteSink) {
    w = sink_weight(p, x, my_id, lane);
  } else {
    double s = 0.0;
    if (lane < k) {
      const double xv = x[my_id];
      s = unbiased_score(p, p.softmax ? exp(xv - max) : exp(-xv), sum);
    }
    if (p.renormalize) {
      double total = 0.0;
      for (int j = 0; j < k; ++j) total += __shfl_sync(kFullMask, s, j);
      if (!(total < 2.2250738585072014e-308)) {  // DBL_MIN; a NaN total stays NaN
        s = s / total;
      } else {
        // Every chosen score underflowed: the ratio's limit, a softmax of the scores' logs (the
        // logit for softmax, whose normaliser cancels), as the reference's renormalize.
        const double l =
            lane < k ? (p.softmax ? static_cast<double>(x[my_id]) : log_sigmoid(x[my_id])) : 0.0;
        double m = __shfl_sync(kFullMask, l, 0);
        for (int j = 1; j < k; ++j) {
          const double v = __shfl_sync(kFullMask, l, j);
          m = (m < v) ? v : m;  // std::max's, as the reference
        }
        const double e = lane < k ? exp(l - m) : 0.0;
        double sum_e = 0.0;
        for (int j = 0; j < k; ++j) sum_e += __shfl_sync(kFullMask, e, j);
        s = e / sum_e;
      }
    }
    w = s * p.scale;  // 1.0 for softmax/sigmoid_topk: exact
  }
  id = my_id;
  weight = static_cast<float>(w);
}

template <int kSlots>
__global__ void __launch_bounds__(kRouteThreads) route_kernel(const RouteParams p) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  extern __shared__ __align__(16) unsigned char route_smem[];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t t = int64_t(blockIdx.x) * p.warps_per_block + warp;
  if (t >= p.tokens) return;  // whole warps leave together: the shuffles stay full
  const int width = p.top_k + p.sinks;
  int id = -1;
  float weight = 0.0f;
  route_token<kSlots>(p, route_smem + warp * p.warp_smem_bytes, t, lane, id, weight);
  if (lane < width) {
    p.ids[t * width + lane] = id;
    p.weights[t * width + lane] = weight;
  }
}

}  // namespace moe::gpu::kernels
