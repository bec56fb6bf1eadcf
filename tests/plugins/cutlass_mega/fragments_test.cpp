// cutlass_mega's consumer fragments (kernels/fragments.hpp) on any machine: ldmatrix x4 and the
// m16n8k16 fragment layouts emulated over the kernel's own address and register functions, so
// every A and B operand of a stage is checked element by element without a GPU. A tile element's
// value is its own coordinates, so a wrong row, K offset or register shows as a wrong value.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "kernels/fragments.hpp"

namespace moe::mega::kernels {
namespace {

constexpr int kLanes = 32;

// ldmatrix x4 over a tile of 16-bit elements: lane l gives the address (in elements) of row l % 8
// of matrix l / 8; register q of lane l is row l / 4 of matrix q, elements 2 (l % 4) and + 1.
using Regs = std::array<std::array<std::array<int, 2>, 4>, kLanes>;  // [lane][register][half]
Regs ldmatrix_x4(const std::vector<int>& tile, const std::array<int, kLanes>& address) {
  Regs r{};
  for (int l = 0; l < kLanes; ++l)
    for (int q = 0; q < 4; ++q)
      for (int h = 0; h < 2; ++h) r[l][q][h] = tile.at(address[q * 8 + l / 4] + 2 * (l % 4) + h);
  return r;
}

// A token tile: kTok rows of `steps` x 16 elements (32 bytes a K step), `ld` elements apart;
// element (n, k) holds n * 10000 + k.
struct TokenTile {
  int rows, cols, ld;
  std::vector<int> elems;
  TokenTile(int rows_, int steps) : rows(rows_), cols(16 * steps), ld(cols + 8) {
    elems.assign(size_t(rows) * ld, -1);
    for (int n = 0; n < rows; ++n)
      for (int k = 0; k < cols; ++k) elems[size_t(n) * ld + k] = n * 10000 + k;
  }
};

// Every K step's B operand for every n-tile of an item of nt tiles, from the loads the kernel
// makes: b0 of lane l is (k 2 (l % 4), + 1; token l / 4) of the tile's 16 x 8 block, b1 the same
// at k + 8.
void expect_token_operands(int nt, int steps) {
  const TokenTile x(64, steps);
  const int loads = token_loads(nt, steps), pairs = token_load_pairs(nt);
  std::vector<std::vector<Regs>> b(loads, std::vector<Regs>(pairs));
  for (int i = 0; i < loads; ++i)
    for (int pp = 0; pp < pairs; ++pp) {
      std::array<int, kLanes> address{};
      for (int l = 0; l < kLanes; ++l) {
        const TokenAddress at = token_load_address(nt, i, pp, l);
        ASSERT_EQ(at.byte % 16, 0) << "nt " << nt << " load " << i << " lane " << l;
        ASSERT_LT(at.row, 8 * nt) << "a row past the item's tiles";
        ASSERT_LE(at.byte + 16, 32 * steps) << "a load past the stage's K";
        address[l] = at.row * x.ld + at.byte / 2;
      }
      b[i][pp] = ldmatrix_x4(x.elems, address);
    }
  for (int j = 0; j < steps; ++j)
    for (int t = 0; t < nt; ++t) {
      const TokenRegs r = token_regs(nt, j, t);
      ASSERT_TRUE(r.load >= 0 && r.load < loads && r.pair >= 0 && r.pair < pairs && r.reg >= 0 &&
                  r.reg + 1 < 4)
          << "nt " << nt << " step " << j << " tile " << t;
      for (int l = 0; l < kLanes; ++l)
        for (int h = 0; h < 2; ++h) {
          const int token = 8 * t + l / 4, k = 16 * j + 2 * (l % 4) + h;
          EXPECT_EQ(b[r.load][r.pair][l][r.reg][h], token * 10000 + k)
              << "b0: nt " << nt << " step " << j << " tile " << t << " lane " << l;
          EXPECT_EQ(b[r.load][r.pair][l][r.reg + 1][h], token * 10000 + k + 8)
              << "b1: nt " << nt << " step " << j << " tile " << t << " lane " << l;
        }
    }
}

TEST(MegaFragments, EveryTokenOperandOfAStageIsItsTokensAtItsKStep) {
  for (int steps : {4, 8})  // bf16 and e4m3 stages (128-byte token rows), fp4's (256 bytes)
    for (int nt : {1, 2, 4, 8}) expect_token_operands(nt, steps);
}

// The A operand from the 128-byte-swizzled weight tile (chunk c of row r at c ^ (r % 8)): a0 =
// rows g, K 2q..; a1 rows g + 8; a2, a3 the same at K + 8 (g = lane / 4, q = lane % 4), of the
// warp's 16 rows.
TEST(MegaFragments, EveryWeightOperandOfAStageIsItsRowsAtItsKStep) {
  constexpr int kRows = 128, kRowBytes = 128, kElems = kRowBytes / 2;
  std::vector<int> tile(size_t(kRows) * kElems, -1);
  for (int r = 0; r < kRows; ++r)
    for (int e = 0; e < kElems; ++e) {
      const int chunk = (2 * e) / 16, within = (2 * e) % 16;
      tile[size_t(r) * kElems + (((chunk ^ (r % 8)) * 16 + within) / 2)] = r * 1000 + e;
    }
  for (int warp = 0; warp < 8; ++warp)
    for (int j = 0; j < kRowBytes / 32; ++j) {
      std::array<int, kLanes> address{};
      for (int l = 0; l < kLanes; ++l) {
        const int byte = weight_load_offset(warp, l, j, kRowBytes);
        ASSERT_EQ(byte % 16, 0);
        address[l] = byte / 2;
      }
      const Regs a = ldmatrix_x4(tile, address);
      for (int l = 0; l < kLanes; ++l)
        for (int q = 0; q < 4; ++q)
          for (int h = 0; h < 2; ++h) {
            const int row = warp * 16 + l / 4 + (q % 2) * 8;
            const int k = 16 * j + 2 * (l % 4) + h + (q / 2) * 8;
            EXPECT_EQ(a[l][q][h], row * 1000 + k)
                << "warp " << warp << " step " << j << " lane " << l << " a" << q;
          }
    }
}

// fp8_block with f16 tokens (kFp8F16W): both f16 mmas of every 32-byte K step of a stage,
// emulated. The e4m3 weight tile (swizzled as TMA lays it) is read by the kernel's ldmatrix
// addresses; each A register is the converted pair of the 16-bit half f16_a_reg / f16_a_half
// name; each B pair is the token row's 8 bytes at f16_token_byte. For every row, token and
// logical K of each mma the A and B elements must be the same physical K, and over a stage every
// (row, token) must meet each of the 128 K exactly once.
TEST(MegaFragments, F16TokenMmasPairEveryWeightWithItsTokenAtTheSameK) {
  constexpr int kRows = 128, kRowBytes = 128, kTokens = 8, kLd = 288;
  std::vector<int> tile(size_t(kRows) * kRowBytes, -1);  // a byte: r * 1000 + k
  for (int r = 0; r < kRows; ++r)
    for (int k = 0; k < kRowBytes; ++k) {
      const int chunk = k / 16, within = k % 16;
      tile[size_t(r) * kRowBytes + ((chunk ^ (r % 8)) * 16 + within)] = r * 1000 + k;
    }
  auto token_element = [](int byte_in_row, int n) {  // an f16 of token n: n * 1000 + K
    return n * 1000 + byte_in_row / 2;
  };
  for (int warp = 0; warp < 8; ++warp) {
    std::vector<int> met(size_t(16) * kTokens * kRowBytes, 0);  // [row][token][K]
    for (int kb = 0; kb < kRowBytes; kb += 32) {
      // ldmatrix x4 in 16-bit units: register q of lane l holds two b16, each two e4m3 bytes.
      int a8[kLanes][4][4];  // [lane][register][byte]
      for (int l = 0; l < kLanes; ++l)
        for (int q = 0; q < 4; ++q) {
          const int src_lane = q * 8 + l / 4;  // the lane whose address row l / 4 of matrix q reads
          const int byte = weight_load_offset(warp, src_lane, kb / 32, kRowBytes) + 4 * (l % 4);
          for (int b = 0; b < 4; ++b) a8[l][q][b] = tile[size_t(byte + b)];
        }
      for (int h = 0; h < 2; ++h)
        for (int row = 0; row < 16; ++row)
          for (int n = 0; n < kTokens; ++n)
            for (int lk = 0; lk < 16; ++lk) {
              // m16n8k16: A (row, lk) is lane (row % 8, lk % 8 / 2), register row / 8 + 2 (lk / 8),
              // half lk % 2; B (lk, n) is lane (n, lk % 8 / 2), register lk / 8, half lk % 2.
              const int q = (lk % 8) / 2, r = row / 8 + 2 * (lk / 8), e = lk % 2;
              const int la = (row % 8) * 4 + q;
              const int a = a8[la][f16_a_reg(h, r)][2 * f16_a_half(r) + e];
              const int b = token_element(f16_token_byte(kb, h, q) + 4 * (lk / 8) + 2 * e, n);
              ASSERT_EQ(a / 1000, warp * 16 + row) << "A row: h " << h << " lk " << lk;
              ASSERT_EQ(b / 1000, n);
              ASSERT_EQ(a % 1000, b % 1000)
                  << "warp " << warp << " kb " << kb << " mma " << h << " row " << row << " lk "
                  << lk << ": A's K and B's K differ";
              ++met[(size_t(row) * kTokens + n) * kRowBytes + a % 1000];
            }
    }
    for (size_t i = 0; i < met.size(); ++i) ASSERT_EQ(met[i], 1) << "warp " << warp << " at " << i;
  }
  static_assert(f16_token_byte(96, 1, 3) + 8 <= 256 && 256 + 32 == kLd, "the row and its pad");
}

// The wgmma instances' token tile: every 16-byte piece the producer places lands once inside the
// tile, and the hardware's reads for each 32-byte K step (a K-major operand, 128-byte swizzle:
// at the descriptor's byte plus 8-row groups 1024 bytes apart and rows 128 apart, bits 4-6 of the
// address XORed with bits 7-9; the atom 1024-byte aligned) find, for every token row and both
// 16-byte halves of the step, the piece holding that row's bytes of that K: e4m3 (one or two
// 128-byte atoms a stage) and 4-bit's bf16 rows (512 bytes a stage: four atoms), for 32 rows.
TEST(MegaFragments, WgmmaTokenTilesHoldEachPieceWhereTheSwizzledReadsLook) {
  constexpr int kRowsTile = 32;
  for (const int row_bytes : {128, 256, 512}) {
    const int pieces = row_bytes / 16, tile_bytes = kRowsTile * row_bytes;
    std::vector<int> tile(size_t(tile_bytes / 16), -1);  // the piece at each 16 bytes: n * 100 + j
    for (int n = 0; n < kRowsTile; ++n)
      for (int j = 0; j < pieces; ++j) {
        const int at = wgmma_token_piece(kRowsTile, n, j);
        ASSERT_TRUE(at >= 0 && at + 16 <= tile_bytes && at % 16 == 0) << n << " " << j;
        ASSERT_EQ(tile[size_t(at / 16)], -1) << "two pieces at " << at;
        tile[size_t(at / 16)] = n * 100 + j;
      }
    for (int step = 0; step < row_bytes / 32; ++step)
      for (int n = 0; n < kRowsTile; ++n)
        for (int half = 0; half < 2; ++half) {
          const int logical =
              wgmma_token_step(kRowsTile, step) + (n / 8) * 1024 + (n % 8) * 128 + 16 * half;
          const int physical = logical ^ (((logical >> 7) & 7) << 4);
          EXPECT_EQ(tile[size_t(physical / 16)], n * 100 + 2 * step + half)
              << "row bytes " << row_bytes << ", step " << step << ", row " << n;
        }
  }
}

}  // namespace
}  // namespace moe::mega::kernels
