// cutlass_mega's consumer fragments (plain C++, also compiled for the device, so the kernel and the
// host tests share them): where a lane points its ldmatrix x4 in a stage's weight tile and token
// tile, and which of the loaded registers each m16n8k16 (or e4m3 k32) mma takes as its B operand.
// A K step is 32 bytes: 16 bf16 or 32 e4m3 elements. tests/plugins/cutlass_mega/fragments_test.cpp
// emulates ldmatrix and the mma fragment layouts over these and checks every operand; and where
// the wgmma instances place their token rows and where their descriptors point.
#pragma once

#include "kernels/host_device.hpp"

namespace moe::mega::kernels {

// The byte of a 128-row weight tile of `row_bytes`-byte rows (128-byte swizzle: the 16-byte chunk c
// of row r sits at chunk c ^ (r % 8)) at which lane `lane` of consumer warp `warp` points for K
// step j: row warp * 16 + lane % 16, chunk 2 j + lane / 16. The four matrices are then rows 0-7 and
// 8-15 of the warp's 16 at the step's first 16 bytes, then at its second: the A fragment.
MOE_MEGA_HD constexpr int weight_load_offset(int warp, int lane, int j, int row_bytes) {
  const int row = warp * 16 + lane % 16, chunk = 2 * j + lane / 16;
  return row * row_bytes + ((chunk ^ (row % 8)) << 4);
}

// An item of nt 8-slot n-tiles (1, or whole 16-slot pairs) over a stage of `steps` K steps: its
// token loads (ldmatrix x4), each of `pairs` (one per 16-slot pair) ldmatrix.
MOE_MEGA_HD constexpr int token_loads(int nt, int steps) {
  return nt == 1 ? steps / 2 : steps;
}
MOE_MEGA_HD constexpr int token_load_pairs(int nt) {
  return nt == 1 ? 1 : nt / 2;
}

// Where lane `lane` points for load i, pair pp: a token row of the tile and a byte of it.
//   nt = 1: tokens 0-7 at K bytes 64 i + 16 (lane / 8): the matrices of K steps 2 i and 2 i + 1;
//   nt >= 2: tokens 16 pp + 0-7 at 32 i and 32 i + 16, then tokens 16 pp + 8-15 at the same.
struct TokenAddress {
  int row, byte;
};
MOE_MEGA_HD constexpr TokenAddress token_load_address(int nt, int i, int pp, int lane) {
  return nt == 1
             ? TokenAddress{lane % 8, 64 * i + (lane / 8) * 16}
             : TokenAddress{pp * 16 + (lane / 16) * 8 + lane % 8, 32 * i + ((lane / 8) % 2) * 16};
}

// K step j's B operand for n-tile t: registers `reg` and `reg` + 1 of load `load`, pair `pair`.
struct TokenRegs {
  int load, pair, reg;
};
MOE_MEGA_HD constexpr TokenRegs token_regs(int nt, int j, int t) {
  return nt == 1 ? TokenRegs{j / 2, 0, 2 * (j % 2)} : TokenRegs{j, t / 2, 2 * (t % 2)};
}

// fp8_block with f16 tokens (kFp8F16W): a 32-byte K step of e4m3 weights, loaded as the e4m3
// mma's A fragment (lane q: K 4q..4q+3 of rows g, g + 8 in registers 0, 1, and 16 + those in 2,
// 3), is multiplied as two f16 m16n8k16 mmas. Register r of mma h's A is the f16 pair of 16-bit
// half `f16_a_half(r)` of loaded register `f16_a_reg(h, r)`: the mma's logical K (2q, 2q + 1) and
// (2q + 8, 2q + 9) are physical 16 h + 4q + (0, 1) and (2, 3). A token row's f16 at those K are
// one 8-byte load at `f16_token_byte(k_byte, h, q)` of the row (k_byte: the step's first e4m3 byte
// of the stage): its B pair. tests/plugins/cutlass_mega/fragments_test.cpp emulates both mmas.
MOE_MEGA_HD constexpr int f16_a_reg(int h, int r) {
  return 2 * h + r % 2;
}
MOE_MEGA_HD constexpr int f16_a_half(int r) {
  return r / 2;
}
MOE_MEGA_HD constexpr int f16_token_byte(int k_byte, int h, int q) {
  return 2 * k_byte + 32 * h + 8 * q;
}

// The wgmma instances' token tile (their B operand: K-major, 128-byte swizzle): 128-byte atoms of
// K (64 bf16 or 128 e4m3), each `rows` x 128 bytes, one after the other; in an atom row n at
// n x 128 bytes (8-row groups 1024 bytes apart), its 16-byte chunk c at chunk c ^ (n % 8). Byte
// offset of 16-byte piece j of token row n (the row's bytes 16 j..: kernels/ring.cuh
// produce_tokens), and the unswizzled offset a descriptor names for the 32-byte K step `step` of
// the tile (the hardware applies the swizzle). fragments_test.cpp emulates wgmma's reads.
MOE_MEGA_HD constexpr int wgmma_token_piece(int rows, int n, int j) {
  return (j / 8) * (rows * 128) + n * 128 + 16 * ((j ^ n) & 7);
}
MOE_MEGA_HD constexpr int wgmma_token_step(int rows, int step) {
  return (step / 4) * (rows * 128) + (step % 4) * 32;
}

}  // namespace moe::mega::kernels
