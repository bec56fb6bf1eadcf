// The Hopper layout of mxfp4 and nvfp4 weights (docs/design.md §13), read by cutlass_mega's fused
// kernel and trtllm_style's weight-only grouped GEMM: every tile streams one contiguous run of
// chunks, one chunk per pipeline stage, fetched by one bulk copy.
//
// A stack ([E, rows, K/2] e2m1 pairs, scales [E, rows, K/g] with g = 32 ue8m0 or 16 e4m3) becomes
// chunks ordered [E][rows / 128 tiles][K / 128 stages]. A chunk holds 128 weight rows x 128 K:
// first the codes, 64 bytes per row, arranged for the consumer threads (the 16 bytes at
// 16 * q + 4 * i of a row are the codes thread q of the mma needs for K steps 2i and 2i + 1,
// placed as moe_cuda/fp4_decode.hpp cuts them out), then the scale codes, 4 (mx) or 8 (nv) bytes a
// row: 8704 or 9216 bytes, chunks back to back. The tiles of a gated w13 hold gate columns
// 64t..64t+63 and the up rows of the same columns (rows 64t.. and I + 64t..), in one of two
// orders (GatePairing): the order of the kernel that reads them.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace moe::gpu {

enum class Fp4Scales { kMx, kNv };  // ue8m0 per 32 along K, e4m3 per 16 along K

constexpr int64_t kFp4TileRows = 128;
constexpr int64_t kFp4StageK = 128;
constexpr int64_t kFp4CodeBytes = kFp4TileRows * kFp4StageK / 2;  // 8192

// Scale bytes per row of a chunk: 4 (mx) or 8 (nv); the chunk's bytes.
constexpr int64_t fp4_scale_bytes(Fp4Scales s) {
  return s == Fp4Scales::kMx ? 4 : 8;
}
constexpr int64_t fp4_chunk_bytes(Fp4Scales s) {
  return kFp4CodeBytes + kFp4TileRows * fp4_scale_bytes(s);
}

// Where a gated tile's 64 gate and 64 up rows sit among its 128 chunk rows.
//  kHalves:   chunk rows 0-63 gate columns 64t.., rows 64-127 the up rows of the same columns
//             (cutlass_mega's fused kernel: one warp's gate and up items are separate rows).
//  kRowPairs: each 16 chunk rows hold 8 gate columns then the up rows of the same 8 columns, 16
//             rows per 8 columns in column order (the weight-only GEMM: the thread that
//             accumulates chunk rows r and r + 8 of a 16-row block holds a gate/up pair, so the
//             activation needs no exchange between threads).
enum class GatePairing { kHalves, kRowPairs };

// A gated tile's chunk row `r` (0..127): its column within the tile (0..63) and whether it is an
// up row.
struct GatedRow {
  int64_t column;
  bool up;
};
GatedRow gated_chunk_row(int64_t r, GatePairing pairing);

// Padded geometry: `tiles` tiles of 128 rows and `stages` stages of 128 K per expert, past the
// stack's own; 0 = exactly the stack's (which must then fill them).
struct Fp4Padding {
  int64_t tiles = 0, stages = 0;
};

// Packs one stack. `gate_up` > 0: a gated w13 whose up rows start at row `gate_up` (= I), paired
// in each tile as `pairing` says; 0: tiles of 128 consecutive rows. Unpadded: rows % 128 == 0
// (gated: gate_up % 64 == 0) and k % 128 == 0. Padded (`pad`): tile t of a gated stack holds gate
// and up columns 64t..64t+63 and of a plain one rows 128t..128t+127, columns past I (or rows past
// `rows`) and K past `k` zero codes (the scales are [rows, ceil(k / block)], a last block may be
// partial). Refuses by name (moe::Error, INVALID_ARGUMENT) a scale the kernel cannot take exactly:
// a NaN or negative nvfp4 scale, a NaN ue8m0 code, an mx scale outside [2^-99, 2^27]
// (moe_cuda/fp4_decode.hpp). A zero nvfp4 scale zeroes its block's codes (the block is 0 either
// way).
std::vector<uint8_t> pack_fp4_stack(Fp4Scales kind, const uint8_t* codes, const uint8_t* scales,
                                    int64_t experts, int64_t rows, int64_t k, int64_t gate_up,
                                    std::string_view name, Fp4Padding pad = {},
                                    GatePairing pairing = GatePairing::kHalves);

// The same refusals for a stack's scale bytes alone ([matrices, rows, blocks]), naming
// `name`[matrix, row, block] in the caller's own indexing (before it rearranges anything).
void check_fp4_scales(Fp4Scales kind, const uint8_t* scales, int64_t matrices, int64_t rows,
                      int64_t blocks, std::string_view name);

// The packers' geometry: `pad`'s tiles and stages, or where it gives 0 exactly the stack's. Refuses
// (INTERNAL, naming `name`) one that would not hold every row (gated: every gate and up column)
// and every K of the stack, which a packer would silently cut.
Fp4Padding chunk_cover(Fp4Padding pad, int64_t rows, int64_t k, int64_t gate_up,
                       std::string_view name);

// The packers' walk: fn(e, t, r, row) for every chunk row r (0..127) of tile t of expert e that
// holds a weight row (`row`, the canonical row within the expert: padding rows are skipped), one
// (expert, tile) per parallel task, so each task writes only its own chunks.
void for_each_chunk_row(int64_t experts, int64_t tiles, int64_t rows, int64_t gate_up,
                        const std::function<void(int64_t, int64_t, int64_t, int64_t)>& fn,
                        GatePairing pairing = GatePairing::kHalves);

// The canonical row of tile row `r` (0..127) of tile `t`, as the packers order them.
int64_t fp4_source_row(int64_t t, int64_t r, int64_t gate_up,
                       GatePairing pairing = GatePairing::kHalves);

// Element `kk` (0..127) of a chunk row: the 32-bit word that holds its code (the word's first byte
// within the row's 64 code bytes), the word's output it belongs to and its half (0 low, 1 high):
// moe_cuda/fp4_decode.hpp places its bits.
struct CodeAt {
  int word_byte, out, high;
};
CodeAt fp4_code_at(int kk);

}  // namespace moe::gpu
