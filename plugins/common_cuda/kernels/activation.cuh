// Activations of docs/design.md §5 on GEMM1's output rows, fp32 math, bf16 in and out.
//
// NOTES: min and clamp are written as the reference's std::min / std::clamp expand
// ((b < a) ? b : a), not fminf: fminf(NaN, L) is L, std::min(NaN, L) is NaN, and the reference
// is the contract. expf and erfcf are the accurate (not __fast) versions.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "dependent_launch.cuh"
#include "device_utils.cuh"
#include "exact_math.cuh"
#include "params.hpp"
#include "quantize.cuh"

namespace moe::gpu::kernels {

constexpr int kActivationThreads = 128;

// moe_activation and GateUpLayout values (the C enums are not visible to every includer).
enum : int32_t { kSiluMul = 0, kSiluMulClamp = 1, kSwigluOai = 2, kGeluMul = 3, kRelu2 = 4 };
enum : int32_t {
  kConcatenated = 0,
  kInterleavedUpGate = 1,
  kInterleavedGateUp = 2,
  kConcatenatedUpGate = 3
};

__device__ __forceinline__ float ref_min(float a, float b) {
  return (b < a) ? b : a;
}
__device__ __forceinline__ float ref_clamp(float v, float lo, float hi) {
  return (v < lo) ? lo : (hi < v) ? hi : v;
}
// kFast: __expf and an approximate division (a few ulp of fp32, far below the bf16 rounding of
// every output), for epilogues where the math sits between two tiles' tensor-core work.
template <bool kFast = false>
__device__ __forceinline__ float sigmoidf(float x) {
  if constexpr (kFast) return __fdividef(1.0f, 1.0f + __expf(-x));
  return 1.0f / (1.0f + expf(-x));
}
template <bool kFast = false>
__device__ __forceinline__ float siluf(float x) {
  return x * sigmoidf<kFast>(x);
}
// The reference's 0.5 x (1 + erf(x / sqrt 2)) and 0.5 x (1 + tanh(z)), written without the
// cancellation of 1 + erf / 1 + tanh near -1 that fp32 cannot afford (the reference's doubles
// can): 1 + erf(a) = erfc(-a) and 0.5 (1 + tanh(z)) = 1 / (1 + exp(-2z)). For x ~ -4 the
// direct form loses ~1e-3 of the value, enough to move an e4m3 code of a small output.
__device__ __forceinline__ float geluf(float x, bool tanh_form) {
  if (tanh_form) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    const float z = kSqrt2OverPi * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * z));
  }
  constexpr float kInvSqrt2 = 0.7071067811865476f;
  return 0.5f * x * erfcf(-x * kInvSqrt2);
}

// act(g, u); relu2 reads g only (its single input).
template <bool kFast = false>
__device__ __forceinline__ float activate(const ActivationParams& p, int32_t act, float g,
                                          float u) {
  const float limit = p.limit;
  switch (act) {
    case kSiluMulClamp:
      return siluf<kFast>(ref_min(g, limit)) * ref_clamp(u, -limit, limit);
    case kSwigluOai: {
      const float gc = ref_min(g, limit), uc = ref_clamp(u, -limit, limit);
      return (uc + 1.0f) * gc * sigmoidf<kFast>(p.alpha * gc);
    }
    case kGeluMul:
      return geluf(g, p.gelu_tanh != 0) * u;
    case kRelu2: {
      const float r = (g < 0.0f) ? 0.0f : g;  // std::max(x, 0.0)
      return r * r;
    }
    default:
      return siluf<kFast>(g) * u;
  }
}

// act(g[i], u[i]) into g[i] for kN pairs, bit for bit what activate() gives, for a batch held
// in registers (a GEMM epilogue): in silu_mul, silu_mul_clamp and swiglu_oai the sigmoid's
// reciprocal, their only division, is rcp_rn_fast (kernels/exact_math.cuh), so the kN chains
// carry no branch and interleave; pairs outside its range (a sigmoid argument below about -87,
// or NaN) send the whole batch through activate() after it. The expressions are activate()'s, in
// its order. Other activations: activate() on each pair. Returns whether the batch went through
// activate() (measurement).
template <int32_t kAct, int kN>
__device__ __forceinline__ bool activate_batch(const ActivationParams& p, float (&g)[kN],
                                               const float (&u)[kN]) {
  if constexpr (kAct == kSiluMul || kAct == kSiluMulClamp || kAct == kSwigluOai) {
    const float limit = p.limit;
    bool slow = false;
    float out[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      bool here;
      if constexpr (kAct == kSwigluOai) {
        const float gc = ref_min(g[i], limit), uc = ref_clamp(u[i], -limit, limit);
        const float s = rcp_rn_fast(1.0f + expf(-(p.alpha * gc)), here);
        out[i] = (uc + 1.0f) * gc * s;
      } else {
        const float x = kAct == kSiluMulClamp ? ref_min(g[i], limit) : g[i];
        const float v = kAct == kSiluMulClamp ? ref_clamp(u[i], -limit, limit) : u[i];
        const float s = rcp_rn_fast(1.0f + expf(-x), here);
        out[i] = x * s * v;
      }
      slow |= here;  // no short circuit: a branch would split the batch
    }
    if (slow) {  // all of them again, rather than a flag a pair kept in registers
#pragma unroll
      for (int i = 0; i < kN; ++i) out[i] = activate(p, kAct, g[i], u[i]);
    }
#pragma unroll
    for (int i = 0; i < kN; ++i) g[i] = out[i];
    return slow;
  } else {
#pragma unroll
    for (int i = 0; i < kN; ++i) g[i] = activate(p, kAct, g[i], u[i]);
    return true;
  }
}

// Input columns of output i.
__device__ __forceinline__ int64_t gate_col(int32_t layout, int64_t i, int64_t inter) {
  switch (layout) {
    case kConcatenated:
      return i;
    case kConcatenatedUpGate:
      return inter + i;
    case kInterleavedUpGate:
      return 2 * i + 1;
    default:
      return 2 * i;
  }
}
__device__ __forceinline__ int64_t up_col(int32_t layout, int64_t i, int64_t inter) {
  switch (layout) {
    case kConcatenated:
      return inter + i;
    case kConcatenatedUpGate:
      return i;
    case kInterleavedUpGate:
      return 2 * i;
    default:
      return 2 * i + 1;
  }
}

// Eight outputs [i0, i0 + 8) of one row from 16-byte loads (bf16 or fp32 rows), in fp32.
template <class In>
__device__ __forceinline__ void activate_values_x8(const ActivationParams& p, int32_t act,
                                                   const In* in, const float* bias, int64_t i0,
                                                   float (&y)[kVecElems]) {
  const int64_t inter = p.intermediate;
  float g[kVecElems], u[kVecElems];
  if (act == kRelu2) {
    load_bf16x8(in + i0, g);
  } else if (p.layout == kConcatenated) {
    load_bf16x8(in + i0, g);
    load_bf16x8(in + inter + i0, u);
  } else if (p.layout == kConcatenatedUpGate) {
    load_bf16x8(in + i0, u);
    load_bf16x8(in + inter + i0, g);
  } else {
    float lo[kVecElems], hi[kVecElems];  // columns [2*i0, 2*i0 + 16): pairs (first, second)
    load_bf16x8(in + 2 * i0, lo);
    load_bf16x8(in + 2 * i0 + kVecElems, hi);
    const bool up_first = p.layout == kInterleavedUpGate;
#pragma unroll
    for (int e = 0; e < kVecElems / 2; ++e) {
      g[e] = up_first ? lo[2 * e + 1] : lo[2 * e];
      u[e] = up_first ? lo[2 * e] : lo[2 * e + 1];
      g[e + 4] = up_first ? hi[2 * e + 1] : hi[2 * e];
      u[e + 4] = up_first ? hi[2 * e] : hi[2 * e + 1];
    }
  }
#pragma unroll
  for (int e = 0; e < kVecElems; ++e) {
    if (act == kRelu2) u[e] = 0.0f;
    if (bias != nullptr) {
      g[e] += bias[act == kRelu2 ? i0 + e : gate_col(p.layout, i0 + e, inter)];
      if (act != kRelu2) u[e] += bias[up_col(p.layout, i0 + e, inter)];
    }
  }
  // The eight as one batch (activate_batch: activate()'s bits, the sigmoids' reciprocals without
  // a branch each, so their chains interleave), the activation chosen once for the eight.
  switch (act) {
    case kSiluMul:
      activate_batch<kSiluMul>(p, g, u);
      break;
    case kSiluMulClamp:
      activate_batch<kSiluMulClamp>(p, g, u);
      break;
    case kSwigluOai:
      activate_batch<kSwigluOai>(p, g, u);
      break;
    default:  // gelu_mul, relu2: activate() on each pair
#pragma unroll
      for (int e = 0; e < kVecElems; ++e) g[e] = activate(p, act, g[e], u[e]);
  }
#pragma unroll
  for (int e = 0; e < kVecElems; ++e) y[e] = g[e];
}

__device__ __forceinline__ void activate_x8(const ActivationParams& p, int32_t act,
                                            const uint16_t* in, const float* bias, int64_t i0,
                                            uint16_t* out) {
  float y[kVecElems];
  activate_values_x8(p, act, in, bias, i0, y);
  store_bf16x8(out + i0, y);
}

__device__ __forceinline__ void activate_x1(const ActivationParams& p, int32_t act,
                                            const uint16_t* in, const float* bias, int64_t i,
                                            uint16_t* out) {
  const int64_t gc = act == kRelu2 ? i : gate_col(p.layout, i, p.intermediate);
  const int64_t uc = up_col(p.layout, i, p.intermediate);
  float g = bf16_to_float(in[gc]);
  float u = act == kRelu2 ? 0.0f : bf16_to_float(in[uc]);
  if (bias != nullptr) {
    g += bias[gc];
    if (act != kRelu2) u += bias[uc];
  }
  out[i] = float_to_bf16(activate(p, act, g, u));
}

// A block per row and column chunk: grid-stride over the rows to visit (RowWalk) in x, over
// chunks of 8 x blockDim outputs of the row in y, so that a wide row (Mixtral's I = 14336) is
// spread over many blocks instead of one block's sequence of dependent loads. Threads over
// outputs, 8 at a time when kVec (I % 8 == 0, strides % 8 == 0, 16-byte aligned pointers).
template <bool kVec>
__global__ void __launch_bounds__(kActivationThreads) activation_kernel(const ActivationParams p) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  const RowWalk walk = row_walk(p.row_begin, p.row_end, p.max_rows, p.row_list, p.row_list_count);
  const int64_t inter = p.intermediate;
  const int64_t chunk = int64_t(blockDim.x) * kVecElems;
  for (int64_t w = blockIdx.x; w < walk.count; w += gridDim.x) {
    const int64_t r = walk.row(w);
    if (r < 0) continue;
    const int32_t group = p.row_group != nullptr ? p.row_group[r] : 0;
    if (group >= p.skip_begin && group < p.skip_end) continue;  // computed apart
    const int32_t act = (group >= p.silu_begin && group < p.silu_end) ? kSiluMul : p.activation;
    const float* bias = (p.bias != nullptr && group >= 0 && group < p.bias_groups)
                            ? p.bias + int64_t(group) * p.bias_stride
                            : nullptr;                  // (N1)
    const uint16_t* in = p.gemm1 + r * p.gemm1_stride;  // (N1)
    uint16_t* out = p.out + r * p.out_stride;           // (I)
    for (int64_t base = int64_t(blockIdx.y) * chunk; base < inter;
         base += int64_t(gridDim.y) * chunk) {
      if constexpr (kVec) {
        const int64_t i0 = base + int64_t(threadIdx.x) * kVecElems;
        if (i0 < inter) activate_x8(p, act, in, bias, i0, out);
      } else {
#pragma unroll
        for (int e = 0; e < kVecElems; ++e) {
          const int64_t i = base + int64_t(e) * blockDim.x + threadIdx.x;
          if (i < inter) activate_x1(p, act, in, bias, i, out);
        }
      }
    }
  }
}

// The activation with its output quantised per 1x128 block (FP8_1X128 between the GEMMs): a
// block per row and column chunk as above, 8 outputs per thread, a 128-wide block over 16 lanes.
// Every thread runs every step (the shuffles need whole warps); I % 128 == 0, the vector
// preconditions hold. The values are quantised in fp32, never rounded to bf16 first (the reference
// quantises its doubles).
template <class In>
__device__ __forceinline__ const In* gemm1_rows(const ActivationParams& p) {
  if constexpr (sizeof(In) == 4)
    return p.gemm1_f32;
  else
    return p.gemm1;
}

// In: GEMM1's output as bf16 (p.gemm1) or fp32 (p.gemm1_f32).
template <class In>
__global__ void __launch_bounds__(kActivationThreads)
    activation_quantize_kernel(const ActivationParams p) {
  enter_dependent_grid();  // first: launched after the previous kernel (PDL)
  constexpr int kLanes = kQuantBlock / kVecElems;  // 16
  const RowWalk walk = row_walk(p.row_begin, p.row_end, p.max_rows, p.row_list, p.row_list_count);
  const int64_t inter = p.intermediate;
  const int64_t chunk = int64_t(blockDim.x) * kVecElems;  // a multiple of 128
  for (int64_t w = blockIdx.x; w < walk.count; w += gridDim.x) {
    const int64_t r = walk.row(w);
    if (r < 0) continue;  // the whole block skips the row
    const int32_t group = p.row_group != nullptr ? p.row_group[r] : 0;
    if (group >= p.skip_begin && group < p.skip_end) continue;  // computed apart
    const int32_t act = (group >= p.silu_begin && group < p.silu_end) ? kSiluMul : p.activation;
    const float* bias = (p.bias != nullptr && group >= 0 && group < p.bias_groups)
                            ? p.bias + int64_t(group) * p.bias_stride
                            : nullptr;                      // (N1)
    const In* in = gemm1_rows<In>(p) + r * p.gemm1_stride;  // (N1)
    uint8_t* codes = p.out_fp8 + r * p.out_stride;          // (I)
    for (int64_t base = int64_t(blockIdx.y) * chunk; base < inter;
         base += int64_t(gridDim.y) * chunk) {
      const int64_t i0 = base + int64_t(threadIdx.x) * kVecElems;
      const bool on = i0 < inter;
      float y[kVecElems];
      float amax = 0.0f;
      if (on) {
        activate_values_x8(p, act, in, bias, i0, y);
#pragma unroll
        for (int e = 0; e < kVecElems; ++e) amax = fmaxf(amax, fabsf(y[e]));
      }
      const float scale = fp8_scale_from_amax(group_max<kLanes>(amax));
      if (!on) continue;
      const float inv = e4m3_inverse(scale);
      uint32_t lo = 0, hi = 0;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        lo |= uint32_t(to_e4m3(y[e], scale, inv)) << (8 * e);
        hi |= uint32_t(to_e4m3(y[e + 4], scale, inv)) << (8 * e);
      }
      *reinterpret_cast<uint2*>(codes + i0) = make_uint2(lo, hi);
      if (threadIdx.x % kLanes == 0)
        p.out_scales[r * p.scale_row_stride + (i0 / kQuantBlock) * p.scale_block_stride] = scale;
    }
  }
}

}  // namespace moe::gpu::kernels
