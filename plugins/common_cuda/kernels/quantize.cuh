// e4m3 activation quantisation: per token per 128 channels, and per tensor (amax, then codes).
//
// NOTES: the scale is computed exactly as moe::fp8_scale_from_amax does, in double
// (float(max(amax, 1e-10) / 448)), so scales are bit-identical to the reference. Codes are the
// reference's too: the exact quotient x / scale rounded once to e4m3 (kernels/e4m3_round.cuh).
// The fp32 quotient alone would round twice, and with bf16 inputs over amax/448 scales it lands
// exactly on an e4m3 midpoint that the exact quotient only approaches in about one element of a
// few thousand (x = 3/32 amax, say). Measured before that was handled: one flipped hidden code
// per few tokens, which GEMM1 carried into the re-quantised intermediate, tripled the
// deepgemm_style layer error on a quarter of the tokens (bench/NOTES.md).
#pragma once

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "dependent_launch.cuh"
#include "device_utils.cuh"
#include "e4m3_round.cuh"
#include "exact_math.cuh"
#include "params.hpp"

namespace moe::gpu::kernels {

constexpr int kQuantBlock = 128;  // channels per 1x128 scale
constexpr int kQuantThreads = 256;

// moe::fp8_scale_from_amax, bit for bit: float(max(amax, 1e-10) / 448) in double, which for
// amax >= 1e-10 is amax / 448 correctly rounded in fp32 (kernels/exact_math.cuh: without the
// double division's call).
__device__ __forceinline__ float fp8_scale_from_amax(float amax) {
  constexpr float kFloorScale = static_cast<float>(1e-10 / 448.0);
  return static_cast<double>(amax) < 1e-10 ? kFloorScale : div448_rn(amax);
}

// Max over the kLanes lanes of an aligned lane group (xor offsets stay inside the group).
// fmaxf drops NaN, as std::max(amax, |x|) from amax = 0 does in the reference.
template <int kLanes>
__device__ __forceinline__ float group_max(float v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// Work items are (row, 128-channel block) pairs; kPerLane channels per lane, so a block takes
// kLanes = 128 / kPerLane lanes and a warp quantises kBlocksPerWarp blocks per step. kVec (8 per
// lane: one 16-byte load, one 8-byte store): H % 8 == 0 and aligned pointers, so a lane's
// channels are all in range or all out. Scalar (4 per lane): any H, element loads with bounds
// checks (the last block may be partial). The loop steps whole warps so every lane reaches the
// shuffles.
// NOTES: at deepseek_v3 shapes this ran at ~2 TB/s on an H200, bound by the IEEE fp32 division
// (two steps in flight per warp did not help); to_e4m3 now multiplies by the scale's inverse and
// divides only within 3 ulps of a midpoint (kernels/e4m3_round.cuh), the same codes.
template <bool kVec>
__global__ void __launch_bounds__(kQuantThreads) quantize_fp8_1x128_kernel(const Fp8BlockParams p) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  constexpr int kPerLane = kVec ? 8 : 4;
  constexpr int kLanes = kQuantBlock / kPerLane;
  constexpr int kBlocksPerWarp = kWarpSize / kLanes;
  const RowWalk walk = row_walk(p.row_begin, p.row_end, p.max_rows, p.row_list, p.row_list_count);
  const int64_t blocks = (p.hidden + kQuantBlock - 1) / kQuantBlock;
  const int64_t work = walk.count * blocks;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / kWarpSize;
  for (int64_t step = warp * kBlocksPerWarp; step < work; step += warps * kBlocksPerWarp) {
    const int64_t w = step + lane / kLanes;
    const int64_t listed = w < work ? walk.row(w / blocks) : -1;  // < 0: nothing to do
    const int64_t r = listed < 0 ? 0 : listed, b = w < work ? w % blocks : 0;
    const int64_t source = listed < 0 ? -1 : p.source_row == nullptr ? r : p.source_row[r];
    // The group serves the skip test only: with no groups to skip, no load of it.
    const int32_t group =
        p.row_group != nullptr && p.skip_begin < p.skip_end && source >= 0 ? p.row_group[r] : -1;
    const bool skipped = group >= p.skip_begin && group < p.skip_end;
    const bool valid = source >= 0 && !skipped;
    const int64_t c0 = b * kQuantBlock + (lane % kLanes) * kPerLane;
    const bool in_range = valid && c0 < p.hidden;
    const uint16_t* src = p.x + (valid ? source : 0) * p.hidden + c0;  // (kPerLane)
    uint8_t* dst = p.codes + r * p.hidden + c0;                        // (kPerLane)
    float v[kPerLane];
    if constexpr (kVec) {
      if (in_range) {
        load_bf16x8(src, v);
      } else {
#pragma unroll
        for (int e = 0; e < kPerLane; ++e) v[e] = 0.0f;
      }
    } else {
#pragma unroll
      for (int e = 0; e < kPerLane; ++e)
        v[e] = valid && c0 + e < p.hidden ? bf16_to_float(src[e]) : 0.0f;
    }
    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) amax = fmaxf(amax, fabsf(v[e]));
    const float scale = fp8_scale_from_amax(group_max<kLanes>(amax));
    const float inv = e4m3_inverse(scale);
    if (!valid) continue;
    if constexpr (kVec) {
      if (in_range) {
        uint32_t lo = 0, hi = 0;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          lo |= uint32_t(to_e4m3(v[e], scale, inv)) << (8 * e);
          hi |= uint32_t(to_e4m3(v[e + 4], scale, inv)) << (8 * e);
        }
        *reinterpret_cast<uint2*>(dst) = make_uint2(lo, hi);
      }
    } else {
#pragma unroll
      for (int e = 0; e < kPerLane; ++e)
        if (c0 + e < p.hidden) dst[e] = to_e4m3(v[e], scale, inv);
    }
    if (lane % kLanes == 0) p.scales[r * p.scale_row_stride + b * p.scale_block_stride] = scale;
  }
}

// The rows of a permutation from tokens quantised once (launch_gather_quantize_fp8_1x128's
// staging): a warp per output row copies its token's codes a Vec a lane (uint4: 16 bytes) and its
// scales a lane each. H % sizeof(Vec) == 0 and Vec-aligned codes (the launcher checks).
template <class Vec>
__global__ void __launch_bounds__(kQuantThreads) gather_fp8_1x128_kernel(const Fp8GatherParams p) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  const int64_t begin = range_begin(p.row_begin, p.max_rows);
  const int64_t end = range_end(p.row_end, p.max_rows);
  const int64_t blocks = (p.hidden + kQuantBlock - 1) / kQuantBlock;
  const int64_t vecs = p.hidden / int64_t(sizeof(Vec));
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / kWarpSize;
  for (int64_t r = begin + warp; r < end; r += warps) {
    const int64_t t = p.source_row[r];
    if (t < 0) continue;
    if (p.row_group != nullptr) {
      const int32_t group = p.row_group[r];
      if (group >= p.skip_begin && group < p.skip_end) continue;
    }
    const Vec* src = reinterpret_cast<const Vec*>(p.codes_in + t * p.hidden);  // (vecs)
    Vec* dst = reinterpret_cast<Vec*>(p.codes + r * p.hidden);                 // (vecs)
    constexpr int kInFlight = 4;  // loads issued before their stores (the compiler cannot tell
                                  // that the staging area and the rows never overlap)
    for (int64_t v0 = lane; v0 < vecs; v0 += kInFlight * kWarpSize) {
      Vec part[kInFlight];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u)
        if (v0 + u * kWarpSize < vecs) part[u] = src[v0 + u * kWarpSize];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u)
        if (v0 + u * kWarpSize < vecs) dst[v0 + u * kWarpSize] = part[u];
    }
    for (int64_t b = lane; b < blocks; b += kWarpSize)
      p.scales[r * p.scale_row_stride + b * p.scale_block_stride] = p.scales_in[t * blocks + b];
  }
}

// Element i (and the next kVecElems - 1 when kVec) of a per-tensor quantisation's input, bf16 or
// f32.
template <bool kVec>
__device__ __forceinline__ void load_tensor_values(const Fp8TensorParams& p, int64_t i,
                                                   float (&v)[kVec ? kVecElems : 1]) {
  if constexpr (kVec) {
    if (p.x_f32 != nullptr)
      load_bf16x8(p.x_f32 + i, v);
    else
      load_bf16x8(p.x + i, v);
  } else {
    v[0] = p.x_f32 != nullptr ? p.x_f32[i] : bf16_to_float(p.x[i]);
  }
}

// amax of one thread's share of elements [first, last): thread t of `threads` takes elements
// t * kN, (t + threads) * kN, ... (fmaxf drops NaN, as the reference's std::max from 0 does).
template <bool kVec>
__device__ __forceinline__ float share_amax(const Fp8TensorParams& p, int64_t first, int64_t last,
                                            int64_t t, int64_t threads) {
  constexpr int kN = kVec ? kVecElems : 1;
  float amax = 0.0f;
#pragma unroll 4
  for (int64_t i = first + t * kN; i < last; i += threads * kN) {
    float v[kN];
    load_tensor_values<kVec>(p, i, v);
#pragma unroll
    for (int e = 0; e < kN; ++e) amax = fmaxf(amax, fabsf(v[e]));
  }
  return amax;
}

// Codes of one thread's share of elements [first, last) (the same split as share_amax).
template <bool kVec>
__device__ __forceinline__ void quantize_share(const Fp8TensorParams& p, float scale, int64_t first,
                                               int64_t last, int64_t t, int64_t threads) {
  constexpr int kN = kVec ? kVecElems : 1;
  const float inv = e4m3_inverse(scale);
#pragma unroll 4
  for (int64_t i = first + t * kN; i < last; i += threads * kN) {
    float v[kN];
    load_tensor_values<kVec>(p, i, v);
    if constexpr (kVec) {
      uint32_t lo = 0, hi = 0;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        lo |= uint32_t(to_e4m3(v[e], scale, inv)) << (8 * e);
        hi |= uint32_t(to_e4m3(v[e + 4], scale, inv)) << (8 * e);
      }
      *reinterpret_cast<uint2*>(p.codes + i) = make_uint2(lo, hi);
    } else {
      p.codes[i] = to_e4m3(v[0], scale, inv);
    }
  }
}

// The largest of the block's values, in every thread (warp_amax: one float per warp).
__device__ __forceinline__ float block_amax(float amax, float* warp_amax) {
  amax = group_max<kWarpSize>(amax);
  if (threadIdx.x % kWarpSize == 0) warp_amax[threadIdx.x / kWarpSize] = amax;
  __syncthreads();
  amax =
      threadIdx.x % kWarpSize < blockDim.x / kWarpSize ? warp_amax[threadIdx.x % kWarpSize] : 0.0f;
  return group_max<kWarpSize>(amax);
}

// Per-tensor amax over rows [begin, end): each block reduces its share, then one atomicMax on
// the float's bits (non-negative floats order like their bit patterns). *amax_bits starts at 0.
template <bool kVec>
__global__ void __launch_bounds__(kQuantThreads) fp8_tensor_amax_kernel(const Fp8TensorParams p) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  __shared__ float warp_amax[kQuantThreads / kWarpSize];
  const int64_t first = range_begin(p.row_begin, p.max_rows) * p.hidden;
  const int64_t last = range_end(p.row_end, p.max_rows) * p.hidden;
  const float amax =
      block_amax(share_amax<kVec>(p, first, last, int64_t(blockIdx.x) * blockDim.x + threadIdx.x,
                                  int64_t(gridDim.x) * blockDim.x),
                 warp_amax);
  if (threadIdx.x == 0 && amax > 0.0f) atomicMax(p.amax_bits, __float_as_uint(amax));
}

// Codes of rows [begin, end) with the per-tensor scale: from the amax (dynamic, also written to
// scale_out) or given (static).
template <bool kVec>
__global__ void __launch_bounds__(kQuantThreads)
    fp8_tensor_quantize_kernel(const Fp8TensorParams p) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  const float scale =
      p.scale_in != nullptr ? *p.scale_in : fp8_scale_from_amax(__uint_as_float(*p.amax_bits));
  if (p.scale_out != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *p.scale_out = scale;
  const int64_t first = range_begin(p.row_begin, p.max_rows) * p.hidden;
  const int64_t last = range_end(p.row_end, p.max_rows) * p.hidden;
  quantize_share<kVec>(p, scale, first, last, int64_t(blockIdx.x) * blockDim.x + threadIdx.x,
                       int64_t(gridDim.x) * blockDim.x);
}

// Dynamic per-tensor quantisation of a small tensor in one block and one launch: the amax, the
// scale and the codes (the three-launch path's zeroing, reduction and quantisation cost more
// than the work at decode sizes; the second pass reads what the first brought into cache).
constexpr int kSmallTensorThreads = 1024;
constexpr int64_t kSmallTensorElems = int64_t(1) << 16;  // max_rows * hidden at most

template <bool kVec>
__global__ void __launch_bounds__(kSmallTensorThreads)
    fp8_tensor_dynamic_small_kernel(const Fp8TensorParams p) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  __shared__ float warp_amax[kSmallTensorThreads / kWarpSize];
  const int64_t first = range_begin(p.row_begin, p.max_rows) * p.hidden;
  const int64_t last = range_end(p.row_end, p.max_rows) * p.hidden;
  const float amax =
      block_amax(share_amax<kVec>(p, first, last, threadIdx.x, blockDim.x), warp_amax);
  const float scale = fp8_scale_from_amax(amax);
  if (threadIdx.x == 0) *p.scale_out = scale;
  quantize_share<kVec>(p, scale, first, last, threadIdx.x, blockDim.x);
}

}  // namespace moe::gpu::kernels
