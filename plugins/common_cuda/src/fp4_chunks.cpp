#include "moe_cuda/fp4_chunks.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "moe/sdk/error.hpp"
#include "moe/sdk/formats.hpp"
#include "moe/sdk/parallel_for.hpp"
#include "moe_cuda/fp4_decode.hpp"

namespace moe::gpu {
namespace {

// The kernel's scale code of one block, or -1 where the block is zero (nvfp4 scale 0).
int scale_code(Fp4Scales kind, uint8_t raw, std::string_view name, int64_t e, int64_t row,
               int64_t block) {
  if (kind == Fp4Scales::kMx) {
    MOE_CHECK(raw != 0xff, MOE_STATUS_INVALID_ARGUMENT, "{}[{}, {}, {}] is the ue8m0 NaN code 0xff",
              name, e, row, block);
    MOE_CHECK(raw >= kMxMinCode && raw <= kMxMaxCode, MOE_STATUS_INVALID_ARGUMENT,
              "{}[{}, {}, {}] = 2^{} is outside the mxfp4 scales the 4-bit kernels "
              "dequantise exactly in bf16, 2^{} to 2^{}",
              name, e, row, block, int(raw) - 127, kMxMinCode - 127, kMxMaxCode - 127);
    return raw;
  }
  const double s = e4m3_to_double(raw);
  MOE_CHECK(!std::isnan(s) && s >= 0, MOE_STATUS_INVALID_ARGUMENT,
            "{}[{}, {}, {}] = {} (e4m3 code 0x{:02x}) is not a valid nvfp4 block "
            "scale (NaN or negative)",
            name, e, row, block, s, raw);
  if (s == 0) return -1;
  int exp = 0;
  const double frac = std::frexp(s, &exp);  // s = frac x 2^exp, frac in [0.5, 1)
  const int e2 = exp - 1, f = int(std::lround((frac * 2 - 1) * 8));
  return (e2 - kNvMinExp) * 8 + f;  // exact: e4m3 has 3 mantissa bits
}

}  // namespace

void check_fp4_scales(Fp4Scales kind, const uint8_t* scales, int64_t matrices, int64_t rows,
                      int64_t blocks, std::string_view name) {
  for (int64_t e = 0; e < matrices; ++e)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t b = 0; b < blocks; ++b)
        scale_code(kind, scales[(e * rows + r) * blocks + b], name, e, r, b);
}

Fp4Padding chunk_cover(Fp4Padding pad, int64_t rows, int64_t k, int64_t gate_up,
                       std::string_view name) {
  const int64_t tiles = pad.tiles > 0 ? pad.tiles : rows / kFp4TileRows;
  const int64_t stages = pad.stages > 0 ? pad.stages : k / kFp4StageK;
  const bool gated_ok = gate_up == 0 || rows == 2 * gate_up;
  const int64_t columns = gate_up > 0 ? gate_up : rows;
  const int64_t per_tile = gate_up > 0 ? kFp4TileRows / 2 : kFp4TileRows;
  MOE_CHECK(gated_ok && tiles * per_tile >= columns && stages * kFp4StageK >= k && k > 0,
            MOE_STATUS_INTERNAL,
            "{}: {} tiles x {} stages of 128 K do not hold rows={} (gate/up at {}) and K={}", name,
            tiles, stages, rows, gate_up, k);
  return {tiles, stages};
}

GatedRow gated_chunk_row(int64_t r, GatePairing pairing) {
  const int64_t half = kFp4TileRows / 2;
  if (pairing == GatePairing::kHalves) return {r < half ? r : r - half, r >= half};
  return {(r / 16) * 8 + r % 8, r % 16 >= 8};
}

void for_each_chunk_row(int64_t experts, int64_t tiles, int64_t rows, int64_t gate_up,
                        const std::function<void(int64_t, int64_t, int64_t, int64_t)>& fn,
                        GatePairing pairing) {
  const int64_t half = kFp4TileRows / 2;
  parallel_for(experts * tiles, [&](int64_t task) {
    const int64_t e = task / tiles, t = task % tiles;
    for (int64_t r = 0; r < kFp4TileRows; ++r) {
      const bool live = gate_up > 0 ? t * half + gated_chunk_row(r, pairing).column < gate_up
                                    : t * kFp4TileRows + r < rows;
      if (live) fn(e, t, r, fp4_source_row(t, r, gate_up, pairing));
    }
  });
}

int64_t fp4_source_row(int64_t t, int64_t r, int64_t gate_up, GatePairing pairing) {
  if (gate_up == 0) return t * kFp4TileRows + r;
  const GatedRow g = gated_chunk_row(r, pairing);
  const int64_t column = t * (kFp4TileRows / 2) + g.column;
  return g.up ? gate_up + column : column;
}

CodeAt fp4_code_at(int kk) {
  const int j = kk / 16, off = kk % 16;
  const int q = (off % 8) / 2, half = off / 8, high_elem = off % 2;
  const int word = j / 2, out = (j % 2) * 2 + half;
  return {q * 16 + word * 4, out, high_elem};
}

std::vector<uint8_t> pack_fp4_stack(Fp4Scales kind, const uint8_t* codes, const uint8_t* scales,
                                    int64_t experts, int64_t rows, int64_t k, int64_t gate_up,
                                    std::string_view name, Fp4Padding pad, GatePairing pairing) {
  const int64_t group = kind == Fp4Scales::kMx ? kMxBlockSize : kNvfp4BlockSize;
  const auto [tiles, stages] = chunk_cover(pad, rows, k, gate_up, name);
  const int64_t scale_cols = (k + group - 1) / group, sbytes = fp4_scale_bytes(kind);
  const int64_t chunk_bytes = fp4_chunk_bytes(kind);
  const int64_t row_bytes = kFp4StageK / 2;  // 64 code bytes of a chunk row
  const std::string scale_name = fmt::format("{}_scale", name);
  // Per element of a chunk row: its word and, for each of the 16 codes, the word's bits it sets.
  struct Placement {
    int word_byte;
    uint32_t bits[16];
  };
  std::vector<Placement> at(kFp4StageK);
  for (int kk = 0; kk < kFp4StageK; ++kk) {
    const CodeAt a = fp4_code_at(kk);
    Placement& pl = at[size_t(kk)];
    pl.word_byte = a.word_byte;
    for (uint32_t c = 0; c < 16; ++c) {
      pl.bits[c] = 0;
      for (int bit = 0; bit < 4; ++bit)
        if ((c >> bit & 1) != 0) pl.bits[c] |= 1u << (kFp4CodeBits[a.out][bit] + 16 * a.high);
    }
  }
  std::vector<uint8_t> out(size_t(experts * tiles * stages * chunk_bytes), 0);
  for_each_chunk_row(
      experts, tiles, rows, gate_up,
      [&](int64_t e, int64_t t, int64_t r, int64_t row) {
        const int64_t src = e * rows + row;
        const uint8_t* q = codes + src * (k / 2);
        const uint8_t* s = scales + src * scale_cols;
        for (int64_t st = 0; st < stages; ++st) {
          uint8_t* chunk = out.data() + ((e * tiles + t) * stages + st) * chunk_bytes;
          uint8_t* crow = chunk + r * row_bytes;
          for (int64_t b = 0; b < kFp4StageK / group; ++b) {
            const int64_t block = st * (kFp4StageK / group) + b;
            if (block >= scale_cols) break;  // K padding: zero codes
            const int code = scale_code(kind, s[block], scale_name, e, src - e * rows, block);
            chunk[kFp4CodeBytes + r * sbytes + b] = uint8_t(code < 0 ? 0 : code);
            if (code < 0) continue;  // a zero scale: its codes stay 0
            for (int64_t kk = b * group; kk < (b + 1) * group && st * kFp4StageK + kk < k; ++kk) {
              const Placement& pl = at[size_t(kk)];
              uint32_t word = 0;  // little-endian, as the kernels load it
              std::memcpy(&word, crow + pl.word_byte, 4);
              word |= pl.bits[fp4_get(q, st * kFp4StageK + kk)];
              std::memcpy(crow + pl.word_byte, &word, 4);
            }
          }
        }
      },
      pairing);
  return out;
}

}  // namespace moe::gpu
