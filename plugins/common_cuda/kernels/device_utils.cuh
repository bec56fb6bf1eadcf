// Small device helpers the kernel families share: bf16 <-> fp32 on 16-byte vectors, row bounds
// read on the device.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace moe::gpu::kernels {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kVecElems = 8;  // bf16 per 16-byte access

__device__ __forceinline__ float bf16_to_float(uint16_t bits) {
  return __uint_as_float(uint32_t(bits) << 16);  // exact
}

__device__ __forceinline__ uint16_t float_to_bf16(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));  // round to nearest even
}

// Eight bf16 at `p` (16-byte aligned) as floats; element 0 is the low half of the first word.
__device__ __forceinline__ void load_bf16x8(const uint16_t* p, float (&out)[kVecElems]) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(words[i] << 16);
    out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

// The same for fp32 rows (two 16-byte loads): one name for both input types.
__device__ __forceinline__ void load_bf16x8(const float* p, float (&out)[kVecElems]) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  const float4 b = *reinterpret_cast<const float4*>(p + 4);
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
  out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}

__device__ __forceinline__ void store_bf16x8(uint16_t* p, const float (&in)[kVecElems]) {
  uint32_t words[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    words[i] = uint32_t(float_to_bf16(in[2 * i])) | (uint32_t(float_to_bf16(in[2 * i + 1])) << 16);
  *reinterpret_cast<uint4*>(p) = make_uint4(words[0], words[1], words[2], words[3]);
}

// [begin, end) of a RowRange: device scalars when given, clamped to [0, max_rows].
__device__ __forceinline__ int64_t range_begin(const int64_t* begin, int64_t max_rows) {
  const int64_t b = begin != nullptr ? *begin : 0;
  return b < 0 ? 0 : (b > max_rows ? max_rows : b);
}
__device__ __forceinline__ int64_t range_end(const int64_t* end, int64_t max_rows) {
  const int64_t e = end != nullptr ? *end : max_rows;
  return e < 0 ? 0 : (e > max_rows ? max_rows : e);
}

// The rows a kernel visits, as positions w in [0, count): [begin, end) of a RowRange (row
// begin + w), or the entries of its list (row list[w]; negative entries are skipped by the
// caller). One read of the device bounds, none of the list until a row is wanted.
struct RowWalk {
  int64_t begin, count;
  const int32_t* list;
  __device__ __forceinline__ int64_t row(int64_t w) const {
    return list != nullptr ? int64_t(list[w]) : begin + w;
  }
};
__device__ __forceinline__ RowWalk row_walk(const int64_t* begin, const int64_t* end,
                                            int64_t max_rows, const int32_t* list,
                                            int64_t list_count) {
  if (list != nullptr) return {0, list_count, list};
  const int64_t b = range_begin(begin, max_rows), e = range_end(end, max_rows);
  return {b, e > b ? e - b : 0, nullptr};
}

}  // namespace moe::gpu::kernels
