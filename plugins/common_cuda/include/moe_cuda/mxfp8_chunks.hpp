// The Hopper weight-only layout of mxfp8 weights (docs/design.md §6), read by the weight-only
// grouped GEMM like the fp4 chunks of moe_cuda/fp4_chunks.hpp: per expert, tiles of 128 rows
// (a gated w13's tile holds 64 columns' gate and up rows, paired as GatePairing says), each a run
// of chunks of 128 K, one chunk per pipeline stage, fetched by one bulk copy.
//
// A chunk holds the codes, 128 bytes a row, then the row's 4 ue8m0 scale codes (one per 32 K):
// 16896 bytes. Within a row, the 32 bytes at 32q are what thread q of the mma (lane % 4) needs:
// word j (K step j, K 16j..16j+15) is mx8_word of the codes of K 16j + 2q, 16j + 2q + 1,
// 16j + 2q + 8, 16j + 2q + 9, both bf16 pairs of the thread's A fragment in that row, placed in
// advance (moe_cuda/mxfp8_decode.hpp).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "moe_cuda/fp4_chunks.hpp"

namespace moe::gpu {

constexpr int64_t kMx8CodeBytes = kFp4TileRows * kFp4StageK;                       // 16384
constexpr int64_t kMx8ScaleBytes = kFp4StageK / 32;                                // 4 a row
constexpr int64_t kMx8ChunkBytes = kMx8CodeBytes + kFp4TileRows * kMx8ScaleBytes;  // 16896

// Packs one stack ([E, rows, k] e4m3 codes, [E, rows, ceil(k / 32)] ue8m0 scales), with the
// rows, gate/up pairing and padding of pack_fp4_stack. Refuses by name (moe::Error,
// INVALID_ARGUMENT) an e4m3 NaN code (0x7f, 0xff: the kernel's bit placement would turn it into a
// finite number) and a scale the kernel cannot apply exactly (a NaN code, or outside
// [2^-124, 2^7]) unless its block's codes are all zero (any scale gives zeros: an exporter's
// 2^-127 for an all-zero block is taken).
std::vector<uint8_t> pack_mxfp8_stack(const uint8_t* codes, const uint8_t* scales, int64_t experts,
                                      int64_t rows, int64_t k, int64_t gate_up,
                                      std::string_view name, Fp4Padding pad = {},
                                      GatePairing pairing = GatePairing::kHalves);

// The byte offset, within a chunk row's 128 code bytes, of the word that holds K element `kk`
// (0..127) of the row.
int mx8_word_at(int kk);

}  // namespace moe::gpu
