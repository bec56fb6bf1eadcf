// wgmma shared-memory descriptors for sm90a kernels (plain device code, CuTe's descriptor type).
#pragma once

#include <cstdint>

#include <cute/arch/mma_sm90_desc.hpp>

namespace moe::gpu::kernels {

// A K-major operand in a 128-byte swizzled tile (rows of 128 bytes, the 16-byte chunk c of row r
// at chunk c ^ (r % 8), 1024-byte aligned): 8-row core groups 1024 bytes apart. Advancing the
// start address by 32 bytes moves one k32 (e4m3) or k16 (bf16) step along K.
__device__ __forceinline__ uint64_t kmajor_sw128_desc(const void* p) {
  cute::GmmaDescriptor d;
  d.bitfield.start_address_ = uint16_t(cute::cast_smem_ptr_to_uint(p) >> 4);
  d.bitfield.leading_byte_offset_ = 1;
  d.bitfield.stride_byte_offset_ = 1024 >> 4;
  d.bitfield.base_offset_ = 0;
  d.bitfield.layout_type_ = 1;  // 128-byte swizzle
  return d.desc_;
}

// `desc` moved `bytes` (a multiple of 16) along its operand. The start address is the low 14 bits
// and shared memory ends below 2^18 bytes, so only the low word changes: a 32-bit add, where a
// 64-bit one made the compiler carry into the high word and move both words to uniform registers
// for every wgmma.
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) {
  return (desc & 0xFFFFFFFF00000000ull) | uint32_t(uint32_t(desc) + (bytes >> 4));
}

}  // namespace moe::gpu::kernels
