// bf16 (and e4m3) weights for the weight-only grouped GEMM's bf16 (e4m3) instance
// (moe_cuda/wo_gemm.hpp, docs/design.md §6): a stack ([E, rows, K] bf16) as rows of weight tiles,
// [E][tiles][128 rows] [stages x 128 K], K padded with zeros. The tiles hold rows as the quantised
// chunks do (moe_cuda/fp4_chunks.hpp): a gated w13's tile t the gate and up rows of columns
// 64t..64t+63, paired as GatePairing says, a plain stack's tile t rows 128t..128t+127; padding rows
// are zero. Unlike a chunk, a tile's K is not cut into pieces: the kernel's TMA reads 128 bytes of
// K (64 bf16 or 128 e4m3) of 128 rows a stage from this 2D array, swizzling as it lands.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "moe_cuda/fp4_chunks.hpp"

namespace moe::gpu {

// Packs one stack as pack_fp4_stack would (`gate_up`, `pad` and `pairing` mean the same there),
// bf16 bits in and out. Refuses (INTERNAL, naming `name`) a geometry that would cut rows or K.
std::vector<uint16_t> pack_bf16_stack(const uint16_t* weights, int64_t experts, int64_t rows,
                                      int64_t k, int64_t gate_up, std::string_view name,
                                      Fp4Padding pad = {},
                                      GatePairing pairing = GatePairing::kHalves);

// The same tiles of e4m3 weights (fp8_tensor, the GEMM's e4m3 instance), a byte each: the codes
// as given, their per-tensor scales apart.
std::vector<uint8_t> pack_e4m3_stack(const uint8_t* weights, int64_t experts, int64_t rows,
                                     int64_t k, int64_t gate_up, std::string_view name,
                                     Fp4Padding pad = {},
                                     GatePairing pairing = GatePairing::kHalves);

}  // namespace moe::gpu
