// Finalize: the weighted combine of each token's expert rows back into token order.
//
// NOTES: one fixed order per token (slot columns ascending, then the shared row), one fmaf per
// term in fp32 and one rounding to bf16 at the end, so the result is deterministic and a CPU
// model doing the same float operations reproduces it bit for bit. No atomics: a block owns a
// token's whole output row, so accumulating onto the caller's old row is a plain read first.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "dependent_launch.cuh"
#include "device_utils.cuh"
#include "params.hpp"

namespace moe::gpu::kernels {

constexpr int kFinalizeThreads = 128;
constexpr int kFinalizeMaxWidth = 32;  // k + S, as routing

// Columns [c0, c0 + kN) of one expert row, raw (kN = 8: one 16-byte load), and as floats. Loads
// stay raw until their terms are added so that many rows can be in flight in few registers.
template <int kN>
struct RawColumns {
  uint16_t bits;
};
template <>
struct RawColumns<kVecElems> {
  uint4 bits;
};

template <int kN>
__device__ __forceinline__ RawColumns<kN> load_raw(const FinalizeParams& p, int64_t row,
                                                   int64_t c0) {
  const uint16_t* src = p.gemm2 + row * p.hidden + c0;
  if constexpr (kN == kVecElems) {
    return {*reinterpret_cast<const uint4*>(src)};
  } else {
    return {src[0]};
  }
}

template <int kN>
__device__ __forceinline__ void unpack(const RawColumns<kN>& raw, float (&y)[kN]) {
  if constexpr (kN == kVecElems) {
    const uint32_t words[4] = {raw.bits.x, raw.bits.y, raw.bits.z, raw.bits.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      y[2 * i] = __uint_as_float(words[i] << 16);
      y[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
  } else {
    y[0] = bf16_to_float(raw.bits);
  }
}

template <int kN>
__device__ __forceinline__ void load_row(const FinalizeParams& p, int64_t row, int64_t c0,
                                         float (&y)[kN]) {
  unpack(load_raw<kN>(p, row, c0), y);
}

// acc += weight * (y + b2[group]) per column: one fmaf each, the bias added first in fp32.
template <int kN>
__device__ __forceinline__ void add_term(const FinalizeParams& p, int32_t group, float weight,
                                         int64_t c0, const float (&y)[kN], float (&acc)[kN]) {
  const float* bias = (p.bias != nullptr && group >= 0 && group < p.bias_groups)
                          ? p.bias + int64_t(group) * p.hidden + c0
                          : nullptr;
#pragma unroll
  for (int e = 0; e < kN; ++e)
    acc[e] = fmaf(weight, bias ? __fadd_rn(y[e], bias[e]) : y[e], acc[e]);
}

// out[t, c0 : c0 + kN): the token's terms in column order, then the shared row, one rounding.
// Row loads are issued eight at a time, raw, before their terms are added: a top-8 token's rows
// cost one memory round trip, not four (bench/NOTES.md, session 35: -4% of the layer at Qwen3
// T=1); eight 16-byte loads fit the 64 registers that 8 blocks an SM leave, without spilling.
template <int kN>
__device__ __forceinline__ void accumulate_columns(const FinalizeParams& p, int64_t t, int64_t c0,
                                                   const int32_t* s_row, const int32_t* s_group,
                                                   const float* s_weight) {
  constexpr int kLoadsInFlight = 8;
  const int width = p.width;
  float acc[kN];
#pragma unroll
  for (int e = 0; e < kN; ++e) acc[e] = 0.0f;
  for (int j0 = 0; j0 < width; j0 += kLoadsInFlight) {
    RawColumns<kN> raw[kLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u)
      if (j0 + u < width && s_row[j0 + u] >= 0) raw[u] = load_raw<kN>(p, s_row[j0 + u], c0);
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u)
      if (j0 + u < width && s_row[j0 + u] >= 0) {
        float y[kN];
        unpack(raw[u], y);
        add_term(p, s_group[j0 + u], s_weight[j0 + u], c0, y, acc);
      }
  }
  if (s_row[width] >= 0) {  // the shared expert, weight 1, last
    float y[kN];
    load_row(p, s_row[width], c0, y);
#pragma unroll
    for (int e = 0; e < kN; ++e) acc[e] = __fadd_rn(acc[e], y[e]);
  }
  uint16_t* dst = p.out + t * p.hidden + c0;
  if (p.accumulate) {  // the caller's old row, added last in fp32 (ABI 1.4 accumulate)
    float old[kN];
    if constexpr (kN == kVecElems) {
      load_bf16x8(dst, old);
    } else {
      old[0] = bf16_to_float(dst[0]);
    }
#pragma unroll
    for (int e = 0; e < kN; ++e) acc[e] = __fadd_rn(old[e], acc[e]);
  }
  if constexpr (kN == kVecElems) {
    store_bf16x8(dst, acc);
  } else {
    dst[0] = float_to_bf16(acc[0]);
  }
}

// Work items are (token, column tile) pairs, grid-strided: tile_cols = H (a block per token) when
// tokens fill the GPU, narrower so that a few tokens still spread over many blocks. The token's
// slot rows and weights are staged in shared memory for each item.
template <bool kVec>
__global__ void __launch_bounds__(kFinalizeThreads, 8) finalize_kernel(const FinalizeParams p) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  constexpr int kN = kVec ? kVecElems : 1;
  __shared__ int32_t s_row[kFinalizeMaxWidth + 1];    // (W + 1): slot rows, then the shared row
  __shared__ int32_t s_group[kFinalizeMaxWidth + 1];  // (W + 1)
  __shared__ float s_weight[kFinalizeMaxWidth + 1];   // (W + 1)
  const int width = p.width;
  const int64_t tiles = (p.hidden + p.tile_cols - 1) / p.tile_cols;
  for (int64_t item = blockIdx.x; item < p.tokens * tiles; item += gridDim.x) {
    const int64_t t = item / tiles;
    const int64_t tile_begin = (item % tiles) * p.tile_cols;
    const int64_t tile_end = min(p.hidden, tile_begin + p.tile_cols);
    __syncthreads();  // the previous item is done with the staging arrays
    if (threadIdx.x < width) {
      const int32_t row = p.slot_row[t * width + threadIdx.x];
      s_row[threadIdx.x] = row;
      // The group picks the row's bias only: without one, no dependent load of it.
      s_group[threadIdx.x] = row >= 0 && p.bias != nullptr ? p.row_group[row] : -1;
      s_weight[threadIdx.x] = p.weights[t * width + threadIdx.x];
    } else if (threadIdx.x == width) {
      s_row[width] = p.has_shared ? p.slot_row[p.tokens * width + t] : -1;
    }
    __syncthreads();
    for (int64_t c0 = tile_begin + int64_t(threadIdx.x) * kN; c0 < tile_end;
         c0 += int64_t(blockDim.x) * kN)
      accumulate_columns<kN>(p, t, c0, s_row, s_group, s_weight);
  }
}

}  // namespace moe::gpu::kernels
